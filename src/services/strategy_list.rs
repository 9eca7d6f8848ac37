//! The strategies list (`unicity strategies list`, the engineers' page):
//! every strategy version of the catalog with what it keyed — deliveries,
//! first and last use, keys alive, effects, open cases — and why its
//! collision breaker is or is not tripped.

use chrono::Utc;
use sea_orm::DatabaseConnection;

use crate::config::EngineConfig;
use crate::domain::identity::Catalog;

/// One strategy version as the engineers' list shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StrategyLine {
    /// `name@version`.
    pub strategy: String,
    pub fingerprint: String,
    pub provider: String,
    pub effect_type: String,
    pub strength: &'static str,
    pub critical: bool,
    pub retired: bool,
    /// The version its name keys new deliveries with.
    pub current: bool,
    pub deliveries: i64,
    pub first_used: Option<chrono::DateTime<Utc>>,
    pub last_used: Option<chrono::DateTime<Utc>>,
    /// Keys in the fast index whose horizon has not passed.
    pub keys_alive: i64,
    pub effects: i64,
    pub open_cases: i64,
    pub tripped: bool,
    /// Why the breaker is, or is not, tripped, in a sentence.
    pub breaker: String,
}

/// Every strategy version of `catalog`, with what it keyed in `db` and its
/// breaker's state as the database holds it: a few grouped reads
/// (`store::strategy_usage`). Reads only: a version the catalog has and the
/// database never saw is listed, never recorded.
pub async fn list(
    db: &DatabaseConnection,
    catalog: &Catalog,
    config: &EngineConfig,
    now: chrono::DateTime<Utc>,
) -> Result<Vec<StrategyLine>, sea_orm::DbErr> {
    use crate::store::strategy_usage;
    let used = strategy_usage::used(db).await?;
    let alive = strategy_usage::keys_alive(db, now).await?;
    let effects = strategy_usage::effects(db).await?;
    let cases = strategy_usage::open_cases(db).await?;
    let tripped: Vec<String> = crate::store::breakers::tripped(db)
        .await?
        .into_iter()
        .map(|row| row.strategy)
        .collect();
    let window = i64::try_from(config.breaker_window_secs).unwrap_or(i64::MAX / 1000);
    let collisions =
        crate::store::dashboard::collisions(db, now - chrono::Duration::seconds(window)).await?;
    let count = |rows: &[strategy_usage::PerStrategy], name: &str| {
        rows.iter().find(|r| r.strategy == name).map_or(0, |r| r.n)
    };
    Ok(catalog
        .strategies()
        .map(|def| {
            let name = format!("{}@{}", def.name, def.version);
            let use_ = used.iter().find(|u| u.strategy == name);
            let tripped = tripped.contains(&name);
            let window_counts = collisions.iter().find(|c| c.strategy == name);
            let (deliveries, collided) =
                window_counts.map_or((0, 0), |c| (c.deliveries, c.collisions));
            let breaker = breaker_sentence(
                tripped,
                deliveries,
                collided,
                config.breaker_min_deliveries,
                config.breaker_threshold,
                config.breaker_window_secs,
            );
            StrategyLine {
                fingerprint: def.fingerprint(),
                provider: def.provider.clone(),
                effect_type: def.effect_type.clone(),
                strength: def.strength.as_str(),
                critical: def.criticality == crate::domain::confidence::Criticality::Critical,
                retired: def.retired,
                current: catalog
                    .current(&def.name)
                    .is_some_and(|c| c.version == def.version),
                deliveries: use_.map_or(0, |u| u.deliveries),
                first_used: use_.map(|u| u.first_at),
                last_used: use_.map(|u| u.last_at),
                keys_alive: count(&alive, &name),
                effects: count(&effects, &name),
                open_cases: count(&cases, &name),
                tripped,
                breaker,
                strategy: name,
            }
        })
        .collect())
}

/// Why a breaker is or is not tripped, with the figures it is judged on —
/// including the minimum of deliveries below which no rate trips it.
fn breaker_sentence(
    tripped: bool,
    deliveries: i64,
    collisions: i64,
    minimum: i64,
    threshold: f64,
    window_secs: u64,
) -> String {
    let rate = if deliveries == 0 {
        0.0
    } else {
        collisions as f64 / deliveries as f64
    };
    let figures = format!(
        "{collisions} collisions in {deliveries} deliveries over the last {} min ({:.2} %; threshold {:.2} %)",
        window_secs / 60,
        rate * 100.0,
        threshold * 100.0
    );
    if tripped {
        format!("tripped: would-be duplicates go to a person until reset; now {figures}")
    } else if deliveries < minimum {
        format!("not tripped: {figures}, but a rate is judged from {minimum} deliveries on")
    } else if rate > threshold {
        format!("about to trip at its next evaluation: {figures}")
    } else {
        format!("not tripped: {figures}")
    }
}

#[cfg(test)]
mod list_tests {
    use super::breaker_sentence;

    #[test]
    fn a_high_rate_under_the_minimum_says_why_the_breaker_did_not_trip() {
        let said = breaker_sentence(false, 44, 3, 200, 0.005, 600);
        assert_eq!(
            said,
            "not tripped: 3 collisions in 44 deliveries over the last 10 min (6.82 %; threshold 0.50 %), but a rate is judged from 200 deliveries on"
        );
        assert!(breaker_sentence(true, 300, 9, 200, 0.005, 600).starts_with("tripped:"));
        assert!(
            breaker_sentence(false, 300, 1, 200, 0.005, 600)
                .starts_with("not tripped: 1 collisions")
        );
    }
}
