//! The writer's own connection, and what `/readyz` learns from it.
//!
//! After any storage error — at `BEGIN`, in a statement, at `COMMIT` or
//! `ROLLBACK` — the connection is presumed broken and never reused as is: it
//! is closed (SQLite then rolls back whatever it still had open and releases
//! its write lock) and a fresh one is opened for the next batch. A failed
//! `COMMIT` is the reason: SQLite may already have rolled the transaction
//! back, and sqlx 0.9 then still counts the connection as inside one, so its
//! next `BEGIN` would become a `SAVEPOINT` of a transaction that never
//! commits — every later batch acknowledged and lost.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sea_orm::{ConnectionTrait, DatabaseConnection, DbErr, RuntimeErr};

use super::super::{Durability, Pool, open};

/// How long closing a broken connection may take before it is abandoned.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// True for an error raised by the database or the connection, as opposed to
/// a job's own refusal: after one, the transaction may be gone and the
/// connection's state is unknown.
pub fn is_storage_error(error: &DbErr) -> bool {
    matches!(
        error,
        DbErr::Conn(_) | DbErr::ConnectionAcquire(_) | DbErr::Exec(_) | DbErr::Query(_)
    )
}

/// Whether a writer can commit: false from a failed batch until a commit
/// (of a batch or a probe) succeeds again.
#[derive(Debug)]
pub struct Health(AtomicBool);

impl Default for Health {
    fn default() -> Self {
        Self(AtomicBool::new(true))
    }
}

impl Health {
    pub fn is_ok(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    pub fn set(&self, ok: bool) {
        self.0.store(ok, Ordering::Release);
    }
}

/// A connection pool that is closed and reopened rather than reused after a
/// storage error. `generation` tells a caller whether the pool it used is
/// still the current one (direct mode shares it between jobs).
pub struct Connection {
    url: String,
    pool: Pool,
    durability: Durability,
    db: Option<DatabaseConnection>,
    generation: u64,
}

impl Connection {
    /// Opens the first pool; failing here fails start-up.
    pub(in crate::store) async fn open(
        url: &str,
        pool: Pool,
        durability: Durability,
    ) -> anyhow::Result<Self> {
        let db = open(url, pool, durability).await?;
        Ok(Self {
            url: url.to_owned(),
            pool,
            durability,
            db: Some(db),
            generation: 0,
        })
    }

    /// The current pool and its generation, opening a fresh one if the last
    /// was discarded.
    pub async fn get(&mut self) -> Result<(DatabaseConnection, u64), DbErr> {
        if let Some(db) = &self.db {
            return Ok((db.clone(), self.generation));
        }
        let db = open(&self.url, self.pool, self.durability)
            .await
            .map_err(|error| DbErr::Conn(RuntimeErr::Internal(format!("{error:#}"))))?;
        self.generation += 1;
        self.db = Some(db.clone());
        Ok((db, self.generation))
    }

    /// The current pool, if it is still that of `generation`.
    pub fn current(&self, generation: u64) -> Option<DatabaseConnection> {
        self.db.clone().filter(|_| generation == self.generation)
    }

    /// Presumes the pool of `generation` broken: closes it, if it is still the
    /// current one, so that the next `get` opens a fresh one.
    pub async fn discard(&mut self, generation: u64) {
        if generation != self.generation {
            return;
        }
        if let Some(db) = self.db.take()
            && tokio::time::timeout(CLOSE_TIMEOUT, db.close())
                .await
                .is_err()
        {
            tracing::warn!("a broken writer connection did not close in time; abandoned");
        }
    }

    /// Presumes the current pool broken, whatever its generation (after a
    /// batch that did not end normally).
    pub async fn discard_current(&mut self) {
        self.discard(self.generation).await;
    }
}

/// Commits a small write on `db`, to learn whether the writer can commit
/// again (a freed disk, a database back up) while no delivery is arriving.
pub async fn probe(db: &DatabaseConnection, name: &str) -> Result<(), DbErr> {
    use sea_orm::TransactionTrait;
    let txn = db.begin().await?;
    txn.execute_unprepared(&format!(
        "INSERT INTO writer_probes (writer, probes) VALUES ('{name}', 1) \
         ON CONFLICT (writer) DO UPDATE SET probes = writer_probes.probes + 1"
    ))
    .await?;
    txn.commit().await
}
