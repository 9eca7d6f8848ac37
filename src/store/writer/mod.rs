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

mod connection;

use std::marker::PhantomData;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt as _;
use futures_util::future::BoxFuture;
use sea_orm::{
    ConnectionTrait, DatabaseConnection, DatabaseTransaction, DbBackend, DbErr,
    SqliteTransactionMode, TransactionOptions, TransactionTrait,
};
use tokio::sync::{Mutex, mpsc, oneshot};

use self::connection::{Connection, probe};
pub use self::connection::{Health, is_storage_error};
use super::Pool;
use super::deferred::Deferred;
use super::key_index::{IndexKeys, KeyIndex};
use super::tx::Tx;

/// Most jobs committed together; bounds the latency a batch adds.
const MAX_BATCH: usize = 256;
/// Jobs waiting for the writer before callers wait to enqueue.
const QUEUE: usize = 4096;
/// How often a writer whose last batch failed tries a probe commit while no
/// job arrives.
const PROBE_INTERVAL: Duration = Duration::from_secs(1);

/// Work for the writer, as a value: the keys it decides on, then what it
/// does in the write transaction.
pub trait WriteJob: Send + 'static {
    type Output: Send + 'static;

    /// The keys of the rows the job decides on, when those are all it reads
    /// and claims: under group commit it then claims against the batch's
    /// index of those keys (loaded for many jobs in a few statements), its
    /// claims and rows written with other jobs' before the commit. In
    /// exchange it writes nothing itself (no `Tx::record` or `Tx::claim`)
    /// and reads no table `Deferred` writes but through `Tx`: it runs
    /// without a savepoint, its failure leaving nothing behind since it
    /// wrote nothing.
    ///
    /// `None` (the default): the job may read and write anything; it runs
    /// in a savepoint of its own and sees every row written before it.
    fn keys(&self) -> Option<IndexKeys> {
        None
    }

    /// The work. An error rolls back this job's writes only.
    fn run<'a>(self, tx: &'a mut Tx<'_>) -> BoxFuture<'a, Result<Self::Output, DbErr>>;
}

/// A one-off job written as a closure, without keys (see `Writer::run`).
struct Adhoc<F, T>(F, PhantomData<fn() -> T>);

impl<F, T> WriteJob for Adhoc<F, T>
where
    T: Send + 'static,
    F: for<'a, 't> FnOnce(&'a mut Tx<'t>) -> BoxFuture<'a, Result<T, DbErr>> + Send + 'static,
{
    type Output = T;

    fn run<'a>(self, tx: &'a mut Tx<'_>) -> BoxFuture<'a, Result<T, DbErr>> {
        (self.0)(tx)
    }
}

/// Reports the batch's commit to one job's caller.
type Completion = Box<dyn FnOnce(Result<(), &DbErr>) + Send>;

/// A job waiting in a writer's queue, whatever its type, with its keys and
/// where its answer goes.
pub trait Queued: Send {
    fn keys(&self) -> Option<&IndexKeys>;

    /// Runs the job inside the batch transaction; the completion reports
    /// the batch's commit to its caller.
    fn run<'t>(
        self: Box<Self>,
        txn: &'t DatabaseTransaction,
        batch: &'t mut Batch,
    ) -> BoxFuture<'t, Completion>;
}

struct Pending<J: WriteJob> {
    job: J,
    keys: Option<IndexKeys>,
    reply: oneshot::Sender<Result<J::Output, DbErr>>,
}

impl<J: WriteJob> Queued for Pending<J> {
    fn keys(&self) -> Option<&IndexKeys> {
        self.keys.as_ref()
    }

    fn run<'t>(
        self: Box<Self>,
        txn: &'t DatabaseTransaction,
        batch: &'t mut Batch,
    ) -> BoxFuture<'t, Completion> {
        let Self { job, keys, reply } = *self;
        Box::pin(async move {
            let outcome = match &keys {
                Some(keys) => against_index(txn, batch, keys, job).await,
                None => in_savepoint(txn, batch, job).await,
            };
            Box::new(move |committed: Result<(), &DbErr>| {
                let result = match (outcome, committed) {
                    (Ok(value), Ok(())) => Ok(value),
                    (Err(error), _) => Err(error),
                    (Ok(_), Err(error)) => {
                        Err(DbErr::Custom(format!("group commit failed: {error}")))
                    }
                };
                let _ = reply.send(result);
            }) as Completion
        })
    }
}

/// What the jobs of one batch have written but not yet sent, and know.
#[derive(Default)]
pub struct Batch {
    rows: Deferred,
    index: KeyIndex,
    /// A storage error a job met that its transaction may not have survived:
    /// the batch must not commit.
    broken: Option<String>,
}

impl Batch {
    fn break_on(&mut self, error: &DbErr) {
        if self.broken.is_none() {
            self.broken = Some(error.to_string());
        }
    }
}

/// A job in a writer's queue.
type Job = Box<dyn Queued>;

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

/// The pool of direct mode, replaced after a storage error like a writer's.
pub struct Direct {
    connection: Mutex<Connection>,
    health: Health,
}

impl Writer {
    /// A transaction per job, on a pool of its own opened on `url`.
    pub async fn direct(url: &str) -> anyhow::Result<Self> {
        Ok(Self::Direct(Arc::new(Direct {
            connection: Mutex::new(Connection::open(url, Pool::Shared).await?),
            health: Health::default(),
        })))
    }

    /// `count` group-commit writers on the database at `url`, each on a
    /// thread of its own with its own connection (opened there). A writer
    /// does CPU work for every job (deciding, encoding rows): writers sharing
    /// the server's runtime thread ran one at a time (measured on PostgreSQL:
    /// two writers on one thread 1456–1519 deliveries/s, on two threads
    /// ~2100).
    pub async fn start_on_threads(url: &str, count: usize) -> anyhow::Result<Self> {
        let mut queues = Vec::with_capacity(count);
        let mut health = Vec::with_capacity(count);
        for n in 0..count {
            let (sender, receiver) = mpsc::channel(QUEUE);
            let (opened, open) = oneshot::channel::<anyhow::Result<()>>();
            let url = url.to_owned();
            let name = format!("unicity-writer-{n}");
            let state = Arc::new(Health::default());
            let shared = state.clone();
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
                        match Connection::open(&url, Pool::Writer).await {
                            Ok(connection) => {
                                let _ = opened.send(Ok(()));
                                write_loop(connection, &shared, &name, receiver).await;
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

    /// Submits a one-off job written as a closure, without keys: for work
    /// that is one or two `Tx` calls, not worth a type of its own.
    pub async fn run<T, F>(&self, work: F) -> Result<T, DbErr>
    where
        T: Send + 'static,
        F: for<'a, 't> FnOnce(&'a mut Tx<'t>) -> BoxFuture<'a, Result<T, DbErr>> + Send + 'static,
    {
        self.submit(Adhoc(work, PhantomData)).await
    }
}

impl Direct {
    /// One job in its own transaction. Any storage error, and any failed
    /// commit or rollback, replaces the pool the job used.
    async fn run<J: WriteJob>(&self, job: J) -> Result<J::Output, DbErr> {
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

/// Runs one indexed job on a copy of the batch's index for its keys. What it
/// claimed joins the batch's index and rows only if it succeeded. The job
/// writes nothing, so its own refusal leaves the transaction as it was; a
/// storage error it met may not have, and breaks the batch.
async fn against_index<J: WriteJob>(
    txn: &DatabaseTransaction,
    batch: &mut Batch,
    keys: &IndexKeys,
    job: J,
) -> Result<J::Output, DbErr> {
    let mut tx = Tx::new(txn, Deferred::with_index(batch.index.view(keys)));
    let value = match job.run(&mut tx).await {
        Ok(value) => value,
        Err(error) => {
            if is_storage_error(&error) {
                batch.break_on(&error);
            }
            return Err(error);
        }
    };
    let mut rows = tx.into_rows();
    if let Some(view) = rows.take_index() {
        batch.index.merge(view);
    }
    batch.rows.absorb(rows);
    Ok(value)
}

/// Runs one job in a savepoint, its rows (claims made in the database,
/// events journaled) all written before the savepoint ends: a failed job
/// leaves nothing behind. Rolling back to its savepoint proves the
/// transaction survived the job's error; if that rollback fails, the batch
/// is broken.
///
/// The savepoint of a job that succeeded is never released: the batch's
/// commit releases them all, one statement per job fewer. A failed job rolls
/// back to its own savepoint, the most recent of that name.
async fn in_savepoint<J: WriteJob>(
    txn: &DatabaseTransaction,
    batch: &mut Batch,
    job: J,
) -> Result<J::Output, DbErr> {
    if let Err(error) = txn.execute_unprepared("SAVEPOINT job").await {
        batch.break_on(&error);
        return Err(error);
    }
    let mut tx = Tx::new(txn, Deferred::default());
    let outcome = match job.run(&mut tx).await {
        Ok(value) => tx.into_rows().flush(txn).await.map(|()| value),
        Err(error) => Err(error),
    };
    match outcome {
        Ok(value) => Ok(value),
        Err(error) => {
            if let Err(rollback) = txn.execute_unprepared("ROLLBACK TO SAVEPOINT job").await {
                batch.break_on(&rollback);
            }
            Err(error)
        }
    }
}

/// Writers' queues on PostgreSQL: a job goes to the writer of its key's
/// shard, so that the deliveries of one key meet in one batch. Routing only:
/// what a batch owns is its keys themselves (`lock_set`).
const ROUTING_SHARDS: u32 = 64;
/// First key of the transaction-scoped advisory locks a batch holds on each
/// of its keys (PostgreSQL's two-integer form: class, key hash). Part of the
/// locking protocol every process on a database must share.
const KEY_LOCK_CLASS: i32 = 0x756e_696b; // "unik"
/// The lock every keyed batch holds shared and work that may touch any key
/// holds exclusively.
const ANY_KEY_LOCK: (i32, i32) = (0x756e_6961, 0); // "unia"

/// 32-bit FNV-1a: stable across processes, builds and platforms, unlike
/// std's hashers, which may change between Rust releases.
fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5, |hash: u32, byte| {
        (hash ^ u32::from(*byte)).wrapping_mul(0x0100_0193)
    })
}

/// The routing shard of a key.
fn shard_of(key: &str) -> u32 {
    fnv1a(key.as_bytes()) % ROUTING_SHARDS
}

/// The shard a job is routed by: its business key's, else its transport
/// key's; `None` for a job with no key.
fn shard(keys: &IndexKeys) -> Option<usize> {
    keys.business
        .first()
        .or(keys.transport.as_ref())
        .map(|key| shard_of(key) as usize)
}

/// What a batch must own until it commits.
#[derive(Debug, PartialEq, Eq)]
enum LockSet {
    /// The lock of every business key its jobs read (their transport keys'
    /// if they have none), by hash, ascending, and `ANY_KEY_LOCK` shared.
    Keys(Vec<i32>),
    /// Everything: a job may read any key (`ANY_KEY_LOCK` exclusive).
    Any,
}

/// The locks a batch of these jobs takes. Two batches wait on each other
/// only when they share a key (or two keys share a 32-bit hash). Transport
/// links are not covered: they are only ever inserted, and a link another
/// writer inserted meanwhile makes this batch's claim of it fail at insert
/// (`claim_all`), never act on the stale read.
fn lock_set<'k>(jobs: impl IntoIterator<Item = Option<&'k IndexKeys>>) -> LockSet {
    let mut hashes = Vec::new();
    for keys in jobs {
        let Some(keys) = keys else {
            return LockSet::Any;
        };
        let named = if keys.business.is_empty() {
            keys.transport.as_slice()
        } else {
            keys.business.as_slice()
        };
        hashes.extend(named.iter().map(|k| fnv1a(k.as_bytes()).cast_signed()));
    }
    hashes.sort_unstable();
    hashes.dedup();
    LockSet::Keys(hashes)
}

/// Makes the batch the only writer of its keys until it commits. SQLite's
/// `IMMEDIATE` transaction already owns the whole database; on PostgreSQL the
/// batch takes `locks` in one statement, in ascending order of key hash (so
/// that two batches never wait on each other in a cycle), after the shared
/// hold on `ANY_KEY_LOCK` that keeps work touching any key out meanwhile.
async fn own_writes(txn: &DatabaseTransaction, locks: &LockSet) -> Result<(), DbErr> {
    if txn.get_database_backend() != DbBackend::Postgres {
        return Ok(());
    }
    let (any_class, any_key) = ANY_KEY_LOCK;
    let statement = match locks {
        LockSet::Any => format!("SELECT pg_advisory_xact_lock({any_class}, {any_key})"),
        LockSet::Keys(hashes) if hashes.is_empty() => return Ok(()),
        LockSet::Keys(hashes) => {
            let mut calls = vec![format!(
                "pg_advisory_xact_lock_shared({any_class}, {any_key})"
            )];
            calls.extend(
                hashes
                    .iter()
                    .map(|h| format!("pg_advisory_xact_lock({KEY_LOCK_CLASS}, {h})")),
            );
            format!("SELECT {}", calls.join(", "))
        }
    };
    txn.execute_unprepared(&statement).await?;
    Ok(())
}

/// Runs batches until every sender is gone. After a failed batch the writer
/// reports itself unhealthy and, while idle, probes until a commit succeeds.
async fn write_loop(
    mut connection: Connection,
    health: &Health,
    name: &str,
    mut jobs: mpsc::Receiver<Job>,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    loop {
        let received = if health.is_ok() {
            jobs.recv_many(&mut batch, MAX_BATCH).await
        } else {
            tokio::select! {
                received = jobs.recv_many(&mut batch, MAX_BATCH) => received,
                () = tokio::time::sleep(PROBE_INTERVAL) => {
                    let probed = match connection.get().await {
                        Ok((db, generation)) => match probe(&db, name).await {
                            Ok(()) => true,
                            Err(error) => {
                                tracing::warn!(%error, writer = name, "writer probe failed");
                                connection.discard(generation).await;
                                false
                            }
                        },
                        Err(_) => false,
                    };
                    health.set(probed);
                    continue;
                }
            }
        };
        if received == 0 {
            return;
        }
        let jobs_in_batch = batch.len();
        let written = AssertUnwindSafe(write_batch(&mut connection, &mut batch))
            .catch_unwind()
            .await;
        match written {
            Ok(Ok(())) => health.set(true),
            Ok(Err(error)) => {
                // Jobs not yet run are dropped: their callers get an error too.
                batch.clear();
                tracing::error!(%error, jobs = jobs_in_batch, writer = name, "group commit failed");
                health.set(false);
            }
            Err(panic) => {
                // A job's bug: the batch never committed and every caller,
                // its completion dropped, gets an error (the provider
                // retries). The writer carries on, on a fresh connection
                // since the transaction's state is unknown.
                batch.clear();
                connection.discard_current().await;
                tracing::error!(
                    panic = panic_message(panic.as_ref()),
                    jobs = jobs_in_batch,
                    writer = name,
                    "a write job panicked; its batch failed"
                );
                health.set(false);
            }
        }
    }
}

/// The text a panic carried, if it was a string.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

/// Begins a batch's transaction. A batch that has sent nothing yet may try
/// once more on a fresh connection: one that broke while idle (a PostgreSQL
/// backend killed, a server restarted) costs a reconnect, not the batch.
async fn begin(connection: &mut Connection) -> Result<(DatabaseTransaction, u64), DbErr> {
    // The batch owns the database from its first statement: what it reads
    // into its index stays true until it commits.
    let immediate = TransactionOptions {
        sqlite_transaction_mode: Some(SqliteTransactionMode::Immediate),
        ..TransactionOptions::default()
    };
    let (db, generation) = connection.get().await?;
    match db.begin_with_options(immediate).await {
        Ok(txn) => Ok((txn, generation)),
        Err(error) => {
            tracing::warn!(%error, "a writer connection could not begin; reopening it");
            connection.discard(generation).await;
            let (db, generation) = connection.get().await?;
            Ok((db.begin_with_options(immediate).await?, generation))
        }
    }
}

/// Runs the jobs of one batch in one transaction and reports its commit to
/// each. Any failure fails every job and discards the connection.
async fn write_batch(connection: &mut Connection, jobs: &mut Vec<Job>) -> Result<(), DbErr> {
    let (txn, generation) = begin(connection).await?;
    let (completions, committed) = run_jobs(txn, jobs).await;
    if let Err(error) = &committed {
        connection.discard(generation).await;
        tracing::debug!(%error, "writer connection discarded after a failed batch");
    }
    for complete in completions {
        complete(committed.as_ref().map(|_| ()));
    }
    committed
}

/// Runs `jobs` in `txn` and commits unless anything failed that the
/// transaction may not have survived.
async fn run_jobs(
    txn: DatabaseTransaction,
    jobs: &mut Vec<Job>,
) -> (Vec<Completion>, Result<(), DbErr>) {
    let mut completions = Vec::with_capacity(jobs.len());
    if let Err(error) = own_writes(&txn, &lock_set(jobs.iter().map(|job| job.keys()))).await {
        return (completions, Err(error));
    }
    let keys: Vec<Option<IndexKeys>> = jobs.iter().map(|job| job.keys().cloned()).collect();
    let mut state = Batch::default();
    for (i, job) in jobs.drain(..).enumerate() {
        let prepared = match &keys[i] {
            // Load the keys of this job and the indexed jobs after it at once.
            Some(k) if !state.index.covers(k) => {
                let run = keys[i..].iter().map_while(Option::as_ref);
                state.index.load(&txn, run).await
            }
            Some(_) => Ok(()),
            // A job that may read anything sees every row written so far
            // and may change any key: the index starts afresh after it.
            None => {
                state.index = KeyIndex::default();
                state.rows.flush(&txn).await
            }
        };
        if let Err(error) = prepared {
            // Jobs left in the batch are dropped; their callers get an error,
            // as do those that ran (nothing commits).
            return (completions, Err(error));
        }
        completions.push(job.run(&txn, &mut state).await);
        if let Some(broken) = &state.broken {
            let error = DbErr::Custom(format!("a job's storage error broke the batch: {broken}"));
            return (completions, Err(error));
        }
    }
    let committed = match state.rows.flush(&txn).await {
        Ok(()) => txn.commit().await,
        Err(error) => Err(error),
    };
    (completions, committed)
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use sea_orm::{ConnectionTrait, DbBackend, Statement};

    use super::*;
    use crate::domain::delivery::BodyRef;

    async fn stored_bodies<C: ConnectionTrait>(conn: &C) -> Result<i64, DbErr> {
        let row = conn
            .query_one_raw(Statement::from_string(
                DbBackend::Sqlite,
                "SELECT COUNT(*) AS n FROM raw_bodies",
            ))
            .await?
            .expect("COUNT returns a row");
        row.try_get("", "n")
    }

    /// Defers a body of `byte`, then fails or panics if told to: a
    /// delivery-like job that claims nothing.
    struct DeferBody {
        byte: u8,
        fails: bool,
        panics: bool,
    }

    impl WriteJob for DeferBody {
        type Output = ();

        fn keys(&self) -> Option<IndexKeys> {
            Some(IndexKeys::default())
        }

        fn run<'a>(self, tx: &'a mut Tx<'_>) -> BoxFuture<'a, Result<(), DbErr>> {
            Box::pin(async move {
                let body = BodyRef {
                    sha256: format!("{:02x}", self.byte).repeat(32),
                    size: 1,
                };
                tx.body(&body, vec![self.byte], Utc::now());
                assert!(!self.panics, "a bug in a job");
                if self.fails {
                    return Err(DbErr::Custom("refused".to_owned()));
                }
                Ok(())
            })
        }
    }

    /// Holds the writer busy so that the jobs sent meanwhile form one batch.
    async fn hold(writer: &Writer) -> oneshot::Sender<()> {
        let (release, released) = oneshot::channel::<()>();
        let (started, running) = oneshot::channel::<()>();
        let held = writer.clone();
        tokio::spawn(async move {
            held.run(move |_: &mut Tx<'_>| {
                Box::pin(async move {
                    let _ = started.send(());
                    let _ = released.await;
                    Ok(())
                })
            })
            .await
        });
        running.await.expect("the holding job runs");
        release
    }

    #[test]
    fn shards_come_from_fnv_1a_as_published() {
        // Published FNV-1a 32-bit vectors: every process must agree on them.
        assert_eq!(fnv1a(b""), 0x811c_9dc5);
        assert_eq!(fnv1a(b"a"), 0xe40c_292c);
        assert_eq!(fnv1a(b"foobar"), 0xbf9c_f968);
        assert_eq!(shard_of("a"), 0xe40c_292c % ROUTING_SHARDS);
    }

    #[test]
    fn a_batch_locks_its_own_keys_or_everything_for_keyless_work() {
        let keyed = IndexKeys {
            transport: Some("t".to_owned()),
            business: vec![
                "stripe-refund@2:k".to_owned(),
                "stripe-refund@1:k".to_owned(),
            ],
        };
        let unkeyed = IndexKeys {
            transport: Some("only-transport".to_owned()),
            business: Vec::new(),
        };
        let hash = |k: &str| fnv1a(k.as_bytes()).cast_signed();
        let mut expected = vec![
            hash("stripe-refund@2:k"),
            hash("stripe-refund@1:k"),
            hash("only-transport"),
        ];
        expected.sort_unstable();
        assert_eq!(
            lock_set([Some(&keyed), Some(&keyed), Some(&unkeyed)]),
            LockSet::Keys(expected)
        );
        // A transport key is locked only for a job without a business key.
        assert!(!matches!(lock_set([Some(&keyed)]), LockSet::Keys(h) if h.contains(&hash("t"))));
        // Routed by the newest business key, else the transport key.
        assert_eq!(shard(&keyed), Some(shard_of("stripe-refund@2:k") as usize));
        assert_eq!(shard(&unkeyed), Some(shard_of("only-transport") as usize));
        // Work that may read any key owns everything.
        assert_eq!(lock_set([Some(&keyed), None]), LockSet::Any);
    }

    #[tokio::test]
    async fn a_job_that_reads_sees_the_rows_deferred_before_it_in_its_batch() {
        let (dir, db) = crate::store::test_database().await;
        let writer = Writer::start_on_threads(&crate::store::test_url(&dir), 1)
            .await
            .unwrap();

        let release = hold(&writer).await;
        let deferring = writer.clone();
        let deferred = tokio::spawn(async move {
            deferring
                .submit(DeferBody {
                    byte: 0xab,
                    fails: false,
                    panics: false,
                })
                .await
        });
        let reading = writer.clone();
        let read = tokio::spawn(async move {
            reading
                .run(|tx| Box::pin(async move { stored_bodies(tx.connection()).await }))
                .await
        });
        // Both wait in the queue while the holding job runs, so they share the
        // next batch: the body is deferred when the reader runs.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let _ = release.send(());
        deferred.await.unwrap().unwrap();
        assert_eq!(read.await.unwrap().unwrap(), 1);
        assert_eq!(stored_bodies(&db).await.unwrap(), 1);
    }

    #[tokio::test]
    async fn a_failed_job_leaves_no_deferred_row_and_its_batch_commits() {
        let (dir, db) = crate::store::test_database().await;
        let writer = Writer::start_on_threads(&crate::store::test_url(&dir), 1)
            .await
            .unwrap();

        let release = hold(&writer).await;
        let mut jobs = Vec::new();
        for (i, fails) in [(1u8, false), (2, true), (3, false)] {
            let writer = writer.clone();
            jobs.push(tokio::spawn(async move {
                writer
                    .submit(DeferBody {
                        byte: i,
                        fails,
                        panics: false,
                    })
                    .await
            }));
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let _ = release.send(());
        let outcomes: Vec<bool> = futures_util::future::join_all(jobs)
            .await
            .into_iter()
            .map(|joined| joined.unwrap().is_ok())
            .collect();
        assert_eq!(outcomes, [true, false, true]);
        assert_eq!(stored_bodies(&db).await.unwrap(), 2);
    }

    #[tokio::test]
    async fn a_job_that_panics_fails_its_batch_and_the_writer_goes_on() {
        let (dir, db) = crate::store::test_database().await;
        let writer = Writer::start_on_threads(&crate::store::test_url(&dir), 1)
            .await
            .unwrap();

        let release = hold(&writer).await;
        let before = {
            let writer = writer.clone();
            tokio::spawn(async move {
                writer
                    .submit(DeferBody {
                        byte: 1,
                        fails: false,
                        panics: false,
                    })
                    .await
            })
        };
        let panics = {
            let writer = writer.clone();
            tokio::spawn(async move {
                writer
                    .submit(DeferBody {
                        byte: 0xee,
                        fails: false,
                        panics: true,
                    })
                    .await
            })
        };
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let _ = release.send(());
        // Nothing of that batch is acknowledged, nor committed.
        assert!(before.await.unwrap().is_err());
        assert!(panics.await.unwrap().is_err());
        assert_eq!(stored_bodies(&db).await.unwrap(), 0);
        // The writer is still there: the next job commits.
        writer
            .submit(DeferBody {
                byte: 2,
                fails: false,
                panics: false,
            })
            .await
            .expect("the writer survived the panic");
        assert_eq!(stored_bodies(&db).await.unwrap(), 1);
        // Healthy again once that batch is counted (just after its callers
        // are answered).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !writer.is_healthy() {
            assert!(std::time::Instant::now() < deadline, "still unhealthy");
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }
}
