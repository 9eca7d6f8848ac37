//! Projection `strategy_breakers`.

use chrono::{DateTime, Utc};
use sea_orm::{ActiveValue::Set, ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter};

use super::rows;
use crate::domain::journal::{StrategyReset, StrategyTripped};
use crate::store::entities::strategy_breaker;

pub(super) async fn tripped<C: ConnectionTrait>(
    conn: &C,
    e: &StrategyTripped,
    at: DateTime<Utc>,
) -> Result<u64, DbErr> {
    let row = strategy_breaker::ActiveModel {
        strategy: Set(e.strategy.clone()),
        deliveries: Set(e.deliveries),
        collisions: Set(e.collisions),
        tripped_at: Set(at),
    };
    strategy_breaker::Entity::insert(row)
        .on_conflict_do_nothing()
        .exec_without_returning(conn)
        .await
        .map(rows)
}

pub(super) async fn reset<C: ConnectionTrait>(conn: &C, e: &StrategyReset) -> Result<u64, DbErr> {
    Ok(strategy_breaker::Entity::delete_many()
        .filter(strategy_breaker::Column::Strategy.eq(e.strategy.as_str()))
        .exec(conn)
        .await?
        .rows_affected)
}
