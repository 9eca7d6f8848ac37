//! Reading the collision breakers (the `strategy_breakers` projection).

use sea_orm::{ConnectionTrait, DbErr, EntityTrait};

use super::entities::strategy_breaker;

/// Every tripped strategy, with the figures that tripped it.
pub async fn tripped<C: ConnectionTrait>(conn: &C) -> Result<Vec<strategy_breaker::Model>, DbErr> {
    strategy_breaker::Entity::find().all(conn).await
}
