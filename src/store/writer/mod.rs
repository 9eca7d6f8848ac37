//! Group commit. Every write goes through one writer task that runs the jobs
//! waiting at that moment in one transaction and commits them with one fsync.
//! A caller gets its answer only once that commit is durable: nothing is
//! acknowledged before it is on disk, yet a burst costs one fsync, not one per
//! delivery.
//!
//! The batch owns the keys it decides on while it runs (SQLite: the whole
//! database, in an `IMMEDIATE` transaction; PostgreSQL: an advisory lock on
//! each of those keys, shared by every writer of every process), so what it
//! reads stays true until it commits. On PostgreSQL several writers may run,
//! each taking the jobs of its own routing shards (`[engine]
//! postgres_writers`), side by side unless their batches share a key.
//! Jobs are values (`WriteJob`) that say which keys they decide on. Those of
//! deliveries name theirs: the keys of consecutive deliveries are read in a
//! few statements, each decision claims its keys in memory, and every row of
//! the batch is written in a few multi-row statements before the commit. A
//! job without keys runs in a savepoint of its own after the rows so far are
//! written. With `group_commit = false` each job runs in its own transaction
//! and claims are made in the database. Either way the job sees one `Tx`.
//!
//! A storage error anywhere in a batch fails the whole batch (every caller
//! gets an error and the provider retries) and the writer's connection is
//! replaced (`connection`): a job's failure is contained only when the
//! database proves its transaction intact, by rolling back to the job's
//! savepoint.

//! Here: `Writer`, where a write goes. A job's two forms are in `job`, the
//! batch loop in `batch`, routing and key locks in `locks`, direct mode in
//! `direct`, the writer's connection and health in `connection`.

mod batch;
mod connection;
mod direct;
mod job;
mod locks;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use futures_util::future::BoxFuture;
use sea_orm::DbErr;
use tokio::sync::{Mutex, mpsc, oneshot};

use self::batch::write_loop;
use self::connection::Connection;
pub use self::connection::{Health, is_storage_error};
pub use self::direct::Direct;
pub use self::job::{Batch, Queued, WriteJob};
use self::job::{Job, Pending};
use self::locks::shard;
pub use self::locks::{begin_owning_reservations, transaction_owning_reservations};
use super::{Durability, Pool};

/// Jobs waiting for the writer before callers wait to enqueue.
const QUEUE: usize = 4096;

/// A batch's phases, in order, as `BatchRecording::phases` is indexed:
/// taking its transaction (nothing when the batch before began it), owning
/// its keys and reading their rows (PostgreSQL; SQLite's `IMMEDIATE`
/// transaction owns them already and reads them with the jobs), running its
/// jobs, writing its rows, and the commit up to its durable flush.
pub const PHASES: [&str; 5] = ["begin", "own", "jobs", "rows", "commit"];

/// What a writer records of each batch.
#[derive(Clone)]
pub struct BatchRecording {
    /// The jobs it committed together.
    pub size: metrics::Histogram,
    /// Seconds spent in each phase, in `PHASES` order.
    pub phases: [metrics::Histogram; PHASES.len()],
}

impl BatchRecording {
    /// Records nothing (tests, tools).
    pub fn noop() -> Self {
        Self {
            size: metrics::Histogram::noop(),
            phases: std::array::from_fn(|_| metrics::Histogram::noop()),
        }
    }
}

/// Where write transactions run.
#[derive(Clone)]
pub enum Writer {
    /// One transaction per job, on a pool of the writer's own.
    Direct(Arc<Direct>),
    /// Jobs batched by writer tasks, one queue each; a job goes to the writer
    /// of its keys' shard (see `shard`).
    Grouped {
        queues: Vec<mpsc::Sender<Job>>,
        health: Vec<Arc<Health>>,
    },
}

impl Writer {
    /// A transaction per job, on a pool of its own opened on `url`.
    pub async fn direct(url: &str, durability: Durability) -> anyhow::Result<Self> {
        let direct = Arc::new(Direct {
            connection: Mutex::new(Connection::open(url, Pool::Shared, durability).await?),
            health: Health::default(),
        });
        Direct::watch(&direct);
        Ok(Self::Direct(direct))
    }

    /// `count` group-commit writers on the database at `url`, each on a
    /// thread of its own with its own connection (opened there). A writer
    /// does CPU work for every job (deciding, encoding rows): writers sharing
    /// the server's runtime thread ran one at a time (measured on PostgreSQL:
    /// two writers on one thread 1456–1519 deliveries/s, on two threads
    /// ~2100).
    /// Each batch's size and phases are recorded in `recording`.
    pub async fn start_on_threads(
        url: &str,
        count: usize,
        recording: BatchRecording,
        durability: Durability,
    ) -> anyhow::Result<Self> {
        let mut queues = Vec::with_capacity(count);
        let mut health = Vec::with_capacity(count);
        for n in 0..count {
            let (sender, receiver) = mpsc::channel(QUEUE);
            let (opened, open) = oneshot::channel::<anyhow::Result<()>>();
            let url = url.to_owned();
            let name = format!("unicity-writer-{n}");
            let state = Arc::new(Health::default());
            let shared = state.clone();
            let recording = recording.clone();
            std::thread::Builder::new()
                .name(name.clone())
                .spawn(move || {
                    let runtime = match tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                    {
                        Ok(runtime) => runtime,
                        Err(error) => {
                            let _ = opened.send(Err(error.into()));
                            return;
                        }
                    };
                    runtime.block_on(async move {
                        match Connection::open(&url, Pool::Writer, durability).await {
                            Ok(connection) => {
                                let _ = opened.send(Ok(()));
                                write_loop(connection, &shared, &name, receiver, &recording).await;
                            }
                            Err(error) => {
                                let _ = opened.send(Err(error));
                            }
                        }
                    });
                })?;
            open.await
                .map_err(|_| anyhow::anyhow!("writer thread {n} stopped while starting"))??;
            queues.push(sender);
            health.push(state);
        }
        Ok(Self::Grouped { queues, health })
    }

    /// False while a writer cannot commit (its last batch failed and nothing
    /// has committed since): `/readyz` reports it.
    pub fn is_healthy(&self) -> bool {
        match self {
            Self::Direct(direct) => direct.health.is_ok(),
            Self::Grouped { health, .. } => health.iter().all(|h| h.is_ok()),
        }
    }

    /// Runs `job` in a write transaction and returns its result once the
    /// transaction committed. An error from the job rolls back its writes
    /// only.
    ///
    /// The future is boxed: an `async fn` generic over the job made callers'
    /// futures fail `Send` (rustc cannot prove it for every lifetime of a
    /// borrow they hold across the call).
    pub fn submit<J: WriteJob>(&self, job: J) -> BoxFuture<'_, Result<J::Output, DbErr>> {
        Box::pin(self.submit_now(job))
    }

    async fn submit_now<J: WriteJob>(&self, job: J) -> Result<J::Output, DbErr> {
        let keys = job.keys();
        match self {
            Self::Direct(direct) => direct.run(job).await,
            Self::Grouped { queues, .. } => {
                let jobs = &queues[keys.as_ref().and_then(shard).unwrap_or(0) % queues.len()];
                let (reply, answer) = oneshot::channel();
                jobs.send(Box::new(Pending { job, keys, reply }))
                    .await
                    .map_err(|_| DbErr::Custom("the writer stopped".to_owned()))?;
                answer
                    .await
                    .map_err(|_| DbErr::Custom("the writer dropped the job".to_owned()))?
            }
        }
    }
}
