//! SQLite's WAL copied into the database file by a connection of its own.
//!
//! How often it runs (`[engine] sqlite_checkpoint_ms`, 70 ms by default):
//! shorter rewrites hot pages more often (fewer deliveries/s, more bytes
//! written); longer makes each checkpoint's fsync big enough to hold up the
//! writer's commits (p99). Measured at 32 clients on 2026-11-30: 30 ms p99 18
//! ms, ratio 0.84–0.90; 70 ms p99 21–25 ms, ratio 0.86–1.07; 100 ms p99
//! 25–26 ms, ratio 0.92–1.14; 300 ms p99 27–28 ms. On 2026-12-06, on a
//! quicker machine: 30 ms p99 22 ms and 47.9 KiB written per delivery, 70 ms
//! 25–26 ms and 42–45 KiB, 1 s 30–31 ms and 40.1 KiB; with a million
//! deliveries behind, p99 39 ms at 30 ms, 57 ms at 70 ms and 111 ms at 1 s.

use std::time::Duration;

use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend};

use super::backend;

/// On SQLite, copies committed WAL frames into the database file from a
/// connection of its own, every `interval`, so that the writer
/// rarely does it inside a commit. SQLite's automatic checkpoint (every
/// `wal_autocheckpoint` frames) runs in the committing connection: with the
/// group-commit writer that stalled every delivery of the batch for tens of
/// milliseconds (p99 40 ms with it on the writer, 21 ms with no checkpoint at
/// all). A passive checkpoint waits for nobody; the writer's own automatic one
/// stays as the backstop and then finds little left to copy.
pub fn spawn_checkpointer(db: &DatabaseConnection, interval: Duration) {
    if backend(db) != DbBackend::Sqlite {
        return;
    }
    let db = db.clone();
    crate::tasks::supervise("checkpointer", move || {
        let db = db.clone();
        async move {
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                if let Err(error) = db
                    .execute_unprepared("PRAGMA wal_checkpoint(PASSIVE)")
                    .await
                {
                    tracing::warn!(%error, "background checkpoint failed");
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{connect, pragma, test_url};

    /// Bytes of the database file itself, WAL left out.
    fn file_len(dir: &tempfile::TempDir) -> u64 {
        std::fs::metadata(dir.path().join("unicity.db"))
            .map(|m| m.len())
            .unwrap_or(0)
    }

    /// Bytes the database holds, as read through the WAL.
    async fn logical_len(db: &DatabaseConnection) -> u64 {
        let pages: i64 = pragma(db, "page_count").await;
        let size: i64 = pragma(db, "page_size").await;
        u64::try_from(pages * size).expect("a size")
    }

    async fn write_pages(db: &DatabaseConnection) {
        db.execute_unprepared(
            "CREATE TABLE filler (n INTEGER PRIMARY KEY, pad TEXT); \
             WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 2000) \
             INSERT INTO filler SELECT n, printf('%.300c', 'x') FROM s",
        )
        .await
        .expect("rows commit");
    }

    #[tokio::test]
    async fn the_checkpointer_copies_committed_pages_into_the_database_file_each_interval() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let db = connect(&test_url(&dir)).await.expect("SQLite opens");
        write_pages(&db).await;
        let before = file_len(&dir);
        let wanted = logical_len(&db).await;
        assert!(
            before < wanted,
            "nothing copied yet: {before} of {wanted} bytes"
        );
        spawn_checkpointer(&db, Duration::from_millis(20));
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while file_len(&dir) < wanted && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(
            file_len(&dir) >= wanted,
            "{} of {wanted} bytes",
            file_len(&dir)
        );
    }

    #[tokio::test]
    async fn the_checkpointer_waits_for_its_interval() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let db = connect(&test_url(&dir)).await.expect("SQLite opens");
        // Its first checkpoint runs at once, on an empty WAL; the next in an hour.
        spawn_checkpointer(&db, Duration::from_secs(3600));
        tokio::time::sleep(Duration::from_millis(100)).await;
        write_pages(&db).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let wanted = logical_len(&db).await;
        assert!(
            file_len(&dir) < wanted,
            "{} of {wanted} bytes",
            file_len(&dir)
        );
    }
}
