//! On PostgreSQL a batch owns each key it decides on through an advisory
//! lock of its own (class "unik", FNV-1a of the key), so that writers of any
//! process wait on one another only when they share a key.

use std::time::Duration;

use sea_orm::{ConnectionTrait, TransactionTrait};

use crate::support::app::{refund, spawn_app};
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

#[tokio::test]
async fn a_key_held_by_another_session_holds_its_retry_until_released() {
    let app = spawn_app().await;
    if !app.is_postgres() {
        return;
    }
    let body = refund("pay_lock", 1500, Some("rr_lock"));
    let first = app.post_signed("hmac", &body).await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    let key = first.json["key"].as_str().expect("a key").to_owned();

    // Another session (a writer of another process) owns the key.
    let holder = app.db.begin().await.unwrap();
    holder.execute_unprepared(&key_lock(&key)).await.unwrap();
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
    assert_eq!(retried.json["decision"], "ignore", "{}", retried.json);
    assert_eq!(
        app.count(&format!("SELECT COUNT(*) FROM effects WHERE key = '{key}'"))
            .await,
        1
    );
}
