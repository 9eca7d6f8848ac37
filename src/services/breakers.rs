//! Collision breakers. A strategy whose keys collide (same key, discriminating
//! fields that differ) on more than `breaker_threshold` of its recent
//! deliveries is tripped: from then on, any delivery it keys that would have
//! been ignored goes to reconciliation instead, until an operator resets it.
//! Rates are computed periodically from the `deliveries` projection, never on
//! the hot path; every process refreshes the tripped set from the database.

use std::time::Duration;

use chrono::Utc;
use sea_orm::{
    ConnectionTrait, DatabaseConnection, DbBackend, DbErr, EntityTrait, Statement, TransactionTrait,
};

use super::engine::{SharedEngine, claim};
use crate::domain::journal::{JournalEvent, StrategyReset, StrategyTripped};
use crate::store::entities::strategy_breaker;

/// Evaluates breakers forever at the configured interval.
pub fn spawn(engine: SharedEngine) {
    let interval = Duration::from_millis(engine.config.breaker_check_ms.max(50));
    crate::tasks::supervise("breakers", move || {
        let engine = engine.clone();
        async move {
            loop {
                if let Err(error) = evaluate(&engine).await {
                    tracing::warn!(%error, "breaker evaluation failed");
                }
                tokio::time::sleep(interval).await;
            }
        }
    });
}

/// Trips every strategy over the threshold, then refreshes the tripped set.
/// Returns the strategies tripped by this call.
pub async fn evaluate(engine: &SharedEngine) -> Result<Vec<String>, DbErr> {
    let config = &engine.config;
    let since = Utc::now()
        - chrono::Duration::seconds(
            i64::try_from(config.breaker_window_secs).unwrap_or(i64::MAX / 1000),
        );
    let backend = engine.db.get_database_backend();
    let placeholder = if backend == DbBackend::Postgres {
        "$1"
    } else {
        "?"
    };
    let sql = format!(
        "SELECT strategy, COUNT(*) AS deliveries, \
         SUM(CASE WHEN reason = 'discriminants_differ' THEN 1 ELSE 0 END) AS collisions \
         FROM deliveries WHERE strategy IS NOT NULL AND received_at >= {placeholder} GROUP BY strategy"
    );
    let rows = engine
        .db
        .query_all_raw(Statement::from_sql_and_values(backend, sql, [since.into()]))
        .await?;
    let mut tripped = Vec::new();
    for row in rows {
        let strategy: String = row.try_get("", "strategy")?;
        let deliveries: i64 = row.try_get("", "deliveries")?;
        let collisions: i64 = row.try_get("", "collisions")?;
        let over = deliveries >= config.breaker_min_deliveries
            && (collisions as f64) > config.breaker_threshold * deliveries as f64;
        if !over || engine.is_tripped(&strategy) {
            continue;
        }
        let event = JournalEvent::StrategyTripped(StrategyTripped {
            strategy: strategy.clone(),
            deliveries,
            collisions,
            threshold: config.breaker_threshold,
            window_secs: config.breaker_window_secs,
        });
        let now = Utc::now();
        let took = engine
            .writer
            .run(move |txn| Box::pin(async move { claim(txn, None, &event, now).await }))
            .await?;
        if took {
            tracing::warn!(
                strategy,
                deliveries,
                collisions,
                "collision breaker tripped: auto-ignore stops for this strategy"
            );
            tripped.push(strategy);
        }
    }
    refresh(engine).await?;
    Ok(tripped)
}

/// Re-reads the tripped strategies from the database.
pub async fn refresh(engine: &SharedEngine) -> Result<(), DbErr> {
    let current = strategy_breaker::Entity::find().all(&engine.db).await?;
    engine.set_tripped(current.into_iter().map(|row| row.strategy).collect());
    Ok(())
}

/// An operator's reset of a tripped breaker; false when it was not tripped.
/// Running servers pick it up at their next evaluation.
pub async fn reset(db: &DatabaseConnection, strategy: &str) -> Result<bool, DbErr> {
    let event = JournalEvent::StrategyReset(StrategyReset {
        strategy: strategy.to_owned(),
    });
    let txn = db.begin().await?;
    let took = claim(&txn, None, &event, Utc::now()).await?;
    txn.commit().await?;
    Ok(took)
}
