//! Stripe through HTTP: two Event objects for one change are one effect.

use serde_json::{Value, json};

use crate::support::app::spawn_app;
use crate::support::counts::Counts;

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
