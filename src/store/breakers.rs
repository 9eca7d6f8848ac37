//! Reading the collision breakers (the `strategy_breakers` projection), and
//! the deliveries a tripped strategy ignored (the `deliveries` read model).

use chrono::{DateTime, Utc};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder, QuerySelect,
};

use super::entities::{delivery, strategy_breaker};
use super::id_range;

/// Every tripped strategy, with the figures that tripped it.
pub async fn tripped<C: ConnectionTrait>(conn: &C) -> Result<Vec<strategy_breaker::Model>, DbErr> {
    strategy_breaker::Entity::find().all(conn).await
}

/// The deliveries `strategy` ignored received since `since`, oldest
/// first, at most `most`.
pub async fn ignored_since<C: ConnectionTrait>(
    conn: &C,
    strategy: &str,
    since: DateTime<Utc>,
    most: u64,
) -> Result<Vec<delivery::Model>, DbErr> {
    delivery::Entity::find()
        .filter(delivery::Column::DeliveryId.gte(id_range::made_since(since)))
        .filter(delivery::Column::ReceivedAt.gte(since))
        .filter(delivery::Column::Strategy.eq(strategy))
        .filter(delivery::Column::Decision.eq("ignore"))
        .order_by_asc(delivery::Column::DeliveryId)
        .limit(most)
        .all(conn)
        .await
}
