//! A retry that lacks, or brings, the field a refund's strongest strategy
//! keys it by: the hierarchy keys it by a strategy below (a fingerprint),
//! and the two keys never meet on their own. Money is never applied twice
//! for one refund whichever attempt came first.

use serde_json::json;

use crate::support::app::{Reply, refund, spawn_app, spawn_app_with};
use crate::support::counts::Counts;

/// Asserts `reply` held its delivery for `reason`, leading to `first`.
fn held(reply: &Reply, reason: &str, first: &Reply) {
    let json = &reply.json;
    assert_eq!(json["decision"], "reconcile", "{json}");
    assert_eq!(json["reason"], reason, "{json}");
    assert_eq!(
        json["reference_delivery_id"], first.json["delivery_id"],
        "{json}"
    );
}

#[tokio::test]
async fn a_refund_first_keyed_without_its_reference_is_held_when_a_retry_brings_it() {
    let app = spawn_app().await;
    let first = app
        .post_signed("hmac", &refund("pay_gained", 1500, None))
        .await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    assert_eq!(
        first.json["strategy"], "norefid-refund-fingerprint@1",
        "{}",
        first.json
    );
    // The same refund, its reference known by the time of the retry: keyed
    // on payment + reference it found nothing and was refunded again.
    let retry = app
        .post_signed("hmac", &refund("pay_gained", 1500, Some("rr_gained")))
        .await;
    held(&retry, "weak_match_critical", &first);
    assert_eq!(app.count("SELECT COUNT(*) FROM effects").await, 1);
}

#[tokio::test]
async fn a_refund_with_a_reference_after_one_without_of_another_amount_is_applied() {
    let app = spawn_app().await;
    let first = app
        .post_signed("hmac", &refund("pay_other", 1500, None))
        .await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    let other = app
        .post_signed("hmac", &refund("pay_other", 1600, Some("rr_other")))
        .await;
    assert_eq!(other.json["decision"], "process", "{}", other.json);
    let again = app
        .post_signed("hmac", &refund("pay_other", 1500, Some("rr_again")))
        .await;
    // Of the same amount: it may be the first one's retry.
    assert_eq!(again.json["decision"], "reconcile", "{}", again.json);
    assert_eq!(app.count("SELECT COUNT(*) FROM effects").await, 2);
}

#[tokio::test]
async fn a_refund_first_keyed_by_its_reference_is_held_when_a_retry_lacks_it() {
    // The read model follows the journal only when a page asks it to.
    let app = spawn_app_with("[engine]\nread_model_pace_ms = 600000\n").await;
    let first = app
        .post_signed("hmac", &refund("pay_lost", 1500, Some("rr_lost")))
        .await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    let behind =
        unicity::store::projector::checkpoint(&app.db, unicity::store::projector::DELIVERIES)
            .await
            .expect("checkpoint");
    assert!(
        behind
            < unicity::store::projector::head(&app.db)
                .await
                .expect("head"),
        "the read model holds the first refund already"
    );
    // The same refund, its reference dropped on the retry: keyed by its
    // fingerprint it found nothing and was refunded again.
    let retry = app
        .post_signed("hmac", &refund("pay_lost", 1500, None))
        .await;
    held(&retry, "look_alike_keyed_otherwise", &first);
    assert_eq!(app.count("SELECT COUNT(*) FROM effects").await, 1);
    // Found in the journal's tail above; in the read model once it holds
    // the first refund.
    app.settle().await;
    let again = app
        .post_signed("hmac", &refund("pay_lost", 1500, None))
        .await;
    held(&again, "look_alike_keyed_otherwise", &first);
    assert_eq!(app.count("SELECT COUNT(*) FROM effects").await, 1);

    // A person who finds the retry is the first refund confirms it; one
    // who finds another refund applies it.
    let case = |reply: &Reply| reply.json["case_id"].as_str().expect("a case").to_owned();
    let confirmed = app
        .resolve(
            &case(&retry),
            json!({"resolution": "confirm_duplicate", "note": "the provider lists one refund"}),
        )
        .await;
    assert_eq!(confirmed.status, 200, "{}", confirmed.json);
    let applied = app
        .resolve(
            &case(&again),
            json!({
                "resolution": "process_as_distinct",
                "note": "the provider lists a second refund",
                "authoritative_ref": "rr_second",
            }),
        )
        .await;
    assert_eq!(applied.status, 200, "{}", applied.json);
    assert_eq!(app.count("SELECT COUNT(*) FROM effects").await, 2);
}

#[tokio::test]
async fn a_refund_without_a_reference_unlike_any_with_one_is_applied() {
    let app = spawn_app().await;
    for (payment, amount) in [("pay_lost", 1600), ("pay_elsewhere", 1500)] {
        let first = app
            .post_signed("hmac", &refund(payment, amount, Some("rr_kept")))
            .await;
        assert_eq!(first.json["decision"], "process", "{}", first.json);
    }
    app.settle().await;
    // Another amount on the same payment, the same amount on another one.
    let alone = app
        .post_signed("hmac", &refund("pay_lost", 1500, None))
        .await;
    assert_eq!(alone.json["decision"], "process", "{}", alone.json);
    assert_eq!(app.count("SELECT COUNT(*) FROM effects").await, 3);
}

/// The two attempts of a refund arriving together, decided in one writer
/// batch: the one without its reference sees what the batch wrote before
/// it, and the one with it what the batch wrote before it too.
#[tokio::test]
async fn two_attempts_of_a_refund_decided_together_apply_it_once() {
    let app = spawn_app().await;
    let payments: Vec<String> = (0..24).map(|i| format!("pay_together_{i}")).collect();
    let sends = payments.iter().enumerate().flat_map(|(i, payment)| {
        let reference = format!("rr_together_{i}");
        let with = refund(payment, 1500, Some(&reference));
        let without = refund(payment, 1500, None);
        // Either attempt first, by turns.
        let pair = if i % 2 == 0 {
            [with, without]
        } else {
            [without, with]
        };
        pair.map(|body| {
            let app = &app;
            async move { app.post_signed("hmac", &body).await }
        })
    });
    let replies = futures_util::future::join_all(sends).await;
    let processed = (replies.iter())
        .filter(|r| r.json["decision"] == "process")
        .count();
    let decisions: Vec<&serde_json::Value> = replies.iter().map(|r| &r.json).collect();
    assert_eq!(processed, payments.len(), "{decisions:#?}");
    assert_eq!(
        app.count("SELECT COUNT(*) FROM effects").await,
        payments.len() as i64
    );
}

/// A reference first sent as `null` or empty text skips the strategy that
/// reads it as surely as one left out, but the fingerprint below keys the
/// three apart: the retry that brings the reference looks under each.
#[tokio::test]
async fn a_refund_first_sent_with_a_null_or_empty_reference_is_held_when_a_retry_brings_it() {
    let app = spawn_app().await;
    // Other blank forms (spaces, `[]`) are keyed apart and not looked for.
    for (i, stand_in) in ["null", r#""""#].into_iter().enumerate() {
        let body = |reference: &str| {
            format!(
                r#"{{"type":"refund.created","payment_id":"pay_stand_in_{i}","amount":1500,"currency":"EUR","refund_reference":{reference}}}"#
            )
            .into_bytes()
        };
        let first = app.post_signed("hmac", &body(stand_in)).await;
        assert_eq!(first.json["decision"], "process", "{}", first.json);
        let retry = app.post_signed("hmac", &body(r#""rr_stand_in""#)).await;
        held(&retry, "weak_match_critical", &first);
    }
    assert_eq!(app.count("SELECT COUNT(*) FROM effects").await, 2);
}

/// An effect a person applied as distinct lies under its key with a suffix
/// of its case: a retry of that refund without its reference finds it too.
#[tokio::test]
async fn a_retry_without_its_reference_finds_the_refund_a_person_applied_as_distinct() {
    let app = spawn_app().await;
    let first = app
        .post_signed("hmac", &refund("pay_distinct", 1500, Some("rr_distinct")))
        .await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    // The reference reused with another amount: a collision, which a
    // person finds is another refund and applies.
    let other = app
        .post_signed("hmac", &refund("pay_distinct", 1600, Some("rr_distinct")))
        .await;
    assert_eq!(other.json["decision"], "quarantine", "{}", other.json);
    let case = other.json["case_id"].as_str().expect("a case");
    let applied = app
        .resolve(
            case,
            json!({
                "resolution": "process_as_distinct",
                "note": "the provider lists a second refund",
                "authoritative_ref": "rr_distinct_2",
            }),
        )
        .await;
    assert_eq!(applied.status, 200, "{}", applied.json);
    app.settle().await;
    // That second refund again, without its reference.
    let retry = app
        .post_signed("hmac", &refund("pay_distinct", 1600, None))
        .await;
    assert_eq!(
        retry.json["reason"], "look_alike_keyed_otherwise",
        "{}",
        retry.json
    );
    assert_eq!(app.count("SELECT COUNT(*) FROM effects").await, 2);
}
