//! A job's two forms: `WriteJob`, what callers write, and `Queued`, the job
//! waiting in a writer's queue, run against its batch (`Batch`). A job given
//! an index writes nothing itself, so its refusal leaves the transaction as it
//! was; any other job runs in a savepoint and leaves nothing behind if it fails.
//! A storage error a job meets breaks its batch: nothing of it commits.

use futures_util::future::BoxFuture;
use sea_orm::{ConnectionTrait, DatabaseTransaction, DbErr};
use tokio::sync::oneshot;

use super::connection::is_storage_error;
use crate::store::deferred::Deferred;
use crate::store::key_index::{IndexKeys, KeyIndex};
use crate::store::tx::Tx;

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

    /// Whether, committed alone (`group_commit = false`), the job must own
    /// every key while it runs (PostgreSQL): a job that counts what exists
    /// under a key before it writes on the count (a case's resolution, the
    /// second uncited distinct effect it refuses), or takes a key after
    /// reading what a resolution writes (a re-decision: whether the key's
    /// operation was made by hand). Under group commit a batch with a
    /// keyless job owns every key anyway.
    fn owns_every_key(&self) -> bool {
        false
    }

    /// The work. An error rolls back this job's writes only.
    fn run<'a>(self, tx: &'a mut Tx<'_>) -> BoxFuture<'a, Result<Self::Output, DbErr>>;
}

/// Reports the batch's commit to one job's caller.
pub(super) type Completion = Box<dyn FnOnce(Result<(), &DbErr>) + Send>;

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

pub(super) struct Pending<J: WriteJob> {
    pub(super) job: J,
    pub(super) keys: Option<IndexKeys>,
    pub(super) reply: oneshot::Sender<Result<J::Output, DbErr>>,
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
    pub(super) rows: Deferred,
    pub(super) index: KeyIndex,
    /// A storage error a job met that its transaction may not have survived:
    /// the batch must not commit.
    pub(super) broken: Option<String>,
}

impl Batch {
    fn break_on(&mut self, error: &DbErr) {
        if self.broken.is_none() {
            self.broken = Some(error.to_string());
        }
    }
}

/// A job in a writer's queue.
pub(super) type Job = Box<dyn Queued>;

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
