//! Stripe through HTTP: two Event objects for one change are one effect; a
//! refund of a charge made through the Charges API (no payment intent) is
//! reconciled and held by its charge.

use serde_json::{Value, json};

use crate::by_hand::the_missing_case;
use crate::reconcile::{reconcile, rows};
use crate::support::app::{TestApp, spawn_app, spawn_app_with};
use crate::support::counts::Counts;
use crate::support::provider::ProviderApi;

/// A `checkout.session.completed` Event object, shaped as Stripe documents it,
/// for Checkout Session `session`.
fn checkout_completed(event_id: &str, created: i64, session: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "id": event_id,
        "object": "event",
        "api_version": "2024-06-20",
        "created": created,
        "livemode": false,
        "pending_webhooks": 1,
        "request": {"id": null, "idempotency_key": null},
        "type": "checkout.session.completed",
        "data": {"object": {
            "id": session,
            "object": "checkout.session",
            "amount_total": 2000,
            "currency": "eur",
            "customer": "cus_test_1",
            "mode": "payment",
            "payment_intent": "pi_test_1",
            "payment_status": "paid",
            "status": "complete"
        }}
    }))
    .unwrap()
}

#[tokio::test]
async fn two_event_objects_for_one_completed_checkout_session_fulfil_it_once() {
    let app = spawn_app().await;
    let first = app
        .post_signed(
            "stripe",
            &checkout_completed("evt_1A", 1_700_000_000, "cs_test_1"),
        )
        .await;
    assert_eq!(first.status, 202, "{}", first.json);
    assert_eq!(first.json["decision"], "process");
    assert_eq!(first.json["reason"], "new_key");
    assert_eq!(first.json["strategy"], "stripe-checkout-session@1");
    app.wait_applied(1).await;

    // A second Event object for the same change: another evt_ id, another time.
    let second = app
        .post_signed(
            "stripe",
            &checkout_completed("evt_2B", 1_700_000_003, "cs_test_1"),
        )
        .await;
    assert_eq!(second.status, 200, "{}", second.json);
    assert_eq!(second.json["decision"], "ignore");
    assert_eq!(second.json["reason"], "duplicate_of_applied");
    assert_eq!(second.json["key"], first.json["key"]);
    assert_eq!(
        second.json["reference_delivery_id"],
        first.json["delivery_id"]
    );
    assert_eq!(second.json["effect_id"], first.json["effect_id"]);

    // Each Event object keeps its own id as its transport identity, searchable.
    let shown = app
        .delivery(second.json["delivery_id"].as_str().unwrap())
        .await;
    assert_eq!(shown.json["identity"]["provider_event_id"], "evt_2B");

    // Another session is another fulfilment.
    let other = app
        .post_signed(
            "stripe",
            &checkout_completed("evt_3C", 1_700_000_005, "cs_test_2"),
        )
        .await;
    assert_eq!(other.json["decision"], "process", "{}", other.json);
    app.wait_applied(2).await;
    assert_eq!(app.effects().await, 2);
    assert_eq!(app.deliveries().await, 3);
}

#[tokio::test]
async fn a_retry_of_one_event_object_links_to_its_first_reception_by_event_id() {
    let app = spawn_app().await;
    let body = checkout_completed("evt_9Z", 1_700_000_000, "cs_test_9");
    let first = app.post_signed("stripe", &body).await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    // Stripe's retry: the same Event object, fewer endpoints pending.
    let mut retry: Value = serde_json::from_slice(&body).unwrap();
    retry["pending_webhooks"] = json!(0);
    let second = app
        .post_signed("stripe", &serde_json::to_vec(&retry).unwrap())
        .await;
    assert_eq!(second.json["decision"], "ignore", "{}", second.json);
    assert_eq!(second.json["transport_key"], first.json["transport_key"]);
}

/// Stripe's documented Refund object (`tests/vectors/stripe`): a refund of a
/// charge made through the Charges API, which names no payment intent, made
/// `ago` before now.
fn charges_api_refund(ago: chrono::Duration) -> Value {
    let mut refund: Value = serde_json::from_str(include_str!(
        "../vectors/stripe/openapi-fixtures3/refund.json"
    ))
    .expect("the vector reads");
    assert_eq!(refund["payment_intent"], Value::Null);
    refund["created"] = json!((chrono::Utc::now() - ago).timestamp());
    refund
}

/// The `refund.created` Event object of `refund`, as Stripe sends it.
fn refund_created(event_id: &str, refund: &Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "id": event_id,
        "object": "event",
        "api_version": "2024-06-20",
        "created": refund["created"],
        "livemode": false,
        "pending_webhooks": 1,
        "type": "refund.created",
        "data": {"object": refund}
    }))
    .expect("json")
}

/// A server whose Stripe look-up (the `stripe-refunds` preset) asks a test
/// server answering `refunds` as Stripe lists them, and the look-up's TOML.
async fn stripe_listing(refunds: &[Value]) -> (TestApp, String) {
    let api = ProviderApi::start(
        200,
        json!({"object": "list", "data": refunds, "has_more": false}),
    )
    .await;
    let extra = format!(
        r#"
[[lookups]]
provider = "stripe"
effect_type = "refund.*"
preset = "stripe-refunds"
url = "{url}/v1/refunds?charge={{data.object.charge}}&limit=100"
list_url = "{url}/v1/refunds?created[gte]={{from_unix}}&created[lt]={{to_unix}}&limit=100"

[reconciliation]
interval_secs = 0
"#,
        url = api.url
    );
    (spawn_app_with(&extra).await, extra)
}

#[tokio::test]
async fn a_refund_of_a_charge_without_a_payment_intent_is_paired_with_its_webhook_by_its_charge() {
    // Given a refund made through the Charges API, listed by Stripe, whose
    // webhook was applied
    let refund = charges_api_refund(chrono::Duration::minutes(50));
    let (app, extra) = stripe_listing(std::slice::from_ref(&refund)).await;
    let reply = app
        .post_signed("stripe", &refund_created("evt_charges_1", &refund))
        .await;
    assert_eq!(reply.json["decision"], "process", "{}", reply.json);
    app.wait_applied(1).await;

    // When reconciliation compares the hour
    let ran = reconcile(&app, &extra).await;

    // Then the refund is its webhook's effect: nothing missing, nothing
    // unexpected, and the pairing is recorded on the effect
    assert!(ran.contains("1 matched, 0 missing, 0 unexpected"), "{ran}");
    assert_eq!(
        rows(&app, "SELECT provider_ref FROM effects").await,
        [refund["id"].as_str().expect("an id")]
    );
}

#[tokio::test]
async fn a_refund_of_a_charge_without_a_payment_intent_made_by_hand_holds_its_late_webhook() {
    // Given a refund made through the Charges API whose webhook never came,
    // found missing
    let refund = charges_api_refund(chrono::Duration::minutes(50));
    let (app, extra) = stripe_listing(std::slice::from_ref(&refund)).await;
    let case = the_missing_case(&app, &extra).await;

    // When finance records it as made by hand, and its webhook comes late
    let done = app
        .resolve(
            &case,
            json!({"resolution": "made_by_hand", "note": "refunded at the bank"}),
        )
        .await;
    assert_eq!(done.status, 200, "{}", done.json);
    let late = app
        .post_signed("stripe", &refund_created("evt_charges_late", &refund))
        .await;

    // Then the webhook waits for a person instead of refunding again
    assert_eq!(late.json["decision"], "reconcile", "{}", late.json);
    assert_eq!(late.json["reason"], "made_by_hand", "{}", late.json);
    assert_eq!(app.effects().await, 0);
}
