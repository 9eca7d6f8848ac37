//! `/metrics`: what the engine counted (`crate::metrics`), then gauges read
//! from the projections at scrape time — open cases by reason and age, how
//! cases were settled and by whom, each strategy's breaker and collision
//! rate, the share of the last 24 hours' deliveries decided on a strong key
//! or an existing result (the headline figure), and how each delivery of
//! those 24 hours accounts for an effect, whose undocumented rest must be 0.
//! A scrape costs a few grouped reads over bounded windows (see
//! `store::dashboard`).

use chrono::{DateTime, Duration, Utc};
use sea_orm::DbErr;

use super::dashboard::{self, AGE_BUCKETS};
use super::engine::SharedEngine;
use crate::domain::confidence::Criticality;
use crate::metrics::Gauges;
use crate::store;

/// Age labels of open cases, oldest first (the buckets of
/// `dashboard::AGE_BUCKETS`, read the other way round).
const AGES: [&str; 4] = ["over_7d", "1d_to_7d", "1h_to_24h", "under_1h"];

/// Everything `/metrics` shows, in the text exposition format.
pub async fn scrape(engine: &SharedEngine, now: DateTime<Utc>) -> Result<String, DbErr> {
    let gauges = Gauges::new();
    cases(engine, &gauges, now).await?;
    let board = dashboard::dashboard(engine, now).await?;
    breakers(&gauges, &board);
    headline(&gauges, &board);
    accounting(engine, &gauges, now).await?;
    read_model(engine, &gauges).await?;
    Ok(format!("{}{}", engine.metrics.render(), gauges.render()))
}

/// How far the deliveries read model is behind the journal.
async fn read_model(engine: &SharedEngine, gauges: &Gauges) -> Result<(), DbErr> {
    gauges.describe(
        "unicity_read_model_behind_rows",
        "Journal rows the deliveries read model (search, lists, dashboard) does not hold yet.",
    );
    gauges.describe(
        "unicity_read_model_lag_seconds",
        "Age of the oldest journal row the deliveries read model does not hold yet (0 when none).",
    );
    let freshness = super::projector::freshness(engine).await?;
    gauges.set(
        "unicity_read_model_behind_rows",
        &[],
        freshness.behind as f64,
    );
    gauges.set(
        "unicity_read_model_lag_seconds",
        &[],
        freshness.lag_ms.unwrap_or(0) as f64 / 1_000.0,
    );
    Ok(())
}

async fn cases(engine: &SharedEngine, gauges: &Gauges, now: DateTime<Utc>) -> Result<(), DbErr> {
    gauges.describe(
        "unicity_open_cases",
        "Open cases by reason, age (over_7d, 1d_to_7d, 1h_to_24h, under_1h) and whether their effect is critical (money).",
    );
    gauges.describe(
        "unicity_settled_cases",
        "Cases settled, by reason, resolution and who settled them (person, look-up, or the effect's late settlement).",
    );
    // Oldest bound first: `dashboard::AGE_BUCKETS` from the top.
    let bounds: Vec<DateTime<Utc>> = AGE_BUCKETS[1..]
        .iter()
        .rev()
        .map(|(_, secs)| now - Duration::seconds(*secs))
        .collect();
    // Summed over strategies: a strategy only says whether a case is critical.
    let mut open: std::collections::BTreeMap<(String, &str, &str), f64> = Default::default();
    let mut settled: std::collections::BTreeMap<(String, String, String), f64> = Default::default();
    for row in store::dashboard::cases_by_state(&engine.db, &bounds).await? {
        let count = row.cases as f64;
        match usize::try_from(row.age).ok().and_then(|i| AGES.get(i)) {
            Some(age) => {
                let critical = match engine.catalog.keyed(&format!("{}:", row.strategy)) {
                    Some(def) => match def.criticality {
                        Criticality::Critical => "true",
                        Criticality::Reversible => "false",
                    },
                    None => "unknown",
                };
                *open.entry((row.reason, age, critical)).or_default() += count;
            }
            None => {
                *settled
                    .entry((row.reason, row.resolution, row.settled_by))
                    .or_default() += count;
            }
        }
    }
    for ((reason, age, critical), count) in &open {
        gauges.set(
            "unicity_open_cases",
            &[("reason", reason), ("age", age), ("critical", critical)],
            *count,
        );
    }
    for ((reason, resolution, by), count) in &settled {
        gauges.set(
            "unicity_settled_cases",
            &[("reason", reason), ("resolution", resolution), ("by", by)],
            *count,
        );
    }
    Ok(())
}

fn breakers(gauges: &Gauges, board: &dashboard::Dashboard) {
    gauges.describe(
        "unicity_collision_rate",
        "Each strategy's share of deliveries whose key matched with differing discriminants, over the breaker's window.",
    );
    gauges.describe(
        "unicity_breaker_window_deliveries",
        "Each strategy's deliveries over the breaker's window (the rate is judged from 200 on).",
    );
    gauges.describe(
        "unicity_breaker_tripped",
        "1 while a strategy's collision breaker holds its would-be duplicates for a person.",
    );
    gauges.describe(
        "unicity_breaker_threshold",
        "The collision rate at which a breaker trips.",
    );
    gauges.set("unicity_breaker_threshold", &[], board.threshold);
    for rate in &board.collisions {
        let strategy = [("strategy", rate.strategy.as_str())];
        gauges.set("unicity_collision_rate", &strategy, rate.rate());
        gauges.set(
            "unicity_breaker_window_deliveries",
            &strategy,
            rate.deliveries as f64,
        );
    }
    // Every strategy with deliveries in the window, tripped or not (0), and
    // any tripped one.
    for rate in &board.collisions {
        let tripped = board.tripped.iter().any(|t| t.strategy == rate.strategy);
        gauges.set(
            "unicity_breaker_tripped",
            &[("strategy", rate.strategy.as_str())],
            if tripped { 1.0 } else { 0.0 },
        );
    }
    for tripped in &board.tripped {
        gauges.set(
            "unicity_breaker_tripped",
            &[("strategy", tripped.strategy.as_str())],
            1.0,
        );
    }
}

/// The source's headline figure, per strategy: the share of the last 24
/// hours' deliveries decided on a strong key or on a result that exists.
fn headline(gauges: &Gauges, board: &dashboard::Dashboard) {
    gauges.describe(
        "unicity_strong_or_existing_ratio",
        "Share of the last 24 hours' deliveries decided on a strong key or an existing business result, per strategy (none: no key).",
    );
    gauges.describe(
        "unicity_deliveries_24h",
        "Deliveries received in the last 24 hours, per strategy (none: no key).",
    );
    for line in &board.headline {
        let labels = [("strategy", line.strategy.as_str())];
        gauges.set("unicity_deliveries_24h", &labels, line.deliveries as f64);
        if line.deliveries > 0 {
            gauges.set("unicity_strong_or_existing_ratio", &labels, line.share());
        }
    }
}

async fn accounting(
    engine: &SharedEngine,
    gauges: &Gauges,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    gauges.describe(
        "unicity_deliveries_accounted_24h",
        "The last 24 hours' deliveries per strategy by what accounts for their effect: effect, duplicate, held (a case or a wait), undocumented (must be 0).",
    );
    let since = now - Duration::hours(dashboard::WINDOW_HOURS);
    let rows = store::dashboard::accounted(&engine.db, since).await?;
    let mut strategies: Vec<&str> = rows.iter().map(|r| r.strategy.as_str()).collect();
    strategies.sort_unstable();
    strategies.dedup();
    // The undocumented rest is always shown, 0 included: an alert compares it.
    for strategy in strategies {
        gauges.set(
            "unicity_deliveries_accounted_24h",
            &[("strategy", strategy), ("accounted", "undocumented")],
            0.0,
        );
    }
    for row in &rows {
        gauges.set(
            "unicity_deliveries_accounted_24h",
            &[("strategy", &row.strategy), ("accounted", &row.accounted)],
            row.deliveries as f64,
        );
    }
    Ok(())
}
