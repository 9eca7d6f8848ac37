//! The deliveries read model's projector (the keys' horizons follow with
//! it), its storage side: the stretch of
//! the journal it applies next, applied with its checkpoint in one
//! transaction (`checkpoint` says how far it is and may go), and what this
//! process knows of its progress. The task that drives it is
//! `services::projector`.

use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, DbErr, EntityTrait, QueryFilter,
    TransactionTrait,
};

pub use super::checkpoint::{DELIVERIES, Lag, checkpoint, fence, head, lag, reset};
use super::entities::projector_checkpoint;
use super::journal::{self, ReadError};
use super::projections::deliveries::Fold;

/// The event types that shape the deliveries read model and the keys'
/// horizons.
const SHAPING: [&str; 7] = [
    "DeliveryDecided",
    "DeliveryReceived",
    "DeliveryRejected",
    "KeyDerived",
    "DecisionMade",
    "KeyReserved",
    "KeysPurged",
];

/// The next stretch of the journal for the deliveries read model: the rows
/// after `from`, up to `fence`, at most `limit` of those that shape it,
/// folded.
#[derive(Debug)]
pub struct Stretch {
    from: i64,
    to: i64,
    fold: Fold,
}

impl Stretch {
    pub async fn read<C: ConnectionTrait>(
        conn: &C,
        from: i64,
        fence: i64,
        limit: u64,
    ) -> Result<Self, ReadError> {
        let (events, last) = journal::page_between(conn, (from, fence), &SHAPING, limit).await?;
        let mut fold = Fold::default();
        for stored in &events {
            let id = stored
                .delivery_id
                .map(|d| d.to_string())
                .unwrap_or_default();
            fold.add(&id, &stored.event, (stored.recorded_at, stored.position));
        }
        Ok(Self {
            from,
            to: last.unwrap_or(fence),
            fold,
        })
    }

    /// The position the stretch ends at.
    pub fn to(&self) -> i64 {
        self.to
    }
}

impl Stretch {
    /// Applies the stretch and moves the checkpoint from its start to its
    /// end on `conn`, inside the caller's transaction (a writer job's):
    /// false, writing nothing, when the checkpoint is no longer at its start
    /// (another process's projector applied it).
    pub async fn apply_on<C: ConnectionTrait>(self, conn: &C) -> Result<bool, DbErr> {
        if !advance(conn, self.from, self.to).await? {
            return Ok(false);
        }
        self.fold.write(conn).await?;
        Ok(true)
    }

    /// The same in a transaction of its own, outside the writer.
    pub async fn apply(self, db: &DatabaseConnection) -> Result<bool, DbErr> {
        let txn = db.begin().await?;
        if !self.apply_on(&txn).await? {
            return Ok(false);
        }
        txn.commit().await?;
        Ok(true)
    }
}

/// Applies the journal, as far as it was committed when called, to the read
/// model, in stretches of at most `limit` rows, each in a transaction of
/// its own with its checkpoint: for a command run with or without a server
/// beside it (their compare-and-set on the checkpoint orders them). Returns
/// the position the read model then holds.
pub async fn catch_up(db: &DatabaseConnection, limit: u64) -> Result<i64, DbErr> {
    let target = fence_retried(db).await?;
    loop {
        let from = checkpoint(db, DELIVERIES).await?;
        if from >= target {
            return Ok(from);
        }
        let stretch = Stretch::read(db, from, target, limit)
            .await
            .map_err(|e| DbErr::Custom(e.to_string()))?;
        // Not applied: another projector moved the checkpoint first.
        stretch.apply(db).await?;
    }
}

/// The fence, asked again while a long append keeps it waiting (PostgreSQL
/// gives up after 100 ms): fifty times, some six seconds at most.
pub async fn fence_retried(db: &DatabaseConnection) -> Result<i64, DbErr> {
    let mut tries = 0;
    loop {
        match fence(db).await {
            Err(_) if tries < 50 => {
                tries += 1;
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            other => return other,
        }
    }
}

/// Moves the checkpoint from `from` to `to`, if it is still at `from`.
async fn advance<C: ConnectionTrait>(conn: &C, from: i64, to: i64) -> Result<bool, DbErr> {
    let moved = projector_checkpoint::Entity::update_many()
        .col_expr(
            projector_checkpoint::Column::Position,
            sea_orm::sea_query::Expr::value(to),
        )
        .filter(projector_checkpoint::Column::Name.eq(DELIVERIES))
        .filter(projector_checkpoint::Column::Position.eq(from))
        .exec(conn)
        .await?
        .rows_affected;
    Ok(moved == 1)
}

/// What this process knows of the projector: one round at a time, the
/// checkpoint it last saw, for readers waiting on it, and the journal row it
/// last could not read, if its last round stopped there.
#[derive(Debug)]
pub struct Progress {
    pub turn: tokio::sync::Mutex<()>,
    pub position: tokio::sync::watch::Sender<i64>,
    pub stopped: tokio::sync::watch::Sender<Option<Stopped>>,
}

impl Default for Progress {
    fn default() -> Self {
        Self {
            turn: tokio::sync::Mutex::new(()),
            position: tokio::sync::watch::channel(0).0,
            stopped: tokio::sync::watch::channel(None).0,
        }
    }
}

/// A journal row the projector cannot read, and why, in words that quote
/// nothing of its payload: the read model stays before it until a binary
/// that reads it runs, or the row is repaired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stopped {
    pub position: i64,
    pub reason: String,
}

impl Stopped {
    /// The stop a failed read comes to: `None` for a storage error, which
    /// the next round tries again.
    pub fn of(error: &ReadError) -> Option<Self> {
        use crate::domain::journal::StoredEventError as E;
        let ReadError::Corrupt { position, source } = error else {
            return None;
        };
        let reason = match source {
            E::Unknown {
                event_type,
                version,
            } => format!("unknown event type {event_type} v{version}"),
            E::Unreadable { event_type, .. } => format!("unreadable {event_type} payload"),
            E::Malformed { event_type, reason } => {
                format!("malformed {event_type} payload: {reason}")
            }
        };
        Some(Self {
            position: *position,
            reason,
        })
    }
}

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the deliveries read model stopped before journal row {}: {}",
            self.position, self.reason
        )
    }
}
