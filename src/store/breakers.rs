//! Reading the collision breakers (the `strategy_breakers` projection), and
//! the deliveries a tripped strategy ignored (the `deliveries` read model).

use chrono::{DateTime, Utc};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder, QuerySelect,
};

use super::entities::{case, delivery, strategy_breaker};
use super::id_range;
use crate::domain::decision::Reason;

/// Every tripped strategy, with the figures that tripped it.
pub async fn tripped<C: ConnectionTrait>(conn: &C) -> Result<Vec<strategy_breaker::Model>, DbErr> {
    strategy_breaker::Entity::find().all(conn).await
}

/// The deliveries `strategy` ignored received since `since` that no case
/// flags yet (`breaker_tripped`), oldest first, at most `most`.
pub async fn ignored_since<C: ConnectionTrait>(
    conn: &C,
    strategy: &str,
    since: DateTime<Utc>,
    most: u64,
) -> Result<Vec<delivery::Model>, DbErr> {
    use sea_orm::sea_query::{Expr, ExprTrait, Query};
    let flagged = Query::select()
        .expr(Expr::val(1))
        .from(case::Entity)
        .and_where(
            Expr::col((case::Entity, case::Column::DeliveryId))
                .equals((delivery::Entity, delivery::Column::DeliveryId)),
        )
        .and_where(
            Expr::col((case::Entity, case::Column::Reason)).eq(Reason::BreakerTripped.as_str()),
        )
        .to_owned();
    delivery::Entity::find()
        .filter(delivery::Column::DeliveryId.gte(id_range::made_since(since)))
        .filter(delivery::Column::ReceivedAt.gte(since))
        .filter(delivery::Column::Strategy.eq(strategy))
        .filter(delivery::Column::Decision.eq("ignore"))
        .filter(Expr::exists(flagged).not())
        .order_by_asc(delivery::Column::DeliveryId)
        .limit(most)
        .all(conn)
        .await
}
