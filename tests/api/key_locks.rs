//! On PostgreSQL a batch owns each key it decides on through an advisory
//! lock of its own (class "unik", FNV-1a of the key), so that writers of any
//! process wait on one another only when they share a key.

use std::time::Duration;

use sea_orm::{ConnectionTrait, TransactionTrait};

use crate::support::app::{Reply, TestApp, refund, spawn_app};
use crate::support::counts::Counts;

/// The lock protocol, as published: class `0x756e696b`, FNV-1a 32-bit of
/// the key read as a signed integer.
fn key_lock(key: &str) -> String {
    let hash = key.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    format!(
        "SELECT pg_advisory_xact_lock({}, {})",
        0x756e_696b,
        hash.cast_signed()
    )
}

/// Posts a refund, then its retry while another session (a writer of
/// another process) owns the refund's key and runs `meanwhile` in its
/// transaction, `{key}` standing for the key. The retry must wait for that
/// session; its answer once the session commits, and the key.
async fn retry_behind_another_writer(
    app: &TestApp,
    payment: &str,
    meanwhile: &[&str],
) -> (Reply, String) {
    let body = refund(payment, 1500, Some("rr_lock"));
    let first = app.post_signed("hmac", &body).await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    let key = first.json["key"].as_str().expect("a key").to_owned();

    let holder = app.db.begin().await.unwrap();
    holder.execute_unprepared(&key_lock(&key)).await.unwrap();
    for statement in meanwhile {
        holder
            .execute_unprepared(&statement.replace("{key}", &key))
            .await
            .unwrap();
    }
    let retry = app.post_signed("hmac", &body);
    let mut retry = std::pin::pin!(retry);
    assert!(
        tokio::time::timeout(Duration::from_secs(1), &mut retry)
            .await
            .is_err(),
        "a retry of a key another writer owns must wait for it"
    );
    holder.commit().await.unwrap();
    let retried = tokio::time::timeout(Duration::from_secs(10), retry)
        .await
        .expect("answered once the key is free");
    (retried, key)
}

#[tokio::test]
async fn a_key_held_by_another_session_holds_its_retry_until_released() {
    let app = spawn_app().await;
    if !app.is_postgres() {
        return;
    }
    let (retried, key) = retry_behind_another_writer(&app, "pay_lock", &[]).await;
    assert_eq!(retried.json["decision"], "ignore", "{}", retried.json);
    assert_eq!(
        app.count(&format!("SELECT COUNT(*) FROM effects WHERE key = '{key}'"))
            .await,
        1
    );
}

#[tokio::test]
async fn a_batch_reads_its_keys_rows_as_committed_by_the_writer_it_waited_for() {
    let app = spawn_app().await;
    if !app.is_postgres() {
        return;
    }
    // The other writer finds the effect's outcome unknown before it commits.
    let unknown = "UPDATE effects SET state = 'unknown' WHERE key = '{key}'";
    let (retried, _) = retry_behind_another_writer(&app, "pay_waited", &[unknown]).await;
    // Read as it was before the lock was granted, the key would still be
    // applied and the retry ignored.
    assert_eq!(retried.json["decision"], "reconcile", "{}", retried.json);
}
