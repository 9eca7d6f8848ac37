//! The projector: the deliveries read model (search, lists, the dashboard,
//! the case queue's origins) follows the journal after the commit instead of
//! being written before each 2xx. A task applies the journal from the read
//! model's checkpoint every `read_model_pace_ms`, in stretches of up to `STRETCH` rows, each
//! applied with its checkpoint in one writer transaction (`store::projector`),
//! so that a crash resumes from the last stretch applied.
//!
//! A reader that must see what was committed before it asked
//! (`caught_up`) applies the journal itself up to the head it read, for at
//! most the time it is given, and otherwise reports how far behind it read.
//! A delivery's own page reads the journal and never waits.

use std::time::Duration;

use chrono::Utc;
use sea_orm::DbErr;
use serde::Serialize;
use tokio::sync::{Mutex, watch};

use super::engine::{Engine, SharedEngine};
use crate::store::projector::{self, Lag, Stretch};

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
        Some(format!(
            "Deliveries are shown{age}: {} journal rows recorded since are not listed yet.",
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
        }
    }
}

/// This process's projector: one round at a time, and the checkpoint it last
/// saw, for readers waiting on it.
#[derive(Debug)]
pub struct Projector {
    turn: Mutex<()>,
    position: watch::Sender<i64>,
}

impl Default for Projector {
    fn default() -> Self {
        Self {
            turn: Mutex::new(()),
            position: watch::channel(0).0,
        }
    }
}

/// Runs rounds forever, one every `[engine] read_model_pace_ms` (at once
/// after a full stretch).
pub fn spawn(engine: SharedEngine) {
    let pace = Duration::from_millis(engine.config.read_model_pace_ms.max(10));
    crate::tasks::supervise("projector", move || {
        let engine = engine.clone();
        async move {
            loop {
                match round(&engine).await {
                    Ok(events) if events >= STRETCH as usize => continue,
                    Ok(_) => {}
                    Err(error) => {
                        tracing::warn!(%error, "projector round failed; retrying");
                    }
                }
                tokio::time::sleep(pace).await;
            }
        }
    });
}

/// Applies the next stretch of the journal, if any: the events it applied.
pub async fn round(engine: &Engine) -> Result<usize, DbErr> {
    let _turn = engine.projector.turn.lock().await;
    let fence = projector::fence(&engine.db).await?;
    let from = projector::checkpoint(&engine.db, projector::DELIVERIES).await?;
    if from >= fence {
        engine.projector.position.send_replace(from);
        return Ok(0);
    }
    let stretch = Stretch::read(&engine.db, from, fence, STRETCH)
        .await
        .map_err(|e| DbErr::Custom(e.to_string()))?;
    let (to, events) = (stretch.to(), stretch.events());
    let position = if engine.writer.submit(stretch).await? {
        to
    } else {
        // Another process's projector applied it.
        projector::checkpoint(&engine.db, projector::DELIVERIES).await?
    };
    engine.projector.position.send_replace(position);
    Ok(events.max(1))
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
    let reached = tokio::time::timeout(within, async {
        while *engine.projector.position.borrow() < head {
            round(engine).await?;
        }
        Ok::<(), DbErr>(())
    })
    .await;
    if let Ok(Err(error)) = &reached {
        tracing::warn!(%error, "the deliveries read model could not catch up");
    }
    match reached {
        Ok(Ok(())) => Ok(Freshness::default()),
        _ => Ok(projector::lag(&engine.db).await?.into()),
    }
}

/// `caught_up` within `READ_WAIT`, for a page about to read the read model:
/// a storage error is left for the page's own read to meet and report.
pub async fn before_reading(engine: &Engine) -> Freshness {
    caught_up(engine, READ_WAIT).await.unwrap_or_default()
}
