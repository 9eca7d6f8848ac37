//! The writer's batches as callers see them: rows deferred in a batch are
//! visible to the jobs after them, a failed job leaves nothing behind, and
//! one that panics fails its batch without stopping the writer.

use std::marker::PhantomData;

use chrono::Utc;
use sea_orm::{ConnectionTrait, DbBackend, Statement};

use super::*;
use crate::domain::delivery::BodyRef;
use crate::store::Tx;
use crate::store::key_index::IndexKeys;

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

#[tokio::test]
async fn a_job_that_reads_sees_the_rows_deferred_before_it_in_its_batch() {
    let (dir, db) = crate::store::test_database().await;
    let writer = Writer::start_on_threads(
        &crate::store::test_url(&dir),
        1,
        BatchRecording::noop(),
        Durability::Full,
    )
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
    let writer = Writer::start_on_threads(
        &crate::store::test_url(&dir),
        1,
        BatchRecording::noop(),
        Durability::Full,
    )
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
    let writer = Writer::start_on_threads(
        &crate::store::test_url(&dir),
        1,
        BatchRecording::noop(),
        Durability::Full,
    )
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

impl Writer {
    /// Submits a one-off job written as a closure, without keys: the
    /// writer's own tests use it; services name their jobs.
    async fn run<T, F>(&self, work: F) -> Result<T, DbErr>
    where
        T: Send + 'static,
        F: for<'a, 't> FnOnce(&'a mut Tx<'t>) -> BoxFuture<'a, Result<T, DbErr>> + Send + 'static,
    {
        self.submit(Adhoc(work, PhantomData)).await
    }
}
