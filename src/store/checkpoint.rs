//! How far the deliveries read model holds the journal (its checkpoint) and
//! how far it may be applied (the fence).
//!
//! A stretch must never skip a row that commits later with a lower position.
//! On SQLite one writer at a time holds the database from its first insert to
//! its commit, so positions commit in order and the journal's head is the
//! fence. On PostgreSQL transactions commit in any order: every transaction
//! that appends to the journal holds the journal's advisory lock shared from
//! before its first position to its commit (`flush`), and the fence
//! is the head read while holding that lock exclusively, for an instant.

use chrono::{DateTime, Utc};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, DbBackend, DbErr, EntityTrait, QueryFilter,
    QueryOrder, QuerySelect, TransactionTrait,
};

use super::entities::{journal as journal_row, projector_checkpoint};

/// The checkpoint of the deliveries read model.
pub const DELIVERIES: &str = "deliveries";

/// PostgreSQL's advisory lock on journal positions (two-integer form:
/// class, 0). Part of the protocol every process on a database shares.
const JOURNAL_LOCK: (i32, i32) = (0x756e_696a, 0); // "unij"

/// The call a journal append makes on PostgreSQL before its first row.
pub(super) fn share_the_journal() -> String {
    let (class, key) = JOURNAL_LOCK;
    format!("pg_advisory_xact_lock_shared({class}, {key})")
}

/// The position of the journal's last row (0 when it is empty).
pub async fn head<C: ConnectionTrait>(conn: &C) -> Result<i64, DbErr> {
    let last = journal_row::Entity::find()
        .select_only()
        .column_as(journal_row::Column::Position.max(), "head")
        .into_tuple::<Option<i64>>()
        .one(conn)
        .await?;
    Ok(last.flatten().unwrap_or(0))
}

/// A position at or before which every journal row is committed and will
/// never be joined by another. On PostgreSQL appends queue behind the
/// exclusive lock while it waits for those under way: it waits 100 ms at
/// most, then fails (the next round tries again), so that a long transaction
/// holding the lock shared never stalls every append behind the fence.
pub async fn fence(db: &DatabaseConnection) -> Result<i64, DbErr> {
    if db.get_database_backend() != DbBackend::Postgres {
        return head(db).await;
    }
    let txn = db.begin().await?;
    // A process stopped while it holds the lock (paused, or its runtime
    // stalled) would stall every append of every process: its session is
    // ended after a second idle in the transaction, which frees the lock.
    for setting in [
        "SET LOCAL lock_timeout = '100ms'",
        "SET LOCAL idle_in_transaction_session_timeout = '1s'",
    ] {
        txn.execute_unprepared(setting).await?;
    }
    let (class, key) = JOURNAL_LOCK;
    txn.execute_unprepared(&format!("SELECT pg_advisory_xact_lock({class}, {key})"))
        .await?;
    let fence = head(&txn).await?;
    txn.commit().await?;
    Ok(fence)
}

/// How far the projector `name` has applied the journal.
pub async fn checkpoint<C: ConnectionTrait>(conn: &C, name: &str) -> Result<i64, DbErr> {
    let row = projector_checkpoint::Entity::find_by_id(name.to_owned())
        .one(conn)
        .await?;
    Ok(row.map_or(0, |row| row.position))
}

/// Holds the read model's checkpoint until the transaction ends (a rebuild
/// rewriting its rows): on PostgreSQL a projector's stretch waits for it.
pub async fn hold(txn: &sea_orm::DatabaseTransaction) -> Result<(), DbErr> {
    if txn.get_database_backend() == DbBackend::Postgres {
        txn.execute_unprepared(&format!(
            "SELECT position FROM projector_checkpoints WHERE name = '{DELIVERIES}' FOR UPDATE"
        ))
        .await?;
    }
    Ok(())
}

/// Sets the checkpoint `name` to `position` (a rebuild, which rewrote the
/// projector's tables).
pub async fn reset<C: ConnectionTrait>(conn: &C, name: &str, position: i64) -> Result<(), DbErr> {
    let row = projector_checkpoint::ActiveModel {
        name: sea_orm::ActiveValue::Set(name.to_owned()),
        position: sea_orm::ActiveValue::Set(position),
    };
    projector_checkpoint::Entity::insert(row)
        .on_conflict(
            sea_orm::sea_query::OnConflict::column(projector_checkpoint::Column::Name)
                .update_column(projector_checkpoint::Column::Position)
                .to_owned(),
        )
        .exec_without_returning(conn)
        .await?;
    Ok(())
}

/// How far behind the journal the deliveries read model is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Lag {
    /// Journal rows not yet applied (head − checkpoint).
    pub rows: i64,
    /// When the oldest of them was recorded.
    pub since: Option<DateTime<Utc>>,
}

/// The deliveries read model's lag.
pub async fn lag<C: ConnectionTrait>(conn: &C) -> Result<Lag, DbErr> {
    let at = checkpoint(conn, DELIVERIES).await?;
    let rows = head(conn).await? - at;
    if rows <= 0 {
        return Ok(Lag::default());
    }
    let since = journal_row::Entity::find()
        .select_only()
        .column(journal_row::Column::RecordedAt)
        .filter(journal_row::Column::Position.gt(at))
        .order_by_asc(journal_row::Column::Position)
        .into_tuple::<DateTime<Utc>>()
        .one(conn)
        .await?;
    Ok(Lag { rows, since })
}
