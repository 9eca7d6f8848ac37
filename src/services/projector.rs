//! The projector: the deliveries read model (search, lists, the dashboard,
//! the case queue's origins) follows the journal after the commit instead of
//! being written before each 2xx. A task applies the journal from the read
//! model's checkpoint every `[engine] read_model_pace_ms`, in stretches of
//! at most `read_model_stretch_rows`, each applied with its checkpoint in one
//! transaction (`store::projector`), so that a crash resumes from the last
//! stretch applied.
//!
//! A reader that must see what was committed before it asked
//! (`caught_up`) applies the journal itself up to the head it read, for at
//! most the time it is given, and otherwise reports how far behind it read.
//! A delivery's own page reads the delivery from the journal; only the
//! deliveries it links to come from the read model.

use std::time::Duration;

use chrono::Utc;
use futures_util::future::BoxFuture;
use sea_orm::{DbBackend, DbErr};
use serde::Serialize;

use super::engine::{Engine, SharedEngine};
use crate::store::Tx;
use crate::store::projector::{self, Lag, Stretch};
use crate::store::writer::WriteJob;

/// Journal rows read and applied in one stretch at most.
const STRETCH: u64 = 5_000;
/// How long a page waits for the read model to hold what was committed
/// before it asked.
pub const READ_WAIT: Duration = Duration::from_secs(2);

/// How current a page read from the read model is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Freshness {
    /// Journal rows committed before the page was asked for that it does
    /// not show yet (0: it shows everything).
    pub behind: i64,
    /// How long ago the oldest of them was recorded, in milliseconds.
    pub lag_ms: Option<i64>,
    /// The journal row the read model stopped before, which this process
    /// cannot read (its reason is in the log): it stays behind until a
    /// binary that reads the row runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped_at: Option<i64>,
}

impl Freshness {
    /// What a page says when it is behind: `None` when it is not.
    pub fn note(&self) -> Option<String> {
        if self.behind <= 0 {
            return None;
        }
        let age = match self.lag_ms {
            Some(ms) if ms >= 1_000 => format!(" as of {:.1} s ago", ms as f64 / 1_000.0),
            Some(ms) => format!(" as of {ms} ms ago"),
            None => String::new(),
        };
        let stopped = match self.stopped_at {
            Some(position) => format!(
                " The read model stopped before journal row {position}, which this server \
                 cannot read: the log says why."
            ),
            None => String::new(),
        };
        Some(format!(
            "Deliveries are shown{age}: {} journal rows recorded since are not listed yet.{stopped}",
            self.behind
        ))
    }
}

impl From<Lag> for Freshness {
    fn from(lag: Lag) -> Self {
        Self {
            behind: lag.rows.max(0),
            lag_ms: lag
                .since
                .map(|since| (Utc::now() - since).num_milliseconds().max(0)),
            stopped_at: None,
        }
    }
}

/// How far behind the journal the read model is now, and where it stopped
/// if this process's projector cannot read on.
pub async fn freshness(engine: &Engine) -> Result<Freshness, DbErr> {
    let mut freshness = Freshness::from(projector::lag(&engine.db).await?);
    if freshness.behind > 0 {
        freshness.stopped_at = engine
            .projector
            .stopped
            .borrow()
            .as_ref()
            .map(|s| s.position);
    }
    Ok(freshness)
}

/// Runs rounds forever, one every `[engine] read_model_pace_ms` (at once
/// while a stretch left more to apply).
pub fn spawn(engine: SharedEngine) {
    let pace = pace(&engine);
    crate::tasks::supervise("projector", move || {
        let engine = engine.clone();
        async move {
            // An error is logged when it starts or changes, not every round.
            let mut failing: Option<String> = None;
            loop {
                match round(&engine).await {
                    Ok(Round::More) => {
                        failing = None;
                        continue;
                    }
                    Ok(_) => failing = None,
                    Err(error) => {
                        let text = error.to_string();
                        if failing.as_deref() != Some(text.as_str()) {
                            tracing::warn!(error = %text, "projector round failed; retrying");
                        }
                        failing = Some(text);
                    }
                }
                tokio::time::sleep(pace).await;
            }
        }
    });
}

/// What a round came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Round {
    /// The read model held everything up to the fence already.
    Idle,
    /// A stretch was applied (here or by another process) up to the fence.
    Applied,
    /// A stretch was applied and more remains before the fence.
    More,
}

/// Journal rows in one stretch at most (`[engine] read_model_stretch_rows`):
/// on SQLite a stretch is applied in a writer batch, whose deliveries wait
/// for it, so it stays small.
fn stretch_rows(engine: &Engine) -> u64 {
    let default = match engine.db.get_database_backend() {
        DbBackend::Postgres => STRETCH,
        _ => 300,
    };
    engine
        .config
        .read_model_stretch_rows
        .unwrap_or(default)
        .max(1)
}

/// The pause between two rounds of the task.
pub(super) fn pace(engine: &Engine) -> Duration {
    let default = match engine.db.get_database_backend() {
        DbBackend::Postgres => 100,
        // SQLite: every round's stretches run in writer batches and commit
        // there; rounds 250 ms apart (25 ms until 2026-12-06) let them come
        // in full stretches, fewer commits: measured 12 % more deliveries/s,
        // 5 % fewer bytes to disk, the same p99, lag p99 ~0.3 s.
        _ => 250,
    };
    Duration::from_millis(engine.config.read_model_pace_ms.unwrap_or(default).max(5))
}

/// Applies the next stretch of the journal, if any.
///
/// On SQLite, the database's one writer at a time, the stretch goes through
/// the writer like any write. On PostgreSQL it is applied in a transaction of
/// its own: through the writer it would be a keyless job, which owns every
/// key of every process while it runs; it needs none, its compare-and-set on
/// the checkpoint being all that orders two projectors.
pub async fn round(engine: &Engine) -> Result<Round, DbErr> {
    let _turn = engine.projector.turn.lock().await;
    let fence = projector::fence(&engine.db).await?;
    let from = projector::checkpoint(&engine.db, projector::DELIVERIES).await?;
    if from >= fence {
        engine.projector.position.send_replace(from);
        return Ok(Round::Idle);
    }
    let stretch = match Stretch::read(&engine.db, from, fence, stretch_rows(engine)).await {
        Ok(stretch) => stretch,
        Err(error) => {
            let Some(stopped) = projector::Stopped::of(&error) else {
                return Err(DbErr::Custom(error.to_string()));
            };
            let text = stopped.to_string();
            engine.projector.stopped.send_replace(Some(stopped));
            return Err(DbErr::Custom(text));
        }
    };
    engine.projector.stopped.send_replace(None);
    let to = stretch.to();
    let applied = match engine.db.get_database_backend() {
        DbBackend::Postgres => stretch.apply(&engine.db).await?,
        _ => engine.writer.submit(Apply(stretch)).await?,
    };
    let position = if applied {
        to
    } else {
        // Another process's projector applied it.
        projector::checkpoint(&engine.db, projector::DELIVERIES).await?
    };
    engine.projector.position.send_replace(position);
    Ok(if position < fence {
        Round::More
    } else {
        Round::Applied
    })
}

/// A stretch applied with its checkpoint as a writer job.
struct Apply(Stretch);

impl WriteJob for Apply {
    type Output = bool;

    fn run<'a>(self, tx: &'a mut Tx<'_>) -> BoxFuture<'a, Result<bool, DbErr>> {
        Box::pin(self.0.apply_on(tx.connection()))
    }
}

/// Waits, at most `within`, until the read model holds every journal row
/// committed before the call, applying the journal itself: how far behind
/// it still is when the time ran out (nothing behind: the default).
pub async fn caught_up(engine: &Engine, within: Duration) -> Result<Freshness, DbErr> {
    let head = projector::head(&engine.db).await?;
    let at = projector::checkpoint(&engine.db, projector::DELIVERIES).await?;
    engine.projector.position.send_replace(at);
    if at >= head {
        return Ok(Freshness::default());
    }
    // A round that fails (on PostgreSQL, a fence that waited its 100 ms
    // for a long append) is tried again while time is left.
    // A journal row this process cannot read stops the wait at once: no
    // round will get past it.
    let reached = tokio::time::timeout(within, async {
        while *engine.projector.position.borrow() < head {
            if let Err(error) = round(engine).await {
                if engine.projector.stopped.borrow().is_some() {
                    return false;
                }
                tracing::debug!(%error, "a read model round failed; trying again");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        true
    })
    .await;
    match reached {
        Ok(true) => Ok(Freshness::default()),
        Ok(false) => freshness(engine).await,
        Err(_) => {
            tracing::warn!(head, "the deliveries read model could not catch up in time");
            freshness(engine).await
        }
    }
}

/// `caught_up` within `READ_WAIT`, for a page about to read the read model:
/// a storage error is left for the page's own read to meet and report.
pub async fn before_reading(engine: &Engine) -> Freshness {
    caught_up(engine, READ_WAIT).await.unwrap_or_default()
}
