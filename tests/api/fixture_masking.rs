//! A fixture is committed to a repository: what it holds leaves the system.
//! No value a strategy declares sensitive is in it — not a number nor any
//! leaf of an object at a sensitive path, not a value sent with JSON escapes,
//! not the same value in the resolution's note or in what the provider's API
//! was asked — nor a header the source masks; and it still replays as it was
//! decided and resolved.

use serde_json::{Value, json};
use unicity::domain::fixture::{Delivery, Fixture};
use unicity::services::fixtures;

use crate::support::app::{TestApp, fresh_database, spawn_app, spawn_app_with, spawn_on};
use crate::support::counts::Counts;
use crate::support::provider::ProviderApi;

/// The case `case_id`, resolved, as the case page exports it: the file's
/// text and the fixture.
async fn exported(app: &TestApp, case_id: &str) -> (String, Fixture) {
    let response = app.export_fixture(case_id).await;
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    let fixture = serde_json::from_str(&text).expect("a fixture");
    (text, fixture)
}

/// The differences a replay of `fixture` on a fresh database finds, its
/// strategies configured as `base` (a configuration file's text).
async fn differences(fixture: &Fixture, base: &str) -> Vec<String> {
    let (url, _dir) = fresh_database().await;
    fixtures::replay(fixture, base, &url)
        .await
        .expect("the replay runs")
        .differences()
}

/// A delivery's body as the replay reads it.
fn document(delivery: &Delivery) -> Value {
    serde_json::from_slice(&delivery.bytes().unwrap()).expect("a JSON body")
}

/// Posts `first` then `second` (signed, on `slug`) and returns the case the
/// second opened as a weak match of the first.
pub(crate) async fn weak_match(app: &TestApp, slug: &str, first: &[u8], second: &[u8]) -> String {
    let one = app.post_signed(slug, first).await;
    assert_eq!(one.json["decision"], "process", "{}", one.json);
    app.wait_applied(1).await;
    let two = app.post_signed(slug, second).await;
    assert_eq!(two.json["reason"], "weak_match_critical", "{}", two.json);
    two.json["case_id"].as_str().expect("a case").to_owned()
}

/// A weak refund strategy of the `norefid` provider that declares the whole
/// `customer` object sensitive.
pub(crate) const CUSTOMER_SENSITIVE: &str = r#"
[[strategies]]
name = "refund-customer"
version = 1
provider = "norefid"
event_types = ["refund.*"]
kind = "canonical_fingerprint"
strength = "weak"
horizon = "30d"
effect_type = "refund.create"
criticality = "critical"
scope = [{ name = "resource_type", value = "payment" }]
discriminants = [
  { name = "payment", path = "$.payment_id" },
  { name = "amount", path = "$.amount" },
  { name = "currency", path = "$.currency" },
]
sensitive = ["$.customer"]

[strategies.normalize]
volatile = [{ path = "$.sent_at", reason = "the time of this send attempt" }]

[[hierarchies]]
provider = "norefid"
event_type = "refund.*"
strategies = ["refund-customer"]
"#;

#[tokio::test]
async fn every_leaf_of_a_sensitive_object_is_masked_and_the_fixture_still_replays() {
    let app = spawn_app_with(CUSTOMER_SENSITIVE).await;
    let body = |sent: &str| {
        serde_json::to_vec(&json!({
            "type": "refund.created", "payment_id": "pay_obj", "amount": 700,
            "currency": "EUR", "sent_at": sent,
            "customer": {
                "id": 48213977, "name": "Quentin Privatus",
                "contact": { "email": "quentin.privatus@example.org" },
                "balance": -1234.25, "vip": true, "tags": ["tier-gold-hidden"],
            },
        }))
        .unwrap()
    };
    // Given two refunds alike but for their send time, the second held,
    let case_id = weak_match(
        &app,
        "hmac",
        &body("2026-12-02T10:00:00Z"),
        &body("2026-12-02T10:00:05Z"),
    )
    .await;
    let resolved = app
        .resolve(
            &case_id,
            json!({"resolution": "process_as_distinct", "note": "two refunds", "authoritative_ref": "re_obj_2"}),
        )
        .await;
    assert_eq!(resolved.status, 200);
    // when the case is exported,
    let (text, fixture) = exported(&app, &case_id).await;
    // then no leaf of the customer is in it, numbers included,
    for clear in [
        "48213977",
        "Quentin",
        "Privatus",
        "quentin.privatus",
        "1234.25",
        "tier-gold-hidden",
    ] {
        assert!(!text.contains(clear), "{clear} is in the fixture: {text}");
    }
    let customers: Vec<Value> = fixture
        .deliveries
        .iter()
        .map(|d| document(d)["customer"].clone())
        .collect();
    assert_eq!(customers.len(), 2);
    // each replaced as the same value in both deliveries, a number by a
    // number of its sign and kind, what reveals nothing (a flag) kept,
    let customer = &customers[0];
    assert_eq!(customers[0], customers[1]);
    assert!(customer["id"].is_u64(), "{customer}");
    assert!(customer["balance"].is_f64(), "{customer}");
    assert!(customer["balance"].as_f64().unwrap() < 0.0, "{customer}");
    assert!(customer["name"].as_str().unwrap().starts_with("masked-"));
    assert!(
        customer["contact"]["email"]
            .as_str()
            .unwrap()
            .starts_with("masked-")
    );
    assert_eq!(customer["vip"], true);
    // what is not under the sensitive path is left as it was,
    assert_eq!(document(&fixture.deliveries[0])["amount"], 700);
    // and the fixture replays as it was decided and resolved.
    assert_eq!(
        differences(&fixture, CUSTOMER_SENSITIVE).await,
        Vec::<String>::new()
    );
}

#[tokio::test]
async fn a_sensitive_value_sent_with_json_escapes_is_masked_and_the_fixture_still_replays() {
    let app = spawn_app().await;
    // The same customer email, once with escapes (`\u00eb`, `\/`), once as
    // plain UTF-8: one value, two encodings.
    let body = |sent: &str, email: &str| {
        format!(
            r#"{{"type":"refund.created","payment_id":"pay_esc","amount":700,"currency":"EUR","sent_at":"{sent}","customer_email":"{email}"}}"#
        )
        .into_bytes()
    };
    let escaped = body("2026-12-02T10:00:00Z", r"zo\u00eb.privata\/x@example.org");
    let plain = body("2026-12-02T10:00:05Z", "zoë.privata/x@example.org");
    let case_id = weak_match(&app, "hmac", &escaped, &plain).await;
    let resolved = app
        .resolve(
            &case_id,
            json!({"resolution": "confirm_duplicate", "note": "one refund: a retry"}),
        )
        .await;
    assert_eq!(resolved.status, 200);
    let (text, fixture) = exported(&app, &case_id).await;
    // Neither encoding is in the file nor in the bytes a replay sends,
    assert!(!text.contains("privata"), "{text}");
    let emails: Vec<Value> = fixture
        .deliveries
        .iter()
        .map(|d| {
            let bytes = d.bytes().unwrap();
            assert!(
                !String::from_utf8_lossy(&bytes).contains("privata"),
                "{}",
                String::from_utf8_lossy(&bytes)
            );
            document(d)["customer_email"].clone()
        })
        .collect();
    // both read as one masked value,
    assert!(
        emails[0].as_str().unwrap().starts_with("masked-"),
        "{emails:?}"
    );
    assert_eq!(emails[0], emails[1]);
    // and the fixture replays as it was decided and resolved.
    let base = unicity::config::FileConfig::read(None).unwrap();
    assert_eq!(differences(&fixture, &base).await, Vec::<String>::new());
}

const EMAIL: &str = "ines.privada@example.org";
const ENCODED: &str = "ines.privada%40example.org";

/// An app whose look-ups ask the provider's API (which lists no refund) with
/// the customer's email, and two look-alike refunds on `payment` carrying
/// it: the case stays for a person, the look-up journaled with the email
/// percent-encoded in its URL. The provider's API (kept alive), the app,
/// the case and its delivery.
async fn looked_up_with_email(payment: &str) -> (ProviderApi, TestApp, String, String) {
    let provider = ProviderApi::start(200, json!({ "refunds": [] })).await;
    let app = spawn_app_with(&provider.config_with(
        "/payments/{payment_id}/refunds?email={customer_email}",
        "payment = \"resource\"\namount = \"amount\"\ncurrency = \"currency\"\n",
    ))
    .await;
    let body = |sent: &str| {
        serde_json::to_vec(&json!({
            "type": "refund.created", "payment_id": payment, "amount": 700,
            "currency": "EUR", "sent_at": sent, "customer_email": EMAIL,
        }))
        .unwrap()
    };
    let one = app.post_signed("hmac", &body("2026-12-02T10:00:00Z")).await;
    assert_eq!(one.json["decision"], "process", "{}", one.json);
    app.wait_applied(1).await;
    let two = app.post_signed("hmac", &body("2026-12-02T10:00:05Z")).await;
    assert_eq!(two.json["reason"], "weak_match_critical", "{}", two.json);
    let case_id = two.json["case_id"].as_str().expect("a case").to_owned();
    let delivery_id = two.json["delivery_id"].as_str().expect("an id").to_owned();
    app.wait_journal("LookupPerformed", 1).await;
    assert_eq!(
        app.journal_count_containing("LookupPerformed", ENCODED)
            .await,
        1
    );
    (provider, app, case_id, delivery_id)
}

#[tokio::test]
async fn the_resolution_note_and_the_look_ups_are_scrubbed_of_sensitive_values() {
    // The provider's API lists no refund, asked with the customer's email:
    // the case stays for a person, the look-up journaled with its URL.
    let (_provider, app, case_id, _) = looked_up_with_email("pay_note").await;
    // A person resolves it, naming the customer in the note;
    let resolved = app
        .resolve(
            &case_id,
            json!({
                "resolution": "process_as_distinct",
                "note": format!("{EMAIL} confirmed both refunds by phone"),
                "authoritative_ref": "re_note_2",
            }),
        )
        .await;
    assert_eq!(resolved.status, 200);
    let (text, fixture) = exported(&app, &case_id).await;
    // the file names the customer nowhere, as text or in a URL,
    assert!(!text.contains(EMAIL), "{text}");
    assert!(!text.contains(ENCODED), "{text}");
    assert!(!text.contains("ines.privada"), "{text}");
    // the note and the look-up say the rest of what they said,
    assert!(
        fixture
            .case
            .note
            .ends_with(" confirmed both refunds by phone"),
        "{}",
        fixture.case.note
    );
    assert!(
        fixture.case.note.starts_with("masked-"),
        "{}",
        fixture.case.note
    );
    assert_eq!(fixture.case.lookups.len(), 1, "{:?}", fixture.case.lookups);
    let url = fixture.case.lookups[0]["url"].as_str().unwrap();
    assert!(
        url.contains("/payments/pay_note/refunds?email=masked-"),
        "{url}"
    );
    // and the fixture replays as it was decided and resolved.
    let base = unicity::config::FileConfig::read(None).unwrap();
    assert_eq!(differences(&fixture, &base).await, Vec::<String>::new());
}

#[tokio::test]
async fn a_sensitive_value_in_a_look_ups_url_is_masked_on_every_page_that_shows_it() {
    // Given a look-up journaled with the customer's email in its URL,
    // percent-encoded as the provider's API is asked with it
    let (_provider, app, case_id, delivery_id) = looked_up_with_email("pay_views").await;
    // When the case and the delivery are read, in the API and in the pages
    for path in [
        format!("/api/cases/{case_id}"),
        format!("/cases/{case_id}"),
        format!("/api/deliveries/{delivery_id}"),
        format!("/deliveries/{delivery_id}"),
    ] {
        let page = app.get(&path).await;
        assert_eq!(page.status, 200, "{path}: {}", page.json);
        let text = page.json.to_string();
        // Then the look-up is there, its URL masked, the email nowhere
        assert!(
            text.contains("/payments/pay_views/refunds?email=hmac:"),
            "{path}"
        );
        assert!(!text.contains(ENCODED), "{path}");
        assert!(!text.contains(EMAIL), "{path}");
    }
}

#[tokio::test]
async fn a_body_that_is_not_json_leaves_masked_whole_and_replays_as_it_was_decided() {
    // Given a refund whose body is not UTF-8 (one Latin-1 byte), so that no
    // sensitive path can be found in it, quarantined with a case
    let app = spawn_app().await;
    let body = b"{\"type\":\"refund.created\",\"payment_id\":\"pay_latin\",\"amount\":700,\"currency\":\"EUR\",\"customer_email\":\"ines.privada@example.org\",\"name\":\"Jos\xE9\"}";
    let reply = app.post_signed("hmac", body).await;
    assert_eq!(reply.json["reason"], "unparseable_body", "{}", reply.json);
    let case_id = reply.json["case_id"].as_str().expect("a case").to_owned();
    let resolved = app
        .resolve(
            &case_id,
            json!({"resolution": "reject", "note": "not a refund we can read"}),
        )
        .await;
    assert_eq!(resolved.status, 200, "{}", resolved.json);
    // When the case is exported
    let (text, fixture) = exported(&app, &case_id).await;
    // Then the email is in the file neither as text nor in the body's bytes,
    assert!(!text.contains("ines.privada"), "{text}");
    let bytes = fixture.deliveries[0].bytes().expect("base64");
    let email = EMAIL.as_bytes();
    assert!(!bytes.windows(email.len()).any(|w| w == email));
    assert!(!bytes.windows(9).any(|w| w == b"pay_latin"));
    // the byte that made it unreadable is still there,
    assert!(bytes.windows(2).any(|w| w == b"\xE9\""));
    // and the fixture replays as it was decided and resolved.
    let base = unicity::config::FileConfig::read(None).unwrap();
    assert_eq!(differences(&fixture, &base).await, Vec::<String>::new());
}

/// An unsigned source of the `norefid` provider, with `extra` lines.
fn partner_source(extra: &str) -> String {
    format!(
        "[[sources]]\nslug = \"partner\"\ntenant = \"acme\"\nprovider = \"norefid\"\nenvironment = \"live\"\nallow_unsigned = true\nsignature = {{ scheme = \"none\" }}\n{extra}\n"
    )
}

#[tokio::test]
async fn a_header_the_source_masks_is_left_out_even_when_it_was_received_before_it_was_masked() {
    // Given a source that masks no partner header when two refunds arrive,
    let app = spawn_app_with(&partner_source("")).await;
    let headers = [
        ("x-partner-pin".to_owned(), "pin-77331".to_owned()),
        ("x-partner-trace".to_owned(), "trace-1".to_owned()),
    ];
    let body = |sent: &str| {
        serde_json::to_vec(&json!({
            "type": "refund.created", "payment_id": "pay_hdr", "amount": 700,
            "currency": "EUR", "sent_at": sent,
        }))
        .unwrap()
    };
    let first = app
        .post_raw("partner", body("2026-12-02T10:00:00Z"), &headers)
        .await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    app.wait_applied(1).await;
    let second = app
        .post_raw("partner", body("2026-12-02T10:00:05Z"), &headers)
        .await;
    assert_eq!(
        second.json["reason"], "weak_match_critical",
        "{}",
        second.json
    );
    let case_id = second.json["case_id"].as_str().unwrap().to_owned();
    let resolved = app
        .resolve(
            &case_id,
            json!({"resolution": "confirm_duplicate", "note": "a retry"}),
        )
        .await;
    assert_eq!(resolved.status, 200);
    // when the source is configured to mask the pin, as the delivery page
    // then shows it,
    let masking = spawn_on(
        &app.database_url,
        &partner_source("masked_headers = [\"x-partner-pin\"]"),
        None,
    )
    .await;
    let (text, fixture) = exported(&masking, &case_id).await;
    // the export leaves it out as well, and keeps the other headers.
    assert!(!text.contains("pin-77331"), "{text}");
    for delivery in &fixture.deliveries {
        assert!(
            delivery
                .headers
                .iter()
                .all(|(name, _)| name != "x-partner-pin"),
            "{:?}",
            delivery.headers
        );
        assert!(
            delivery
                .headers
                .iter()
                .any(|(name, value)| name == "x-partner-trace" && value == "trace-1"),
            "{:?}",
            delivery.headers
        );
    }
}

/// An unkeyed hash of a body that holds a sensitive value lets whoever sees
/// it confirm a guess of that value offline (the rest of the body is shown):
/// the views show the body's digests — its hash, its canonical fingerprint,
/// a transport key made from its hash — by a keyed tag instead.
#[tokio::test]
async fn the_digests_of_a_body_with_a_sensitive_value_are_shown_keyed_not_as_computed() {
    use sha2::{Digest, Sha256};
    let app = spawn_app().await;
    let body = r#"{"type":"refund.created","payment_id":"pay_dig","amount":700,"currency":"EUR","customer_email":"ann.guessable@example.org"}"#;
    let sent = app.post_signed("open", body.as_bytes()).await;
    assert_eq!(sent.json["decision"], "process", "{}", sent.json);
    let id = sent.json["delivery_id"].as_str().expect("an id").to_owned();
    let raw_hash = hex::encode(Sha256::digest(body.as_bytes()));
    let probe = crate::support::probe::Probe::of(&app.db);
    let stored = probe
        .rows(&format!(
            "SELECT CAST(data AS TEXT) FROM journal WHERE delivery_id = '{id}' \
             AND event_type IN ('KeyDerived', 'DeliveryDecided')"
        ))
        .await;
    let stored: Value = serde_json::from_str(stored[0][0].as_deref().expect("data")).unwrap();
    let derived = if stored["key"].is_object() {
        &stored["key"]
    } else {
        &stored
    };
    let fingerprint = derived["body_fingerprint"]
        .as_str()
        .expect("a fingerprint")
        .to_owned();
    let transport_key = derived["transport_key"].as_str().expect("a key").to_owned();

    let shown = app.get(&format!("/api/deliveries/{id}")).await;
    assert_eq!(shown.status, 200);
    let text = shown.json.to_string();
    for (what, digest) in [
        ("the raw body's hash", &raw_hash),
        ("the canonical fingerprint", &fingerprint),
        ("the transport key made from the raw hash", &transport_key),
    ] {
        assert!(!text.contains(digest.as_str()), "{what} shown: {text}");
    }
    assert!(!text.contains("ann.guessable"), "{text}");
    let page = crate::support::forms::signed_in(&app, "sue", unicity::auth::Role::Support)
        .await
        .get(&format!("/deliveries/{id}"))
        .await;
    for digest in [&raw_hash, &fingerprint, &transport_key] {
        assert!(!page.body.contains(&digest[..16]), "on the page: {digest}");
    }
}

/// A GoCardless strategy no hierarchy uses that declares an event's
/// metadata email sensitive: written against one event, as every strategy
/// path is, not against the `events[]` envelope a delivery arrives in.
const EVENT_EMAIL_SENSITIVE: &str = r#"
[[strategies]]
name = "gocardless-contact"
version = 1
provider = "gocardless"
event_types = ["mandates.*"]
kind = "business_reference"
strength = "strong"
horizon = "30d"
effect_type = "mandate.note"
criticality = "reversible"
fields = [{ name = "event", path = "$.id" }]
sensitive = ["$.metadata.email"]
"#;

/// A GoCardless event whose metadata carries `email`.
fn event_with_email(id: &str, payment: &str, email: &str) -> Value {
    json!({
        "id": id, "created_at": "2026-12-07T10:00:00.000Z",
        "resource_type": "payments", "action": "confirmed",
        "links": { "payment": payment },
        "details": { "origin": "gocardless", "cause": "payment_confirmed" },
        "metadata": { "email": email }
    })
}

#[tokio::test]
async fn an_events_sensitive_value_is_masked_inside_the_batch_it_arrived_in() {
    let app = spawn_app_with(EVENT_EMAIL_SENSITIVE).await;
    let batch = |events: Vec<Value>| serde_json::to_vec(&json!({ "events": events })).unwrap();
    // Given a batch of two events and a batch of one
    let two = app
        .post_signed(
            "gocardless",
            &batch(vec![
                event_with_email("EV_MAIL_A", "PM_MAIL_A", "alba.secret@example.org"),
                event_with_email("EV_MAIL_B", "PM_MAIL_B", "bruno.secret@example.org"),
            ]),
        )
        .await;
    assert_eq!(two.status, 202, "{}", two.json);
    let one = app
        .post_signed(
            "gocardless",
            &batch(vec![event_with_email(
                "EV_MAIL_C",
                "PM_MAIL_C",
                "carla.secret@example.org",
            )]),
        )
        .await;
    assert_eq!(one.json["decision"], "process", "{}", one.json);
    // Then neither delivery's page shows an email, in its body or elsewhere
    for reply in [&two, &one] {
        let id = reply.json["delivery_id"].as_str().expect("an id");
        let shown = app.get(&format!("/api/deliveries/{id}")).await;
        assert_eq!(shown.status, 200, "{}", shown.json);
        assert!(
            !shown.json.to_string().contains(".secret@"),
            "{}",
            shown.json
        );
    }

    // Given the batch of one's event sent again about another payment (its
    // id reused: a case), rejected by a person
    let again = app
        .post_signed(
            "gocardless",
            &batch(vec![event_with_email(
                "EV_MAIL_C",
                "PM_MAIL_OTHER",
                "carla.secret@example.org",
            )]),
        )
        .await;
    let case_id = again.json["case_id"]
        .as_str()
        .unwrap_or_else(|| panic!("a case: {}", again.json))
        .to_owned();
    let resolved = app
        .resolve(
            &case_id,
            json!({"resolution": "reject", "note": "the payment is not ours"}),
        )
        .await;
    assert_eq!(resolved.status, 200, "{}", resolved.json);
    // Then its fixture holds no email either
    let (text, _) = exported(&app, &case_id).await;
    assert!(!text.contains("carla.secret"), "{text}");
}

/// An export that waited for the writer while its token was demoted hands
/// out nothing: the exporter is read again where the export is journaled.
#[tokio::test]
async fn an_export_that_waited_while_its_token_was_demoted_hands_out_nothing() {
    use crate::support::held::get_while_its_token_is_demoted;
    let app = spawn_app().await;
    let case_id = weak_match(
        &app,
        "hmac",
        &crate::support::app::refund("pay_exp_held", 700, None),
        &crate::support::app::refund("pay_exp_held", 700, None),
    )
    .await;
    let resolved = app
        .resolve(
            &case_id,
            json!({"resolution": "confirm_duplicate", "note": "one refund"}),
        )
        .await;
    assert_eq!(resolved.status, 200, "{}", resolved.json);
    // When its token is demoted while the export waits on the change
    let response = get_while_its_token_is_demoted(&app, &format!("/cases/{case_id}/fixture")).await;
    // Then it is refused, with nothing journaled
    assert_eq!(response.status().as_u16(), 403);
    assert_eq!(app.journal_count("FixtureExported").await, 0);
}
