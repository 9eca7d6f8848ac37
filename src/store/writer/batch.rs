//! The batch loop: a writer task takes the jobs waiting, runs them in one
//! transaction once it owns their keys, and commits them with one fsync. No
//! caller hears of success before that commit is durable: after a storage
//! error or a panic the whole batch fails, and its connection is presumed
//! broken and replaced.

use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use futures_util::FutureExt as _;
use sea_orm::{
    ConnectionTrait, DatabaseConnection, DatabaseTransaction, DbBackend, DbErr,
    SqliteTransactionMode, TransactionOptions, TransactionTrait,
};
use tokio::sync::mpsc;

use super::connection::{Connection, Health, probe};
use super::job::{Batch, Completion, Job};
use super::locks::{lock_set, own_writes};
use super::{BatchRecording, PHASES};
use crate::store::key_index::{IndexKeys, KeyIndex};

/// Most jobs committed together; bounds the latency a batch adds.
const MAX_BATCH: usize = 256;
/// How often a writer whose last batch failed tries a probe commit while no
/// job arrives.
pub(super) const PROBE_INTERVAL: Duration = Duration::from_secs(1);

/// Runs batches until every sender is gone. After a failed batch the writer
/// reports itself unhealthy and, while idle, probes until a commit succeeds.
pub(super) async fn write_loop(
    mut connection: Connection,
    health: &Health,
    name: &str,
    mut jobs: mpsc::Receiver<Job>,
    recording: &BatchRecording,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    // The next batch's transaction, when it was begun during this one's commit.
    let mut next = None;
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
        recording.size.record(jobs_in_batch as f64);
        let mut clock = Clock::start(&recording.phases);
        let written = AssertUnwindSafe(write_batch(
            &mut connection,
            &mut batch,
            &jobs,
            &mut next,
            &mut clock,
        ))
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

/// Times a batch's phases into their histograms (`PHASES`), each from the
/// end of the one before.
struct Clock<'a> {
    phases: &'a [metrics::Histogram; PHASES.len()],
    since: Instant,
}

impl<'a> Clock<'a> {
    fn start(phases: &'a [metrics::Histogram; PHASES.len()]) -> Self {
        Self {
            phases,
            since: Instant::now(),
        }
    }

    /// Ends phase `index` of `PHASES` now.
    fn lap(&mut self, index: usize) {
        let now = Instant::now();
        self.phases[index].record((now - self.since).as_secs_f64());
        self.since = now;
    }
}

/// A batch's transaction and the generation of the connection it runs on.
type Begun = (DatabaseTransaction, u64);

/// The batch owns the database from its first statement: what it reads into
/// its index stays true until it commits.
fn immediate() -> TransactionOptions {
    TransactionOptions {
        sqlite_transaction_mode: Some(SqliteTransactionMode::Immediate),
        ..TransactionOptions::default()
    }
}

/// Begins a batch's transaction. A batch that has sent nothing yet may try
/// once more on a fresh connection: one that broke while idle (a PostgreSQL
/// backend killed, a server restarted) costs a reconnect, not the batch.
async fn begin(connection: &mut Connection) -> Result<Begun, DbErr> {
    let (db, generation) = connection.get().await?;
    match db.begin_with_options(immediate()).await {
        Ok(txn) => Ok((txn, generation)),
        Err(error) => {
            tracing::warn!(%error, "a writer connection could not begin; reopening it");
            connection.discard(generation).await;
            let (db, generation) = connection.get().await?;
            Ok((db.begin_with_options(immediate()).await?, generation))
        }
    }
}

/// Runs the jobs of one batch in one transaction (`next`'s, if the last
/// batch began it) and reports its commit to each. Any failure fails every
/// job and discards the connection. On PostgreSQL, when more jobs are
/// waiting by the time it commits, the next batch's `BEGIN` goes out on the
/// writer's other connection while this `COMMIT` is in flight, into `next`:
/// one round trip fewer in the loop. The next batch's first statement still
/// follows this commit, so it sees every row and lock this batch released.
async fn write_batch(
    connection: &mut Connection,
    jobs: &mut Vec<Job>,
    queue: &mpsc::Receiver<Job>,
    next: &mut Option<Begun>,
    clock: &mut Clock<'_>,
) -> Result<(), DbErr> {
    let (txn, generation) = match next.take() {
        Some(begun) => begun,
        None => begin(connection).await?,
    };
    clock.lap(0);
    let postgres = txn.get_database_backend() == DbBackend::Postgres;
    let begin_next = connection
        .current(generation)
        .filter(|_| postgres)
        .map(|db| move || (!queue.is_empty()).then_some(db));
    let (completions, committed, begun) = run_jobs(txn, jobs, begin_next, clock).await;
    match &committed {
        Ok(()) => *next = begun.map(|txn| (txn, generation)),
        Err(error) => {
            drop(begun);
            connection.discard(generation).await;
            tracing::debug!(%error, "writer connection discarded after a failed batch");
        }
    }
    for complete in completions {
        complete(committed.as_ref().map(|_| ()));
    }
    committed
}

/// Commits `txn`; at the same time begins the next batch's transaction on
/// the connection `begin_next` gives, if it gives one. A failed `BEGIN`
/// leaves the next batch to begin as usual.
async fn commit(
    txn: DatabaseTransaction,
    begin_next: Option<impl FnOnce() -> Option<DatabaseConnection>>,
) -> (Result<(), DbErr>, Option<DatabaseTransaction>) {
    match begin_next.and_then(|ahead| ahead()) {
        None => (txn.commit().await, None),
        Some(db) => {
            let (committed, begun) = tokio::join!(txn.commit(), db.begin_with_options(immediate()));
            (committed, begun.ok())
        }
    }
}

/// Runs `jobs` in `txn` and commits unless anything failed that the
/// transaction may not have survived.
async fn run_jobs(
    txn: DatabaseTransaction,
    jobs: &mut Vec<Job>,
    begin_next: Option<impl FnOnce() -> Option<DatabaseConnection>>,
    clock: &mut Clock<'_>,
) -> (
    Vec<Completion>,
    Result<(), DbErr>,
    Option<DatabaseTransaction>,
) {
    let mut completions = Vec::with_capacity(jobs.len());
    let keys: Vec<Option<IndexKeys>> = jobs.iter().map(|job| job.keys().cloned()).collect();
    let mut state = Batch::default();
    let locks = lock_set(keys.iter().map(Option::as_ref));
    let first = keys.iter().map_while(Option::as_ref);
    if let Err(error) = own_writes(&txn, &locks, &mut state.index, first).await {
        return (completions, Err(error), None);
    }
    clock.lap(1);
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
            return (completions, Err(error), None);
        }
        completions.push(job.run(&txn, &mut state).await);
        if let Some(broken) = &state.broken {
            let error = DbErr::Custom(format!("a job's storage error broke the batch: {broken}"));
            return (completions, Err(error), None);
        }
    }
    clock.lap(2);
    match state.rows.flush(&txn).await {
        Ok(()) => {
            clock.lap(3);
            let (committed, begun) = commit(txn, begin_next).await;
            clock.lap(4);
            (completions, committed, begun)
        }
        Err(error) => (completions, Err(error), None),
    }
}
