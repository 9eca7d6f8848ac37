//! The dashboard's figures: what Unicity decided in the last 24 hours (per
//! hour and decision, per decision and reason, key strengths per strategy),
//! how old the open cases are, and each strategy's collision rate against
//! its breaker's threshold, with the breakers tripped now. Counts are
//! grouped by the database over bounded windows (`store::dashboard`).

use chrono::{DateTime, Duration, Utc};
use sea_orm::DbErr;

use super::breakers;
use super::engine::SharedEngine;
pub use crate::store::dashboard::HourCount;

/// The window of the delivery charts.
pub const WINDOW_HOURS: i64 = 24;

/// The age buckets of open cases: (label, lower bound in seconds).
pub const AGE_BUCKETS: [(&str, i64); 4] = [
    ("under 1 hour", 0),
    ("1 to 24 hours", 3_600),
    ("1 to 7 days", 86_400),
    ("over 7 days", 7 * 86_400),
];

/// A strategy's collision rate over the breaker window.
#[derive(Debug, Clone)]
pub struct CollisionRate {
    pub strategy: String,
    pub deliveries: i64,
    pub collisions: i64,
    pub tripped: bool,
}

impl CollisionRate {
    pub fn rate(&self) -> f64 {
        if self.deliveries == 0 {
            0.0
        } else {
            self.collisions as f64 / self.deliveries as f64
        }
    }
}

/// A tripped breaker.
#[derive(Debug, Clone)]
pub struct Tripped {
    pub strategy: String,
    pub deliveries: i64,
    pub collisions: i64,
    pub tripped_at: DateTime<Utc>,
}

/// Deliveries of one kind: a decision and its reason, or a strategy and a
/// key strength.
#[derive(Debug, Clone, PartialEq)]
pub struct PairCount {
    pub first: String,
    pub second: String,
    pub deliveries: i64,
}

/// The counts of `hours` summed per `(first, second)` of each.
fn pairs(
    hours: &[HourCount],
    pair: impl Fn(&HourCount) -> Option<(String, String)>,
) -> Vec<PairCount> {
    let mut sums: std::collections::BTreeMap<(String, String), i64> = Default::default();
    for h in hours {
        if let Some(key) = pair(h) {
            *sums.entry(key).or_default() += h.deliveries;
        }
    }
    sums.into_iter()
        .map(|((first, second), deliveries)| PairCount {
            first,
            second,
            deliveries,
        })
        .collect()
}

/// The source text's headline figure for one strategy (`none`: deliveries
/// without a key): of the window's deliveries, those decided on a strong key
/// or on a business result that exists.
#[derive(Debug, Clone, PartialEq)]
pub struct Headline {
    pub strategy: String,
    pub sure: i64,
    pub deliveries: i64,
}

impl Headline {
    pub fn share(&self) -> f64 {
        if self.deliveries == 0 {
            0.0
        } else {
            self.sure as f64 / self.deliveries as f64
        }
    }
}

/// Reasons that mean the decision matched a business result that exists.
const EXISTING_RESULT: [crate::domain::decision::Reason; 2] = [
    crate::domain::decision::Reason::DuplicateOfApplied,
    crate::domain::decision::Reason::LateReplayFoundEffect,
];

/// The headline figure of `hours`, per strategy, by name.
pub fn headline(hours: &[HourCount]) -> Vec<Headline> {
    let mut shares: std::collections::BTreeMap<String, (i64, i64)> = Default::default();
    for h in hours {
        let strategy = h.strategy.clone().unwrap_or_else(|| "none".to_owned());
        let share = shares.entry(strategy).or_default();
        let sure = h.strength == crate::domain::confidence::Strength::Strong.as_str()
            || EXISTING_RESULT.iter().any(|r| r.as_str() == h.reason);
        if sure {
            share.0 += h.deliveries;
        }
        share.1 += h.deliveries;
    }
    shares
        .into_iter()
        .map(|(strategy, (sure, deliveries))| Headline {
            strategy,
            sure,
            deliveries,
        })
        .collect()
}

pub struct Dashboard {
    pub now: DateTime<Utc>,
    /// Start of the delivery charts' window (the hour `WINDOW_HOURS` ago).
    pub since: DateTime<Utc>,
    /// Per hour, decision, reason, strategy and strength.
    pub per_hour: Vec<HourCount>,
    /// (decision, reason, deliveries).
    pub per_reason: Vec<PairCount>,
    /// (strategy, strength, deliveries).
    pub per_strength: Vec<PairCount>,
    /// The headline figure per strategy.
    pub headline: Vec<Headline>,
    /// Open cases per `AGE_BUCKETS` entry.
    pub open_by_age: Vec<i64>,
    pub collisions: Vec<CollisionRate>,
    pub threshold: f64,
    pub breaker_window_secs: u64,
    pub tripped: Vec<Tripped>,
    /// How current the delivery figures are (they follow the journal).
    pub freshness: super::projector::Freshness,
}

pub async fn dashboard(engine: &SharedEngine, now: DateTime<Utc>) -> Result<Dashboard, DbErr> {
    let freshness = super::projector::before_reading(engine).await;
    let db = &engine.db;
    let seconds = now.timestamp();
    let hour = DateTime::from_timestamp(seconds - seconds.rem_euclid(3_600), 0).unwrap_or(now);
    let since = hour - Duration::hours(WINDOW_HOURS - 1);
    let bounds: Vec<DateTime<Utc>> = AGE_BUCKETS[1..]
        .iter()
        .map(|(_, secs)| now - Duration::seconds(*secs))
        .collect();
    let older = crate::store::dashboard::open_cases_older_than(db, &bounds).await?;
    // Cases in each bucket: those older than its bound, less the next one's.
    let open_by_age = (0..AGE_BUCKETS.len())
        .map(|i| older[i] - older.get(i + 1).copied().unwrap_or(0))
        .collect();
    let window = i64::try_from(engine.config.breaker_window_secs).unwrap_or(i64::MAX / 1000);
    let tripped: Vec<Tripped> = breakers::tripped(db)
        .await?
        .into_iter()
        .map(|b| Tripped {
            strategy: b.strategy,
            deliveries: b.deliveries,
            collisions: b.collisions,
            tripped_at: b.tripped_at,
        })
        .collect();
    let collisions = crate::store::dashboard::collisions(db, now - Duration::seconds(window))
        .await?
        .into_iter()
        .map(|c| CollisionRate {
            tripped: tripped.iter().any(|t| t.strategy == c.strategy),
            strategy: c.strategy,
            deliveries: c.deliveries,
            collisions: c.collisions,
        })
        .collect();
    let per_hour = crate::store::dashboard::per_hour(db, since).await?;
    Ok(Dashboard {
        now,
        since,
        per_reason: pairs(&per_hour, |h| Some((h.decision.clone(), h.reason.clone()))),
        per_strength: pairs(&per_hour, |h| {
            Some((h.strategy.clone()?, h.strength.clone()))
        }),
        headline: headline(&per_hour),
        per_hour,
        open_by_age,
        collisions,
        threshold: engine.config.breaker_threshold,
        breaker_window_secs: engine.config.breaker_window_secs,
        tripped,
        freshness,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hour(strategy: Option<&str>, strength: &str, reason: &str, n: i64) -> HourCount {
        HourCount {
            hour: Utc::now(),
            decision: "ignore".to_owned(),
            reason: reason.to_owned(),
            strategy: strategy.map(str::to_owned),
            strength: strength.to_owned(),
            deliveries: n,
        }
    }

    #[test]
    fn the_headline_counts_strong_keys_and_existing_results_over_all_deliveries() {
        let hours = [
            hour(Some("refund@1"), "weak", "new_key", 6),
            hour(Some("refund@1"), "weak", "duplicate_of_applied", 3),
            hour(Some("refund@1"), "weak", "late_replay_found_effect", 1),
            hour(Some("evt@1"), "strong", "new_key", 5),
            hour(None, "none", "no_strategy", 2),
        ];
        let figures: Vec<(String, i64, i64)> = headline(&hours)
            .into_iter()
            .map(|h| (h.strategy, h.sure, h.deliveries))
            .collect();
        assert_eq!(
            figures,
            [
                ("evt@1".to_owned(), 5, 5),
                ("none".to_owned(), 0, 2),
                ("refund@1".to_owned(), 4, 10),
            ]
        );
    }
}
