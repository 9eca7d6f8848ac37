//! Finding deliveries: `GET /api/deliveries` by each thing support pastes
//! (delivery id, provider event or delivery id, business key, payment id),
//! by filters, page after page.

use std::collections::HashSet;

use serde_json::{Value, json};
use unicity::auth::Role;

use crate::support::app::{TestApp, id_of, issue_token, refund, spawn_app, spawn_app_with};
use crate::support::counts::Counts;

/// The delivery ids a search answers, in order.
pub async fn found(app: &TestApp, query: &str) -> Vec<String> {
    let reply = app.get(&format!("/api/deliveries?{query}")).await;
    assert_eq!(reply.status, 200, "{query}: {}", reply.json);
    reply.json["deliveries"]
        .as_array()
        .expect("deliveries")
        .iter()
        .map(|d| d["delivery_id"].as_str().expect("id").to_owned())
        .collect()
}

fn encoded(value: &str) -> String {
    serde_urlencoded::to_string([("q", value)]).expect("query")
}

/// A Stripe `refund.created` Event for a refund of payment intent `intent`.
pub fn stripe_refund(event_id: &str, refund_id: &str, intent: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "id": event_id,
        "object": "event",
        "created": 1_700_000_000,
        "type": "refund.created",
        "data": {"object": {
            "id": refund_id, "object": "refund", "amount": 500, "currency": "eur",
            "charge": "ch_search_1", "payment_intent": intent
        }}
    }))
    .expect("json")
}

#[tokio::test]
async fn a_delivery_is_found_by_its_id_its_provider_ids_its_key_and_its_payment() {
    let app = spawn_app().await;
    let first = app
        .post_signed("hmac", &refund("pay_search_1", 1500, Some("rr_1")))
        .await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    app.wait_applied(1).await;
    let retry = app
        .post_signed("hmac", &refund("pay_search_1", 1500, Some("rr_1")))
        .await;
    assert_eq!(retry.json["decision"], "ignore", "{}", retry.json);
    let body = br#"{"type":"payment.succeeded","data":{"payment_id":"pay_search_2"}}"#;
    let secret = crate::support::app::secret_of(app.source("std"));
    let now = chrono::Utc::now().timestamp();
    let by_header = app
        .post_signed_with("std", &secret, "msg_search_header", now, body)
        .await;
    assert_eq!(by_header.status, 202, "{}", by_header.json);
    let stripe = app
        .post_signed(
            "stripe",
            &stripe_refund("evt_search_1", "re_search_1", "pi_search_1"),
        )
        .await;
    assert_eq!(stripe.status, 202, "{}", stripe.json);
    let (first, retry, by_header, stripe) = (
        id_of(&first),
        id_of(&retry),
        id_of(&by_header),
        id_of(&stripe),
    );
    let key = app
        .delivery(&first)
        .await
        .json
        .pointer("/identity/business/key")
        .and_then(Value::as_str)
        .expect("a business key")
        .to_owned();

    for (q, expected) in [
        (first.as_str(), vec![first.clone()]),
        ("pay_search_1", vec![retry.clone(), first.clone()]),
        (key.as_str(), vec![retry.clone(), first.clone()]),
        ("msg_search_header", vec![by_header.clone()]),
        ("pay_search_2", vec![by_header.clone()]),
        ("evt_search_1", vec![stripe.clone()]),
        ("pi_search_1", vec![stripe.clone()]),
        ("pay_search", vec![]),
    ] {
        assert_eq!(found(&app, &encoded(q)).await, expected, "q={q}");
    }
    // Newest first, everything without a query.
    assert_eq!(
        found(&app, "").await,
        [
            stripe.clone(),
            by_header.clone(),
            retry.clone(),
            first.clone()
        ]
    );
    // Filters narrow, alone or with `q`.
    assert_eq!(
        found(&app, "source=hmac").await,
        [retry.clone(), first.clone()]
    );
    assert_eq!(found(&app, "decision=ignore").await, [retry.as_str()]);
    assert_eq!(
        found(
            &app,
            &format!("{}&decision=process", encoded("pay_search_1"))
        )
        .await,
        [first.as_str()]
    );
    assert_eq!(
        found(&app, "event_type=refund.created&source=stripe").await,
        [stripe.as_str()]
    );
    assert_eq!(found(&app, "from=2999-01-01").await, Vec::<String>::new());
    assert_eq!(
        found(&app, "to=2000-01-01T00:00").await,
        Vec::<String>::new()
    );
    assert_eq!(
        found(&app, "from=2000-01-01&to=2999-01-01T00:00:00Z")
            .await
            .len(),
        4
    );

    let bad = app.get("/api/deliveries?from=yesterday").await;
    assert_eq!(bad.status, 400, "{}", bad.json);
    assert_eq!(bad.json["code"], "invalid_search");
    let bad = app.get("/api/deliveries?cursor=nonsense").await;
    assert_eq!(bad.status, 400, "{}", bad.json);
}

#[tokio::test]
async fn pages_follow_each_other_without_a_row_twice_or_missed() {
    let app = spawn_app().await;
    let mut posted = HashSet::new();
    for i in 0..7 {
        let reply = app
            .post_raw(
                "open",
                refund(&format!("pay_page_{i}"), 100, Some("r")),
                &[],
            )
            .await;
        posted.insert(id_of(&reply));
    }
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut query = "/api/deliveries?limit=3".to_owned();
        if let Some(cursor) = &cursor {
            query.push_str(&format!("&cursor={cursor}"));
        }
        let page = app.get(&query).await;
        assert_eq!(page.status, 200, "{}", page.json);
        for d in page.json["deliveries"].as_array().expect("rows") {
            seen.push(d["delivery_id"].as_str().expect("id").to_owned());
        }
        pages += 1;
        if pages == 1 {
            // A delivery arriving meanwhile moves nothing on later pages.
            app.post_raw("open", refund("pay_page_late", 100, Some("r")), &[])
                .await;
        }
        match page.json["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen.len(), 7, "{seen:?}");
    assert_eq!(seen.iter().cloned().collect::<HashSet<_>>(), posted);
    let all = found(&app, "limit=200").await;
    assert_eq!(all.len(), 8);
    assert_eq!(&all[1..], &seen[..], "newest first, the late one on top");
}

#[tokio::test]
async fn searching_needs_an_operator_and_any_role_may() {
    let app = spawn_app().await;
    let anonymous = reqwest::get(format!("{}/api/deliveries?q=x", app.address))
        .await
        .expect("answered");
    assert_eq!(anonymous.status().as_u16(), 401);
    let token = issue_token(&app.db, Role::Support).await;
    let support = reqwest::Client::new()
        .get(format!("{}/api/deliveries?q=x", app.address))
        .bearer_auth(token)
        .send()
        .await
        .expect("answered");
    assert_eq!(support.status().as_u16(), 200);
}

pub const PRIVATE_SOURCE: &str = r#"
[[sources]]
slug = "private"
tenant = "acme"
provider = "norefid"
environment = "test"
allow_unsigned = true
signature = { scheme = "none" }
resource = ["$.customer_email"]
"#;

#[tokio::test]
async fn a_sensitive_resource_is_found_without_being_stored_in_clear() {
    let app = spawn_app_with(PRIVATE_SOURCE).await;
    let mut body: Value = serde_json::from_slice(&refund("pay_private", 100, Some("r"))).unwrap();
    body["customer_email"] = json!("ann.customer@example.com");
    let posted = app
        .post_raw("private", serde_json::to_vec(&body).unwrap(), &[])
        .await;
    assert_eq!(posted.status, 202, "{}", posted.json);
    assert_eq!(
        found(&app, &encoded("ann.customer@example.com")).await,
        [id_of(&posted)]
    );
    // Stored as its keyed hash: neither the column nor the answer holds it.
    assert_eq!(
        app.count("SELECT COUNT(*) FROM deliveries WHERE resource LIKE 'hmac:%'")
            .await,
        1
    );
    assert_eq!(
        app.count("SELECT COUNT(*) FROM deliveries WHERE resource LIKE '%example.com%'")
            .await,
        0
    );
    let reply = app.get("/api/deliveries").await;
    assert!(!reply.json.to_string().contains("ann.customer"));
}

#[tokio::test]
async fn an_id_typed_in_another_case_finds_its_delivery() {
    // Given a refund of payment `pay_walk_1`, from a Stripe event `evt_walk_1`
    let app = spawn_app().await;
    let refund_reply = app
        .post_signed("hmac", &refund("pay_walk_1", 700, Some("rr_walk")))
        .await;
    assert_eq!(refund_reply.status, 202, "{}", refund_reply.json);
    let stripe = app
        .post_signed(
            "stripe",
            &stripe_refund("evt_walk_1", "re_walk_1", "pi_walk_1"),
        )
        .await;
    let (refund_id, stripe_id) = (id_of(&refund_reply), id_of(&stripe));

    // When support types them in upper or mixed case, they are found
    for (typed, expected) in [
        ("PAY_WALK_1", &refund_id),
        ("Pay_Walk_1", &refund_id),
        ("EVT_WALK_1", &stripe_id),
        ("PI_WALK_1", &stripe_id),
    ] {
        assert_eq!(
            found(&app, &encoded(typed)).await,
            std::slice::from_ref(expected),
            "{typed}"
        );
    }
    // and a delivery id in capitals too
    assert_eq!(
        found(&app, &encoded(&refund_id.to_ascii_uppercase())).await,
        std::slice::from_ref(&refund_id)
    );
    // while what is not there is still not found
    assert!(found(&app, &encoded("PAY_WALK_2")).await.is_empty());
}

/// A source searched by an email nested in the body, which a strategy of
/// its provider declares sensitive wherever it lies (`$..email`).
const NESTED_PRIVATE_SOURCE: &str = r#"
[[sources]]
slug = "nested"
tenant = "acme"
provider = "norefid"
environment = "test"
allow_unsigned = true
signature = { scheme = "none" }
resource = ["$.customer.email"]

[[strategies]]
name = "norefid-contact"
version = 1
provider = "norefid"
event_types = ["contact.*"]
kind = "business_reference"
strength = "strong"
horizon = "30d"
effect_type = "contact.update"
criticality = "reversible"
fields = [{ name = "contact", path = "$.contact_id" }]
sensitive = ["$..email"]
"#;

#[tokio::test]
async fn a_resource_a_descendant_sensitive_path_selects_is_stored_only_as_its_keyed_hash() {
    let app = spawn_app_with(NESTED_PRIVATE_SOURCE).await;
    let mut body: Value = serde_json::from_slice(&refund("pay_nested", 100, Some("r"))).unwrap();
    body["customer"] = json!({"email": "ann.nested@example.com"});
    let posted = app
        .post_raw("nested", serde_json::to_vec(&body).unwrap(), &[])
        .await;
    assert_eq!(posted.status, 202, "{}", posted.json);
    // Found by the whole email, through its keyed hash
    assert_eq!(
        found(&app, &encoded("ann.nested@example.com")).await,
        [id_of(&posted)]
    );
    // never stored, shown or found by a beginning in clear
    assert_eq!(app.journal_rows_containing("ann.nested@").await, 0);
    let shown = app.delivery(&id_of(&posted)).await;
    assert!(
        shown.json["resource"]
            .as_str()
            .unwrap_or_default()
            .starts_with("hmac:"),
        "{}",
        shown.json
    );
    assert!(
        !shown.json.to_string().contains("ann.nested@"),
        "{}",
        shown.json
    );
    assert!(found(&app, &encoded("ann.nes*")).await.is_empty());
}
