//! The Stripe preset over one-time transitions: Stripe's webhook guide warns
//! that two separate Event objects may be generated for one change, to be told
//! apart by `data.object.id` with the event type. For types Stripe emits once
//! per object, two Event objects for one object and type share a business key;
//! types that repeat for one object stay on the event id.

use super::{Delivery, business_key, chosen, corpus_json, presets};
use serde_json::{Value, json};

/// Fixtures added by this project (the shared corpus lacks them).
const VECTORS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors/stripe");

fn vector(name: &str) -> Value {
    let path = format!("{VECTORS}/{name}.json");
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn openapi(name: &str) -> Value {
    corpus_json(&format!("stripe/openapi-fixtures3/{name}.json"))
}

fn event(ty: &str, id: &str, object: &Value) -> Delivery {
    Delivery::new(
        "stripe",
        json!({"id": id, "object": "event", "type": ty, "created": 1234567890,
               "pending_webhooks": 1, "livemode": false, "data": {"object": object}}),
    )
}

/// (event type, object, the strategy that must key it)
fn one_time_transitions() -> Vec<(&'static str, Value, &'static str)> {
    let session = openapi("checkout_session");
    let invoice = openapi("invoice");
    let subscription = vector("customer_subscription");
    vec![
        (
            "checkout.session.completed",
            session.clone(),
            "stripe-checkout-session@1",
        ),
        (
            "checkout.session.async_payment_succeeded",
            session.clone(),
            "stripe-checkout-session@1",
        ),
        (
            "checkout.session.async_payment_failed",
            session.clone(),
            "stripe-checkout-session@1",
        ),
        (
            "checkout.session.expired",
            session,
            "stripe-checkout-session@1",
        ),
        (
            "payment_intent.succeeded",
            openapi("payment_intent"),
            "stripe-payment-intent@1",
        ),
        (
            "payment_intent.canceled",
            openapi("payment_intent"),
            "stripe-payment-intent@1",
        ),
        ("invoice.paid", invoice.clone(), "stripe-invoice-paid@1"),
        (
            "invoice.finalized",
            invoice.clone(),
            "stripe-invoice-transition@1",
        ),
        (
            "invoice.voided",
            invoice.clone(),
            "stripe-invoice-transition@1",
        ),
        (
            "invoice.marked_uncollectible",
            invoice,
            "stripe-invoice-transition@1",
        ),
        (
            "customer.subscription.created",
            subscription.clone(),
            "stripe-subscription@1",
        ),
        (
            "customer.subscription.deleted",
            subscription,
            "stripe-subscription@1",
        ),
        ("charge.succeeded", openapi("charge"), "stripe-charge@1"),
        ("refund.created", openapi("refund"), "stripe-refund@1"),
        (
            "charge.dispute.created",
            openapi("dispute"),
            "stripe-dispute@1",
        ),
        ("payout.paid", openapi("payout"), "stripe-payout@1"),
    ]
}

#[test]
fn two_event_objects_for_one_transition_share_one_business_key() {
    let c = presets();
    for (ty, object, strategy) in one_time_transitions() {
        let first = event(ty, "evt_first", &object).derive(&c);
        let second = event(ty, "evt_second", &object).derive(&c);
        assert_eq!(chosen(&first), strategy, "{ty}");
        assert_eq!(business_key(&first), business_key(&second), "{ty}");
        let b = first.business.as_ref().unwrap();
        assert!(
            b.missing_discriminants.is_empty(),
            "{ty}: {:?}",
            b.missing_discriminants
        );
        // The event id still links retries of one Event object.
        assert_eq!(first.transport.id_source, "$.id", "{ty}");
        assert_eq!(first.transport.id, "evt_first", "{ty}");
        assert_ne!(first.transport.key, second.transport.key, "{ty}");
    }
}

#[test]
fn the_checkout_session_key_is_its_id_with_the_event_type() {
    let c = presets();
    let session = openapi("checkout_session");
    let completed = event("checkout.session.completed", "evt_1", &session).derive(&c);
    let b = completed.business.as_ref().unwrap();
    assert_eq!(
        b.material,
        json!({"checkout_session": "cs_test_a1YS1URlnyQCN5fUUduORoQ7Pw41PJqDWkIVQCpJPqkfIhd6tVY8XB1OLY"})
    );
    assert_eq!(b.effect_type, "checkout.record");
    // Another transition of the same session is another effect.
    let paid = event(
        "checkout.session.async_payment_succeeded",
        "evt_2",
        &session,
    )
    .derive(&c);
    assert_ne!(business_key(&completed), business_key(&paid));
    // Another session is another effect.
    let mut other = session.clone();
    other["id"] = json!("cs_test_other");
    let other = event("checkout.session.completed", "evt_3", &other).derive(&c);
    assert_ne!(business_key(&completed), business_key(&other));
}

#[test]
fn types_that_repeat_for_one_object_stay_on_the_event_id() {
    let c = presets();
    for (ty, object) in [
        ("checkout.session.updated", openapi("checkout_session")),
        (
            "customer.subscription.updated",
            vector("customer_subscription"),
        ),
        (
            "customer.subscription.trial_will_end",
            vector("customer_subscription"),
        ),
        ("invoice.updated", openapi("invoice")),
        ("invoice.payment_failed", openapi("invoice")),
        ("charge.refunded", openapi("charge")),
        ("charge.updated", openapi("charge")),
        ("payment_intent.payment_failed", openapi("payment_intent")),
    ] {
        let first = event(ty, "evt_first", &object).derive(&c);
        let second = event(ty, "evt_second", &object).derive(&c);
        assert_eq!(chosen(&first), "stripe-event-id@1", "{ty}");
        assert_ne!(business_key(&first), business_key(&second), "{ty}");
    }
}
