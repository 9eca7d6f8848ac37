//! The ingest contract: what each kind of arrival gets, and what the journal keeps.

use serde_json::json;

use crate::support::app::{STRIPE_SECRETS, spawn_app};
use crate::support::counts::Counts;

fn refund_body() -> Vec<u8> {
    serde_json::to_vec(&json!({
        "type": "refund.created",
        "payment_id": "pay_123",
        "amount": 1500,
        "currency": "EUR"
    }))
    .unwrap()
}

#[tokio::test]
async fn a_signed_delivery_is_journaled_before_it_is_acknowledged_for_every_scheme() {
    let app = spawn_app().await;
    for slug in ["std", "stripe", "github", "hmac", "open"] {
        let reply = app.post_signed(slug, &refund_body()).await;
        assert_eq!(reply.status, 202, "{slug}: {}", reply.json);
        assert!(reply.json["decision"].is_string(), "{slug}: {}", reply.json);
        assert!(reply.json["reason"].is_string(), "{slug}: {}", reply.json);
        assert!(reply.json["received_at"].is_string(), "{slug}");
        let id = reply.json["delivery_id"].as_str().expect("delivery id");

        let shown = app.delivery(id).await;
        assert_eq!(shown.status, 200, "{slug}");
        assert_eq!(shown.json["status"], "received");
        assert_eq!(shown.json["source"], slug);
        assert_eq!(shown.json["body"]["payment_id"], "pay_123");
        let events = shown.json["events"].as_array().unwrap();
        let types: Vec<_> = events
            .iter()
            .map(|e| e["event_type"].as_str().unwrap())
            .collect();
        assert_eq!(types[..2], ["DeliveryReceived", "KeyDerived"], "{slug}");
        assert!(types.contains(&"DecisionMade"), "{slug}: {types:?}");
    }
    // Each reception, its key and its decision are one journal row.
    assert_eq!(app.delivery_rows().await, 5);
    assert_eq!(app.journal_count("DeliveryDecided").await, 5);
    // Same bytes, one stored body: bodies are addressed by their hash.
    assert_eq!(app.raw_bodies().await, 1);
}

#[tokio::test]
async fn signature_values_are_masked_in_the_stored_headers() {
    let app = spawn_app().await;
    let reply = app.post_signed("stripe", &refund_body()).await;
    let shown = app
        .delivery(reply.json["delivery_id"].as_str().unwrap())
        .await;
    let headers = shown.json["headers"].as_array().unwrap();
    let signature = headers
        .iter()
        .find(|h| h[0] == "stripe-signature")
        .expect("signature header kept by name");
    assert_eq!(signature[1], "[redacted]");
    assert!(
        !shown.json.to_string().contains("v1="),
        "a signature leaked"
    );
    let content_type = headers.iter().find(|h| h[0] == "content-type").unwrap();
    assert_eq!(content_type[1], "application/json");
}

#[tokio::test]
async fn a_bad_signature_is_refused_with_401_and_journaled_as_rejected_without_its_body() {
    let app = spawn_app().await;
    let now = chrono::Utc::now().timestamp();
    let reply = app
        .post_signed_with("stripe", "whsec_wrong", "m1", now, &refund_body())
        .await;
    assert_eq!(reply.status, 401, "{}", reply.json);
    assert_eq!(reply.json["code"], "invalid_signature");
    let id = reply.json["delivery_id"]
        .as_str()
        .expect("rejections carry an id");

    let shown = app.delivery(id).await;
    assert_eq!(shown.json["status"], "rejected");
    assert_eq!(shown.json["events"][0]["event_type"], "DeliveryRejected");
    assert_eq!(
        shown.json["events"][0]["data"]["reason"],
        "invalid_signature"
    );
    assert_eq!(shown.json["body"], serde_json::Value::Null);
    assert_eq!(app.raw_bodies().await, 0);
}

#[tokio::test]
async fn a_missing_signature_is_refused() {
    let app = spawn_app().await;
    let reply = app.post_raw("github", refund_body(), &[]).await;
    assert_eq!(reply.status, 401);
    assert_eq!(reply.json["code"], "missing_signature");
}

#[tokio::test]
async fn a_tampered_body_is_refused() {
    let app = spawn_app().await;
    let body = refund_body();
    let scheme = &app.source("github").scheme;
    let headers =
        unicity::providers::signature::sign(scheme, "gh-test-secret", "m", 0, &body).unwrap();
    let mut tampered = body.clone();
    tampered[10] ^= 1;
    let reply = app.post_raw("github", tampered, &headers).await;
    assert_eq!(reply.status, 401);
    assert_eq!(reply.json["code"], "invalid_signature");
}

#[tokio::test]
async fn a_timestamp_outside_the_tolerance_is_refused() {
    let app = spawn_app().await;
    let stale = chrono::Utc::now().timestamp() - 3600;
    for slug in ["std", "stripe"] {
        let secret = crate::support::app::secret_of(app.source(slug));
        let reply = app
            .post_signed_with(slug, &secret, "m", stale, &refund_body())
            .await;
        assert_eq!(reply.status, 401, "{slug}");
        assert_eq!(reply.json["code"], "timestamp_out_of_tolerance", "{slug}");
        let shown = app
            .delivery(reply.json["delivery_id"].as_str().unwrap())
            .await;
        assert_eq!(
            shown.json["events"][0]["data"]["reason"],
            "timestamp_out_of_tolerance"
        );
    }
}

#[tokio::test]
async fn a_rotated_secret_still_verifies_during_the_rotation() {
    let app = spawn_app().await;
    let now = chrono::Utc::now().timestamp();
    let reply = app
        .post_signed_with("stripe", STRIPE_SECRETS[1], "m", now, &refund_body())
        .await;
    assert_eq!(reply.status, 202, "{}", reply.json);
    let shown = app
        .delivery(reply.json["delivery_id"].as_str().unwrap())
        .await;
    assert_eq!(shown.json["events"][0]["data"]["secret_index"], 1);
}

#[tokio::test]
async fn a_body_over_the_limit_gets_413_and_a_rejection_without_the_body() {
    let app = spawn_app().await;
    let big = serde_json::to_vec(&json!({ "pad": "x".repeat(4096) })).unwrap();
    let reply = app.post_signed("hmac", &big).await;
    assert_eq!(reply.status, 413, "{}", reply.json);
    assert_eq!(reply.json["code"], "payload_too_large");
    let shown = app
        .delivery(reply.json["delivery_id"].as_str().unwrap())
        .await;
    let event = &shown.json["events"][0];
    assert_eq!(event["event_type"], "DeliveryRejected");
    assert_eq!(event["data"]["reason"], "payload_too_large");
    assert_eq!(event["data"]["declared_size"], big.len());
    assert_eq!(event["data"]["body"], serde_json::Value::Null);
    assert_eq!(app.raw_bodies().await, 0);
}

#[tokio::test]
async fn an_unknown_source_gets_404() {
    let app = spawn_app().await;
    let reply = app.post_raw("nope", refund_body(), &[]).await;
    assert_eq!(reply.status, 404);
    assert_eq!(reply.json["code"], "unknown_source");
    assert_eq!(app.delivery_rows().await, 0);
}

#[tokio::test]
async fn a_signed_body_that_is_not_json_or_not_utf8_is_kept_and_marked_unparseable() {
    let app = spawn_app().await;
    for (body, parse) in [
        (b"amount=12&currency=EUR".to_vec(), "not_json"),
        (b"\xff\xfe\x00{".to_vec(), "not_utf8"),
    ] {
        let reply = app.post_signed("github", &body).await;
        assert_eq!(reply.status, 202, "{parse}: {}", reply.json);
        assert_eq!(reply.json["parse"], parse);
        let shown = app
            .delivery(reply.json["delivery_id"].as_str().unwrap())
            .await;
        assert_eq!(shown.json["parse"], parse);
        assert_eq!(shown.json["body"], serde_json::Value::Null);
        assert_eq!(shown.json["body_ref"]["size"], body.len());
    }
    assert_eq!(app.raw_bodies().await, 2);
}

#[tokio::test]
async fn a_failing_journal_write_answers_503_and_leaves_no_half_written_delivery() {
    let app = spawn_app().await;
    // Make every journal insert fail inside the database, after the body insert.
    let sabotage: &[&str] = if app.is_postgres() {
        &[
            "CREATE FUNCTION sabotage() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'disk on fire'; END $$",
            "CREATE TRIGGER sabotage BEFORE INSERT ON journal FOR EACH ROW EXECUTE FUNCTION sabotage()",
        ]
    } else {
        &[
            "CREATE TRIGGER sabotage BEFORE INSERT ON journal BEGIN SELECT RAISE(ABORT, 'disk on fire'); END",
        ]
    };
    for statement in sabotage {
        sea_orm::ConnectionTrait::execute_unprepared(&app.db, statement)
            .await
            .unwrap();
    }
    let reply = app.post_signed("github", &refund_body()).await;
    assert_eq!(reply.status, 503, "{}", reply.json);
    assert_eq!(reply.json["code"], "storage_unavailable");
    assert!(
        !reply.json.to_string().contains("disk on fire"),
        "internal error leaked"
    );
    // The body insert ran in the same transaction: it must have rolled back.
    assert_eq!(app.raw_bodies().await, 0);
    assert_eq!(app.delivery_rows().await, 0);
    assert_eq!(app.deliveries().await, 0);
}

#[tokio::test]
async fn a_database_without_its_journal_answers_503_and_is_not_ready() {
    let app = spawn_app().await;
    sea_orm::ConnectionTrait::execute_unprepared(
        &app.db,
        "ALTER TABLE journal RENAME TO journal_gone",
    )
    .await
    .unwrap();
    let reply = app.post_signed("std", &refund_body()).await;
    assert_eq!(reply.status, 503);
    assert_eq!(reply.json["code"], "storage_unavailable");
    assert_eq!(app.raw_bodies().await, 0);
    assert_eq!(app.get("/readyz").await.status, 503);
}
