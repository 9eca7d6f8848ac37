//! Secrets and sensitive values: secret headers never reach the journal or a
//! view, `sensitive` body values are masked in every view, and the raw body is
//! given out only when enabled, each read journaled.

use serde_json::Value;
use unicity::providers::signature;

use crate::support::app::{TestApp, refund, spawn_app, spawn_app_with};
use crate::support::counts::Counts;
use crate::support::downstream::{Behaviour, Downstream};
use crate::support::logs::{Logs, logs};

/// A signed source that masks one header of its own on top of the defaults.
const PARTNER: &str = r#"
[[sources]]
slug = "partner"
tenant = "acme"
provider = "norefid"
demo_secret = "partner-test-secret"
masked_headers = ["X-Partner-Pin"]
signature = { scheme = "hmac", header = "x-signature", encoding = "hex" }
"#;

const API_KEY: &str = "sk_live_secret123";
const PIN: &str = "pin-5550-8732-secret";
const EMAIL: &str = "ann.customer@example.com";

/// Posts `body` to the partner source with the secret headers, signed with
/// `secret`.
async fn post_partner(app: &TestApp, secret: &str, body: &[u8]) -> crate::support::app::Reply {
    let scheme = &app.source("partner").scheme;
    let mut headers = signature::sign(scheme, secret, "m", 0, body).expect("signable");
    headers.push(("x-api-key".to_owned(), API_KEY.to_owned()));
    headers.push(("x-partner-pin".to_owned(), PIN.to_owned()));
    app.post_raw("partner", body.to_vec(), &headers).await
}

/// The value of header `name` on a delivery's view, as shown.
pub fn header<'a>(view: &'a Value, name: &str) -> Option<&'a str> {
    view["headers"]
        .as_array()?
        .iter()
        .find(|h| h[0] == name)
        .and_then(|h| h[1].as_str())
}

#[tokio::test]
async fn default_and_configured_secret_headers_are_masked_in_the_view_and_the_journal() {
    let app = spawn_app_with(PARTNER).await;
    let accepted = post_partner(
        &app,
        "partner-test-secret",
        &refund("pay_1", 100, Some("rr_1")),
    )
    .await;
    assert_eq!(accepted.status, 202, "{}", accepted.json);
    let rejected = post_partner(&app, "not-the-secret", &refund("pay_2", 100, Some("rr_2"))).await;
    assert_eq!(rejected.status, 401, "{}", rejected.json);

    for reply in [&accepted, &rejected] {
        let id = reply.json["delivery_id"].as_str().expect("journaled");
        let view = app.delivery(id).await;
        assert_eq!(view.status, 200);
        let text = view.json.to_string();
        assert!(!text.contains(API_KEY), "{text}");
        assert!(!text.contains(PIN), "{text}");
        // The headers are kept, their values masked.
        assert_eq!(header(&view.json, "x-api-key"), Some("[redacted]"));
        assert_eq!(header(&view.json, "x-partner-pin"), Some("[redacted]"));
    }
    assert_eq!(app.journal_rows_containing("x-partner-pin").await, 2);
    assert_eq!(app.journal_rows_containing(API_KEY).await, 0);
    assert_eq!(app.journal_rows_containing(PIN).await, 0);
}

/// Header names no list names, each secret by the rule (a word in the name).
const RULE_NAMED: [&str; 5] = [
    "x-authorization",
    "x-access-key",
    "x-password",
    "x-api_key",
    "x-client-secret-key",
];

#[tokio::test]
async fn headers_named_by_the_secret_words_are_masked_in_the_view_the_journal_and_the_logs() {
    let logs = logs();
    let app = spawn_app().await;
    // A value of this test's own per header: the logs are shared by the binary.
    let run = uuid::Uuid::new_v4().simple().to_string();
    let secrets: Vec<(String, String)> = RULE_NAMED
        .iter()
        .map(|name| ((*name).to_owned(), format!("hush-{name}-{run}")))
        .collect();
    let post = |secret: &'static str, body: Vec<u8>| {
        let mut headers =
            signature::sign(&app.source("hmac").scheme, secret, "m", 0, &body).expect("signable");
        headers.extend(secrets.iter().cloned());
        let app = &app;
        async move { app.post_raw("hmac", body, &headers).await }
    };
    // Signed over the raw headers and body: masking comes after the check.
    let accepted = post("hmac-test-secret", refund("pay_rule_1", 100, Some("rr_1"))).await;
    assert_eq!(accepted.status, 202, "{}", accepted.json);
    let rejected = post("not-the-secret", refund("pay_rule_2", 100, Some("rr_2"))).await;
    assert_eq!(rejected.status, 401, "{}", rejected.json);

    for reply in [&accepted, &rejected] {
        let id = reply.json["delivery_id"].as_str().expect("journaled");
        let view = app.delivery(id).await;
        assert_eq!(view.status, 200);
        let text = view.json.to_string();
        for (name, value) in &secrets {
            assert!(!text.contains(value.as_str()), "{name} shown: {text}");
            assert_eq!(header(&view.json, name), Some("[redacted]"), "{name}");
        }
    }
    for (name, value) in &secrets {
        assert_eq!(app.journal_rows_containing(value).await, 0, "{name}");
        // The name is kept on the reception and on the rejection.
        assert_eq!(app.journal_rows_containing(name).await, 2, "{name}");
    }
    let logged = logs.text();
    assert!(
        logged.contains(accepted.json["delivery_id"].as_str().unwrap()),
        "the delivery's log line is captured"
    );
    for (name, value) in &secrets {
        assert!(!logged.contains(value.as_str()), "{name} logged");
    }
}

#[tokio::test]
async fn a_query_string_is_never_logged() {
    let logs = logs();
    let app = spawn_app().await;
    let token = format!("secretvalue{}", uuid::Uuid::new_v4().simple());
    let reply = app
        .client
        .post(format!("{}/hooks/open?token={token}", app.address))
        .header("content-type", "application/json")
        .body(refund("pay_query", 100, Some("rr_q")))
        .send()
        .await
        .expect("request sent");
    let (logged, line) = logged_line(&logs, reply).await;
    assert!(line.contains("http.target=/hooks/open "), "{line}");
    assert!(!logged.contains(&token), "{line}");
}

#[tokio::test]
async fn a_one_time_link_is_logged_redacted_however_its_path_is_spelled() {
    let logs = logs();
    let app = spawn_app().await;
    for (spelling, route) in [
        ("/p%61ssword", "/password"),
        ("/s%65tup", "/setup"),
        ("/password", "/password"),
    ] {
        // Given a link's token, in a path the router decodes to its route
        let token = format!("linktoken{}", uuid::Uuid::new_v4().simple());
        let page = app
            .client
            .get(format!("{}{spelling}/{token}", app.address))
            .send()
            .await
            .expect("request sent");
        // When the page answers (an unknown link's page)
        assert!(
            page.status().is_client_error(),
            "{spelling}: {}",
            page.status()
        );
        // Then the request is logged under the route, its token redacted
        let logged = logs.text();
        assert!(
            logged.contains(&format!("http.target={route}/[redacted]")),
            "{spelling}"
        );
        assert!(!logged.contains(&token), "{spelling}: token logged");
    }
}

#[tokio::test]
async fn a_client_cannot_choose_the_address_it_is_logged_under() {
    let logs = logs();
    let app = spawn_app().await;
    // Given a client that is not a trusted proxy claiming another address,
    let reply = app
        .client
        .post(format!("{}/hooks/open", app.address))
        .header("content-type", "application/json")
        .header("x-forwarded-for", "203.0.113.66")
        .header("forwarded", "for=198.51.100.77")
        .body(refund("pay_forged_ip", 100, Some("rr_ip")))
        .send()
        .await
        .expect("request sent");
    // then its request is logged under the address it connected from.
    let (_, line) = logged_line(&logs, reply).await;
    assert!(line.contains("http.client_ip=127.0.0.1"), "{line}");
    assert!(!line.contains("203.0.113.66"), "{line}");
    assert!(!line.contains("198.51.100.77"), "{line}");
}

/// Everything logged, and the line naming the delivery `reply` accepted.
async fn logged_line(logs: &Logs, reply: reqwest::Response) -> (String, String) {
    assert_eq!(reply.status(), 202);
    let id = reply.json::<Value>().await.expect("json")["delivery_id"]
        .as_str()
        .expect("id")
        .to_owned();
    let logged = logs.text();
    let line = logged
        .lines()
        .find(|l| l.contains(&id))
        .unwrap_or_else(|| panic!("no log line names {id}"))
        .to_owned();
    (logged, line)
}

fn with_email(body: &[u8]) -> Vec<u8> {
    let mut value: Value = serde_json::from_slice(body).expect("json");
    value["customer_email"] = Value::String(EMAIL.to_owned());
    serde_json::to_vec(&value).expect("json")
}

#[tokio::test]
async fn a_sensitive_field_is_masked_everywhere_in_the_view_and_decisions_are_unchanged() {
    let app = spawn_app().await;
    // Without a refund reference the key is the canonical body, email sealed in.
    let body = with_email(&refund("pay_1", 1500, None));
    let first = app.post_raw("open", body.clone(), &[]).await;
    assert_eq!(first.status, 202, "{}", first.json);
    assert_eq!(first.json["strategy"], "norefid-refund-fingerprint@1");
    // Keys still see the clear value: the same refund matches, another
    // customer's otherwise equal refund does not.
    let retry = app.post_raw("open", body, &[]).await;
    assert_eq!(retry.json["key"], first.json["key"]);
    assert_eq!(
        retry.json["reason"], "weak_match_critical",
        "{}",
        retry.json
    );
    let mut other: Value =
        serde_json::from_slice(&with_email(&refund("pay_1", 1500, None))).unwrap();
    other["customer_email"] = Value::String("bob@example.com".to_owned());
    let other = app
        .post_raw("open", serde_json::to_vec(&other).unwrap(), &[])
        .await;
    assert_ne!(other.json["key"], first.json["key"]);
    assert_eq!(other.json["decision"], "process", "{}", other.json);

    let id = first.json["delivery_id"].as_str().expect("id");
    let view = app.delivery(id).await;
    assert_eq!(view.status, 200);
    let text = view.json.to_string();
    assert!(!text.contains(EMAIL), "{text}");
    assert!(!text.contains("ann.customer"), "{text}");
    // The body keeps every other value and shows the email as a keyed tag;
    // the journal keeps no copy of the body (a fingerprint key's proof is
    // the key), so the tag appears once.
    let tag = view.json["body"]["customer_email"].as_str().expect("tag");
    assert!(tag.starts_with("hmac:") && tag.ends_with('…'), "{tag}");
    assert_eq!(view.json["body"]["payment_id"], "pay_1");
    assert_eq!(text.matches(tag).count(), 1, "{text}");
    assert_eq!(view.json["decision"]["action"], first.json["decision"]);
}

#[tokio::test]
async fn the_raw_body_is_refused_while_reads_are_disabled() {
    let app = spawn_app().await;
    let posted = app
        .post_raw("open", with_email(&refund("pay_1", 1, None)), &[])
        .await;
    let id = posted.json["delivery_id"].as_str().expect("id");
    let reply = app.get(&format!("/api/deliveries/{id}/raw")).await;
    assert_eq!(reply.status, 403, "{}", reply.json);
    assert_eq!(reply.json["code"], "raw_body_reads_disabled");
    assert_eq!(app.journal_count("RawBodyRead").await, 0);
}

#[tokio::test]
async fn an_enabled_raw_read_returns_the_exact_bytes_and_is_journaled() {
    let app = spawn_app_with("[engine]\nraw_body_reads = true\n").await;
    let raw = format!(
        "{{ \"type\":\"refund.created\", \"payment_id\":\"pay_1\",\n \"amount\":15.00, \"currency\":\"EUR\", \"customer_email\":\"{EMAIL}\" }}"
    );
    let posted = app.post_raw("open", raw.clone(), &[]).await;
    assert_eq!(posted.status, 202, "{}", posted.json);
    let id = posted.json["delivery_id"].as_str().expect("id");

    let response = app
        .client
        .get(format!("{}/api/deliveries/{id}/raw", app.address))
        .send()
        .await
        .expect("request sent");
    assert_eq!(response.status().as_u16(), 200);
    let bytes = response.bytes().await.expect("body");
    assert_eq!(&bytes[..], raw.as_bytes());

    let reads = format!(
        "SELECT COUNT(*) FROM journal WHERE event_type = 'RawBodyRead' AND delivery_id = '{id}'"
    );
    assert_eq!(app.count(&reads).await, 1);
    let by_peer = format!("{reads} AND CAST(data AS TEXT) LIKE '%127.0.0.1%'");
    assert_eq!(
        app.count(&by_peer).await,
        1,
        "the reader's address is recorded"
    );
    // The read shows in the delivery's history; the view stays masked.
    let view = app.delivery(id).await;
    let events: Vec<&str> = view.json["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["event_type"].as_str())
        .collect();
    assert!(events.contains(&"RawBodyRead"), "{events:?}");
    assert!(!view.json.to_string().contains(EMAIL));
    // Who read it, and from where, is the audit trail's to show (admins and
    // engineers), not every reader's of the delivery.
    let read = view.json["events"]
        .as_array()
        .expect("events")
        .iter()
        .find(|e| e["event_type"] == "RawBodyRead")
        .expect("the read");
    assert!(read["data"]["client_address"].is_null(), "{read}");
    assert!(read["data"]["operator"].is_null(), "{read}");

    let unknown = app
        .get(&format!("/api/deliveries/{}/raw", uuid::Uuid::now_v7()))
        .await;
    assert_eq!(unknown.status, 404);
    assert_eq!(unknown.json["code"], "delivery_not_found");
    assert_eq!(app.count(&reads).await, 1);
}

#[tokio::test]
async fn a_downstream_answer_echoing_a_sensitive_value_is_masked_in_the_view() {
    // The downstream is sent the event whole and names the customer in the
    // reference it answers with.
    const AT: &str = "/customers/ann.customer@example.com/refunds/1";
    let downstream = Downstream::start(Behaviour::ApplyAt(AT)).await;
    let app = spawn_app_with(&downstream.sink_toml(2000)).await;
    let body = with_email(&refund("pay_echo", 1500, Some("rr_echo")));
    let first = app.post_raw("open", body, &[]).await;
    assert_eq!(first.status, 202, "{}", first.json);
    app.wait_applied(1).await;

    let id = first.json["delivery_id"].as_str().expect("id");
    let view = app.delivery(id).await;
    let text = view.json.to_string();
    assert!(!text.contains(EMAIL), "{text}");
    let answer = view.json["attempts"][0]["answer"]
        .as_str()
        .expect("an answer");
    assert!(
        answer.starts_with("/customers/") && answer.ends_with("/refunds/1"),
        "{answer}"
    );
    let reference = view.json["effects"][0]["downstream_ref"]
        .as_str()
        .expect("a reference");
    assert_eq!(reference, answer, "masked the same way");
}

/// The effect a look-alike is held against is shown on its case's page:
/// its references are masked there as on the delivery's that caused it.
#[tokio::test]
async fn a_downstream_answer_echoing_a_sensitive_value_is_masked_on_the_case_page() {
    const AT: &str = "/customers/ann.customer@example.com/refunds/1";
    let downstream = Downstream::start(Behaviour::ApplyAt(AT)).await;
    let app = spawn_app_with(&downstream.sink_toml(2000)).await;
    let body = with_email(&refund("pay_echo", 1500, None));
    let first = app.post_raw("open", body.clone(), &[]).await;
    assert_eq!(first.status, 202, "{}", first.json);
    app.wait_applied(1).await;
    // A second refund alike: held for a person, against the first's effect
    let again = app.post_raw("open", body, &[]).await;
    let case_id = again.json["case_id"].as_str().expect("a case");
    let case = app.get(&format!("/api/cases/{case_id}")).await;
    let reference = case.json["existing_effect"]["downstream_ref"]
        .as_str()
        .expect("the first refund's reference");
    assert!(
        reference.starts_with("/customers/") && reference.ends_with("/refunds/1"),
        "{reference}"
    );
    let mut support =
        crate::support::forms::signed_in(&app, "sam", unicity::auth::Role::Support).await;
    let page = support.get(&format!("/cases/{case_id}")).await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("/refunds/1"), "the reference is shown");
    for text in [case.json.to_string(), page.body] {
        assert!(!text.contains(EMAIL), "{text}");
    }
}

/// An unknown outcome the downstream's status URL settles applied, naming
/// the effect by an id that echoes the customer's email: the reference the
/// case was resolved with is masked wherever it is listed.
#[tokio::test]
async fn a_status_answer_echoing_a_sensitive_value_is_masked_in_the_queue_and_the_view() {
    const AT: &str = "/customers/ann.customer@example.com/refunds/1";
    let downstream = Downstream::start(Behaviour::ApplyThenHangAt(AT)).await;
    let app = spawn_app_with(&format!(
        "[engine]\nsweep_interval_ms = 100\nlookup_retry_secs = 1\n\n{}",
        downstream.sink_toml_with_status(300)
    ))
    .await;
    let sent = app
        .post_raw(
            "open",
            with_email(&refund("pay_st", 700, Some("rr_st"))),
            &[],
        )
        .await;
    assert_eq!(sent.json["decision"], "process", "{}", sent.json);
    let id = sent.json["delivery_id"].as_str().expect("an id");
    app.wait_journal_containing("CaseResolved", "effect_confirmed", 1)
        .await;
    let queue = app.get("/api/cases?status=resolved").await;
    let reference = queue.json["cases"][0]["resolution_reference"]
        .as_str()
        .expect("the reference it was resolved with");
    assert!(
        reference.starts_with("/customers/") && reference.ends_with("/refunds/1"),
        "{reference}"
    );
    let view = app.delivery(id).await;
    let case_id = queue.json["cases"][0]["case_id"].as_str().expect("a case");
    let case = app.get(&format!("/api/cases/{case_id}")).await;
    let mut support =
        crate::support::forms::signed_in(&app, "sam", unicity::auth::Role::Support).await;
    let page = support.get("/cases?status=resolved").await;
    assert!(page.body.contains("/refunds/1"), "the reference is listed");
    for text in [
        queue.json.to_string(),
        view.json.to_string(),
        case.json.to_string(),
        page.body,
    ] {
        assert!(!text.contains(EMAIL), "{text}");
    }
}

/// A Standard Webhooks strategy that declares a contact's email sensitive
/// (for the provider's every view), used by no hierarchy.
const CONTACT_EMAIL_SENSITIVE: &str = r#"
[[strategies]]
name = "std-contact"
version = 1
provider = "standard-webhooks"
event_types = ["contact.*"]
kind = "business_reference"
strength = "strong"
horizon = "7d"
effect_type = "contact.sync"
criticality = "reversible"
fields = [{ name = "contact", path = "$.data.id" }]
sensitive = ["$.data.email"]
"#;

/// A delivery id that comes back with another body is a collision. Neither
/// body's unkeyed fingerprint is shown for it — to the sender in the answer,
/// nor to any role on the delivery's or the case's page: the first body's
/// would confirm a guess of its email offline, beside the masked tag.
#[tokio::test]
async fn a_delivery_id_that_comes_back_with_another_body_shows_neither_bodys_fingerprint() {
    let app = spawn_app_with(CONTACT_EMAIL_SENSITIVE).await;
    let secret = crate::support::app::secret_of(app.source("std"));
    let now = chrono::Utc::now().timestamp();
    let body = |kind: &str| {
        serde_json::to_vec(&serde_json::json!({
            "type": "contact.updated", "timestamp": "2026-12-07T04:00:00Z",
            "data": {"id": "ct_1", "kind": kind, "email": EMAIL}
        }))
        .unwrap()
    };
    let first = app
        .post_signed_with("std", &secret, "msg_fp_1", now, &body("lead"))
        .await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    let again = app
        .post_signed_with("std", &secret, "msg_fp_1", now + 5, &body("customer"))
        .await;
    assert_eq!(
        again.json["reason"], "transport_id_collision",
        "{}",
        again.json
    );
    let fingerprints = crate::support::probe::Probe::of(&app.db)
        .rows("SELECT body_fingerprint FROM transport_links")
        .await;
    assert_eq!(fingerprints.len(), 1);
    let fingerprint = fingerprints[0][0].clone().expect("a fingerprint");
    let case_id = again.json["case_id"].as_str().expect("a case");
    let second = again.json["delivery_id"].as_str().expect("an id");
    let shown = [
        again.json.to_string(),
        app.delivery(second).await.json.to_string(),
        app.get(&format!("/api/cases/{case_id}"))
            .await
            .json
            .to_string(),
    ];
    for text in shown {
        assert!(!text.contains(&fingerprint), "{text}");
        assert!(!text.contains(EMAIL), "{text}");
    }
    // A collision decided before 2026-12-07 named the first body's
    // fingerprint in its case (and its decision, which the journal keeps as
    // written): its page hides it too.
    let postgres = app.db.get_database_backend() == sea_orm::DbBackend::Postgres;
    let rewrite = if postgres {
        format!(
            "UPDATE cases SET details = REPLACE(details::text, 'as first received', '{fingerprint}')::jsonb"
        )
    } else {
        format!("UPDATE cases SET details = REPLACE(details, 'as first received', '{fingerprint}')")
    };
    sea_orm::ConnectionTrait::execute_unprepared(&app.db, &rewrite)
        .await
        .expect("an earlier version's case");
    let rewritten =
        format!("SELECT COUNT(*) FROM cases WHERE CAST(details AS TEXT) LIKE '%{fingerprint}%'");
    assert_eq!(app.count(&rewritten).await, 1, "the case rewritten");
    let legacy = app.get(&format!("/api/cases/{case_id}")).await.json;
    assert!(!legacy.to_string().contains(&fingerprint), "{legacy}");
}

/// A raw read that waited for the writer while its token was demoted gives
/// nothing: the caller is read again where the read is journaled, before
/// any byte leaves.
#[tokio::test]
async fn a_raw_read_that_waited_while_its_token_was_demoted_gives_no_bytes() {
    use crate::support::held::get_while_its_token_is_demoted;
    let app = spawn_app_with("[engine]\nraw_body_reads = true\n").await;
    let posted = app
        .post_raw("open", with_email(&refund("pay_held", 1, None)), &[])
        .await;
    let id = posted.json["delivery_id"].as_str().expect("id").to_owned();
    // When its token is demoted while the read waits on the change
    let response = get_while_its_token_is_demoted(&app, &format!("/api/deliveries/{id}/raw")).await;
    // Then it is refused, with nothing journaled
    assert_eq!(response.status().as_u16(), 403);
    let text = response.text().await.expect("a body");
    assert!(!text.contains(EMAIL), "{text}");
    assert_eq!(app.journal_count("RawBodyRead").await, 0);
}

#[tokio::test]
async fn a_raw_body_read_another_site_asks_for_in_a_signed_in_engineers_name_is_refused() {
    let app = spawn_app_with("[engine]\nraw_body_reads = true\n").await;
    let posted = app
        .post_signed("hmac", &refund("pay_raw", 700, Some("rr_raw")))
        .await;
    let id = posted.json["delivery_id"].as_str().expect("id");
    let mut engineer =
        crate::support::forms::signed_in(&app, "eng", unicity::auth::Role::Engineer).await;
    let raw = format!("{}/api/deliveries/{id}/raw", app.address);
    let reads = "SELECT COUNT(*) FROM journal WHERE event_type = 'RawBodyRead'";
    // An image on a sibling subdomain's page (the cookie is SameSite, so
    // the browser sends it) makes no read, none journaled in their name;
    // from this site's own page, or typed in the address bar, it is read.
    for (site, status) in [
        ("same-site", 403),
        ("cross-site", 403),
        ("same-origin", 200),
        ("none", 200),
    ] {
        let request = crate::support::forms::bare()
            .get(&raw)
            .header("sec-fetch-site", site);
        let answer = engineer.send(request).await;
        assert_eq!(answer.status.as_u16(), status, "{site}: {}", answer.body);
    }
    assert_eq!(app.count(reads).await, 2);
}
