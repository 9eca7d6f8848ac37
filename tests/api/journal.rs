//! The journal is append-only, enforced by the database itself.

use sea_orm::ConnectionTrait;

use crate::support::app::spawn_app;
use crate::support::counts::Counts;

#[tokio::test]
async fn the_database_refuses_to_update_or_delete_journal_rows() {
    let app = spawn_app().await;
    let reply = app.post_signed("std", br#"{"type":"x"}"#).await;
    assert_eq!(reply.status, 202);

    let update = app
        .db
        .execute_unprepared("UPDATE journal SET event_type = 'Forged'")
        .await;
    let error = update.expect_err("UPDATE must be refused").to_string();
    assert!(error.contains("append-only"), "{error}");

    let delete = app.db.execute_unprepared("DELETE FROM journal").await;
    let error = delete.expect_err("DELETE must be refused").to_string();
    assert!(error.contains("append-only"), "{error}");

    if app.is_postgres() {
        let truncate = app.db.execute_unprepared("TRUNCATE journal").await;
        assert!(truncate.is_err(), "TRUNCATE must be refused");
    }
    assert_eq!(app.journal_count("DeliveryDecided").await, 1);
}

#[tokio::test]
async fn journal_positions_grow_with_each_append() {
    let app = spawn_app().await;
    for _ in 0..3 {
        assert_eq!(app.post_signed("open", br#"{"n":1}"#).await.status, 202);
    }
    let received = "FROM journal WHERE event_type = 'DeliveryDecided'";
    assert_eq!(
        app.count(&format!("SELECT COUNT(DISTINCT position) {received}"))
            .await,
        3
    );
    // Each delivery appends one row: its reception, key and decision folded.
    assert_eq!(app.delivery_rows().await, 3);
    let first = app.count(&format!("SELECT MIN(position) {received}")).await;
    let last = app.count(&format!("SELECT MAX(position) {received}")).await;
    assert!(last > first, "positions grow: {first} then {last}");
}

#[tokio::test]
async fn postgres_keeps_a_delivery_row_of_a_few_kilobytes_uncompressed() {
    let app = spawn_app().await;
    if !app.is_postgres() {
        return;
    }
    // A body whose key material makes the delivery's journal row ~4 KB.
    let body = serde_json::json!({ "type": "x", "note": "n".repeat(3000) });
    let reply = app
        .post_signed("std", &serde_json::to_vec(&body).unwrap())
        .await;
    assert_eq!(reply.status, 202);
    let row = "FROM journal WHERE event_type = 'DeliveryDecided'";
    let bytes = app
        .count(&format!("SELECT octet_length(data::text)::bigint {row}"))
        .await;
    assert!((2100..8000).contains(&bytes), "a row of {bytes} bytes");
    // Over 2 KB, PostgreSQL would compress it unless told to keep it inline.
    assert_eq!(
        app.count(&format!(
            "SELECT COUNT(*) {row} AND pg_column_compression(data) IS NULL"
        ))
        .await,
        1
    );
}
