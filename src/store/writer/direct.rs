//! Direct mode (`group_commit = false`): each job in a transaction of its
//! own, claims made in the database, owning on PostgreSQL the locks a
//! batch of it would (`locks`). After a storage error, or a commit or
//! rollback that failed, the pool is presumed broken and replaced; a caller
//! hears of success only once its transaction committed.

use std::sync::Arc;

use sea_orm::{DatabaseConnection, DbErr, TransactionTrait};
use tokio::sync::Mutex;

use super::batch::PROBE_INTERVAL;
use super::connection::{Connection, Health, is_storage_error, probe};
use super::job::WriteJob;
use super::locks::{lock_set, own_writes};
use crate::store::deferred::Deferred;
use crate::store::key_index::KeyIndex;
use crate::store::tx::Tx;

/// The pool of direct mode, replaced after a storage error like a writer's.
pub struct Direct {
    pub(super) connection: Mutex<Connection>,
    pub(super) health: Health,
}

impl Direct {
    /// While the pool is unhealthy, commits a probe every second until one
    /// succeeds: readiness comes back with the database (a freed disk, a
    /// server back up), not with the next delivery, which a load balancer
    /// that waits on `/readyz` would never send. Stops with the pool.
    pub(super) fn watch(direct: &Arc<Self>) {
        let watched = Arc::downgrade(direct);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(PROBE_INTERVAL).await;
                let Some(direct) = watched.upgrade() else {
                    return;
                };
                if direct.health.is_ok() {
                    continue;
                }
                let mut connection = direct.connection.lock().await;
                let probed = match connection.get().await {
                    Ok((db, generation)) => match probe(&db, "unicity-direct").await {
                        Ok(()) => true,
                        Err(error) => {
                            tracing::warn!(%error, "direct writer probe failed");
                            connection.discard(generation).await;
                            false
                        }
                    },
                    Err(_) => false,
                };
                direct.health.set(probed);
            }
        });
    }

    /// One job in its own transaction. Any storage error, and any failed
    /// commit or rollback, replaces the pool the job used.
    pub(super) async fn run<J: WriteJob>(&self, job: J) -> Result<J::Output, DbErr> {
        let (db, generation) = self.connection.lock().await.get().await?;
        let outcome = Self::attempt(&db, job).await;
        match &outcome {
            Ok(_) => self.health.set(true),
            Err((error, broken)) => {
                if *broken {
                    tracing::error!(%error, "write transaction failed; reopening its connection");
                    self.health.set(false);
                    self.connection.lock().await.discard(generation).await;
                }
            }
        }
        outcome.map_err(|(error, _)| error)
    }

    /// The job's result, or its error and whether the connection must go.
    async fn attempt<J: WriteJob>(
        db: &DatabaseConnection,
        job: J,
    ) -> Result<J::Output, (DbErr, bool)> {
        let txn = db.begin().await.map_err(|error| (error, true))?;
        // The locks a batch of this one job would own (PostgreSQL), for
        // keyed work and for work that counts under a key before it writes
        // (`owns_every_key`): keyed work waits on work touching the same
        // keys, a case's resolution (and a re-decision) on all keyed work,
        // across processes and modes alike; the second uncited distinct
        // effect's refusal and an operation made by hand rely on it. Other keyless jobs (an effect's answer, a count) take none,
        // as before: one at a time they would hold every writer up.
        let keys = job.keys();
        if keys.is_some() || job.owns_every_key() {
            let locks = lock_set([keys.as_ref()]);
            if let Err(error) = own_writes(&txn, &locks, &mut KeyIndex::default(), []).await {
                let broken = is_storage_error(&error) || txn.rollback().await.is_err();
                return Err((error, broken));
            }
        }
        let mut tx = Tx::new(&txn, Deferred::default());
        let outcome = match job.run(&mut tx).await {
            Ok(value) => tx.into_rows().flush(&txn).await.map(|()| value),
            Err(error) => Err(error),
        };
        match outcome {
            Ok(value) => match txn.commit().await {
                Ok(()) => Ok(value),
                Err(error) => Err((error, true)),
            },
            Err(error) => {
                let rolled_back = txn.rollback().await.is_ok();
                let broken = is_storage_error(&error) || !rolled_back;
                Err((error, broken))
            }
        }
    }
}
