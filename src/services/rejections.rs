//! Refused requests, counted per source and window so that a flood costs the
//! append-only journal a bounded number of rows.
//!
//! Each source may have `rejections_journaled_per_window` rejections journaled
//! one by one (`DeliveryRejected`) per window; the rest, and every request a
//! rate limit refused, are counted in memory per reason and answer and
//! journaled as one `RejectionsAggregated` each when the window closes.
//! Invariant: a refused request is in exactly one of the two, never in neither
//! while the process runs — an aggregate that cannot be journaled is put back
//! and retried; at shutdown the open windows are flushed (best effort: a crash
//! loses the counts of the open window, never a delivery).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;
use sea_orm::DbErr;

use super::rate_limits::RateLimits;
use crate::config::EngineConfig;
use crate::domain::journal::{JournalEvent, Origin, RejectionsAggregated};
use crate::store::Tx;
use crate::store::writer::{WriteJob, Writer};

/// What the flusher needs of the engine that holds it: the counts and the
/// writer that journals them.
pub trait Holder: Send + Sync + 'static {
    fn rejections(&self) -> &Rejections;
    fn writer(&self) -> &Writer;
}

/// How often closed windows are looked for.
const FLUSH_TICK: Duration = Duration::from_millis(500);
/// How often idle clients are dropped from the rate limiters (in ticks).
const FORGET_EVERY: u32 = 120;

/// The rate limits and the rejection counts of one process.
pub struct Rejections {
    pub limits: RateLimits,
    pub tally: Tally,
}

impl Rejections {
    pub fn new(config: &EngineConfig) -> Self {
        Self {
            limits: RateLimits::new(config),
            tally: Tally::new(
                config.rejection_window_secs,
                config.rejections_journaled_per_window,
            ),
        }
    }
}

/// Whether one refusal is journaled on its own or only counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Note {
    Journal,
    Counted,
}

/// One refusal as counted: its code, answer and bytes received.
#[derive(Debug, Clone, Copy)]
pub struct Counted<'a> {
    pub reason: &'a str,
    pub status: u16,
    pub bytes: u64,
}

/// Counts per source and window, in memory.
pub struct Tally {
    window_secs: u64,
    journaled_per_window: u32,
    windows: Mutex<HashMap<(String, i64), Window>>,
}

struct Window {
    origin: Origin,
    journaled: u32,
    /// (reason, status) → (count, bytes)
    counts: BTreeMap<(String, u16), (u64, u64)>,
}

impl Tally {
    pub fn new(window_secs: u64, journaled_per_window: u32) -> Self {
        Self {
            window_secs: window_secs.max(1),
            journaled_per_window,
            windows: Mutex::new(HashMap::new()),
        }
    }

    fn index(&self, at: DateTime<Utc>) -> i64 {
        at.timestamp().div_euclid(self.window_secs as i64)
    }

    /// A refusal that may be journaled: it is while the source's quota for the
    /// window lasts, else it is counted.
    pub fn note(&self, origin: &Origin, at: DateTime<Utc>, refusal: Counted<'_>) -> Note {
        self.with_window(origin, at, |window, quota| {
            if window.journaled < quota {
                window.journaled += 1;
                Note::Journal
            } else {
                add(window, refusal.reason, refusal.status, 1, refusal.bytes);
                Note::Counted
            }
        })
    }

    /// Counts a refusal that is never journaled on its own.
    pub fn count(&self, origin: &Origin, at: DateTime<Utc>, refusal: Counted<'_>) {
        self.with_window(origin, at, |window, _| {
            add(window, refusal.reason, refusal.status, 1, refusal.bytes)
        });
    }

    fn with_window<T>(
        &self,
        origin: &Origin,
        at: DateTime<Utc>,
        f: impl FnOnce(&mut Window, u32) -> T,
    ) -> T {
        let key = (origin.source.clone(), self.index(at));
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        let window = windows.entry(key).or_insert_with(|| Window {
            origin: origin.clone(),
            journaled: 0,
            counts: BTreeMap::new(),
        });
        f(window, self.journaled_per_window)
    }

    /// Removes and returns the counts of every window closed at `now` (of
    /// every window, open ones too, with `all`).
    pub fn take_closed(&self, now: DateTime<Utc>, all: bool) -> Vec<RejectionsAggregated> {
        let current = self.index(now);
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        let closed: Vec<_> = windows
            .keys()
            .filter(|(_, index)| all || *index < current)
            .cloned()
            .collect();
        let mut events = Vec::new();
        for key in closed {
            let Some(window) = windows.remove(&key) else {
                continue;
            };
            let start = DateTime::from_timestamp(key.1 * self.window_secs as i64, 0);
            for ((reason, status), (count, bytes)) in window.counts {
                events.push(RejectionsAggregated {
                    origin: window.origin.clone(),
                    window_start: start.unwrap_or_default(),
                    window_secs: self.window_secs,
                    reason,
                    status,
                    count,
                    bytes,
                });
            }
        }
        events
    }

    /// Puts back counts that could not be journaled; the next flush retries.
    pub fn restore(&self, events: Vec<RejectionsAggregated>) {
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        for e in events {
            let key = (e.origin.source.clone(), self.index(e.window_start));
            let window = windows.entry(key).or_insert_with(|| Window {
                origin: e.origin.clone(),
                journaled: 0,
                counts: BTreeMap::new(),
            });
            add(window, &e.reason, e.status, e.count, e.bytes);
        }
    }
}

fn add(window: &mut Window, reason: &str, status: u16, count: u64, bytes: u64) {
    let entry = window
        .counts
        .entry((reason.to_owned(), status))
        .or_default();
    entry.0 += count;
    entry.1 = entry.1.saturating_add(bytes);
}

/// Journals the counts of closed windows (all windows with `all`); returns
/// how many aggregates were journaled. On failure the counts are kept.
pub async fn flush(engine: &impl Holder, all: bool) -> usize {
    let events = engine.rejections().tally.take_closed(Utc::now(), all);
    if events.is_empty() {
        return 0;
    }
    let written = engine.writer().submit(RecordCounts(events.clone())).await;
    match written {
        Ok(()) => events.len(),
        Err(error) => {
            tracing::warn!(%error, "rejection counts not journaled; retrying at the next tick");
            engine.rejections().tally.restore(events);
            0
        }
    }
}

/// Closed windows' counts, journaled as a writer job.
struct RecordCounts(Vec<RejectionsAggregated>);

impl WriteJob for RecordCounts {
    type Output = ();

    fn run<'a>(self, tx: &'a mut Tx<'_>) -> BoxFuture<'a, Result<(), DbErr>> {
        Box::pin(async move {
            let at = Utc::now();
            for event in self.0 {
                tx.record(None, JournalEvent::RejectionsAggregated(event), at)
                    .await?;
            }
            Ok(())
        })
    }
}

/// Flushes closed windows as they close, and forgets idle rate-limit state.
/// Supervised: a dead flusher would leave refusals counted and never
/// journaled.
pub fn spawn(engine: std::sync::Arc<impl Holder>) {
    crate::tasks::supervise("rejections", move || {
        let engine = engine.clone();
        async move {
            let mut ticks = 0u32;
            loop {
                tokio::time::sleep(FLUSH_TICK).await;
                flush(engine.as_ref(), false).await;
                ticks = ticks.wrapping_add(1);
                if ticks.is_multiple_of(FORGET_EVERY) {
                    engine.rejections().limits.forget_idle();
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin(source: &str) -> Origin {
        Origin {
            source: source.into(),
            tenant: "t".into(),
            provider: "p".into(),
            environment: "test".into(),
        }
    }

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + secs, 0).unwrap_or_default()
    }

    const BAD: Counted<'static> = Counted {
        reason: "invalid_signature",
        status: 401,
        bytes: 10,
    };

    #[test]
    fn past_the_quota_every_refusal_is_counted_and_none_is_lost() {
        let tally = Tally::new(60, 5);
        let notes: Vec<_> = (0..1000)
            .map(|i| tally.note(&origin("a"), at(i % 60), BAD))
            .collect();
        assert_eq!(notes.iter().filter(|n| **n == Note::Journal).count(), 5);
        tally.count(
            &origin("a"),
            at(1),
            Counted {
                reason: "rate_limited",
                status: 429,
                bytes: 0,
            },
        );
        assert!(tally.take_closed(at(59), false).is_empty(), "window open");
        let events = tally.take_closed(at(60), false);
        let counts: Vec<_> = events
            .iter()
            .map(|e| (e.reason.as_str(), e.status, e.count, e.bytes))
            .collect();
        assert_eq!(
            counts,
            [
                ("invalid_signature", 401, 995, 9950),
                ("rate_limited", 429, 1, 0)
            ]
        );
        assert_eq!(events[0].window_start, at(0));
        assert!(tally.take_closed(at(120), true).is_empty());
    }

    #[test]
    fn each_source_and_window_has_its_own_quota_and_restored_counts_are_retried() {
        let tally = Tally::new(60, 1);
        assert_eq!(tally.note(&origin("a"), at(0), BAD), Note::Journal);
        assert_eq!(tally.note(&origin("b"), at(0), BAD), Note::Journal);
        assert_eq!(tally.note(&origin("a"), at(70), BAD), Note::Journal);
        assert_eq!(tally.note(&origin("a"), at(1), BAD), Note::Counted);
        let events = tally.take_closed(at(200), true);
        assert_eq!(events.len(), 1);
        tally.restore(events);
        let again = tally.take_closed(at(200), false);
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].count, 1);
    }
}
