//! Reading the effects ledger (the `effects` projection) beyond one key.

use sea_orm::{ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter};

use super::entities::effect;

/// The effects keyed by `strategy` (`name@version`) under its own keys — not
/// those processed as distinct under a key derived from one (`key~…`), which
/// no retry ever looks up.
pub async fn keyed_by<C: ConnectionTrait>(
    conn: &C,
    strategy: &str,
) -> Result<Vec<effect::Model>, DbErr> {
    let prefix = format!("{strategy}:");
    Ok(effect::Entity::find()
        .filter(effect::Column::Key.starts_with(prefix.as_str()))
        .all(conn)
        .await?
        .into_iter()
        .filter(|e| !e.key.contains('~'))
        .collect())
}

/// How many effects were applied for the business key `key`: its own, and
/// those applied as distinct under keys derived from it (`key~…`).
pub async fn applied_effects<C: ConnectionTrait>(conn: &C, key: &str) -> Result<u64, DbErr> {
    use crate::domain::reservation::ReservationState;
    use sea_orm::PaginatorTrait;
    use sea_orm::sea_query::ExprTrait;

    effect::Entity::find()
        .filter(
            effect::Column::Key
                .eq(key)
                .or(effect::Column::Key.starts_with(format!("{key}~"))),
        )
        .filter(effect::Column::Status.eq(ReservationState::Applied.as_str()))
        .count(conn)
        .await
}

/// The effect `id`, if the ledger holds it.
pub async fn effect<C: ConnectionTrait>(
    conn: &C,
    id: uuid::Uuid,
) -> Result<Option<effect::Model>, DbErr> {
    effect::Entity::find_by_id(id.to_string()).one(conn).await
}

/// The reservation of `key` in the fast index, if it is there.
pub async fn reservation<C: ConnectionTrait>(
    conn: &C,
    key: &str,
) -> Result<Option<super::entities::reservation::Model>, DbErr> {
    super::entities::reservation::Entity::find_by_id(key.to_owned())
        .one(conn)
        .await
}

/// How many effects are still pending (reserved, not settled).
pub async fn pending_effects<C: ConnectionTrait>(conn: &C) -> Result<u64, DbErr> {
    use crate::domain::reservation::ReservationState;
    use sea_orm::PaginatorTrait;
    effect::Entity::find()
        .filter(effect::Column::Status.eq(ReservationState::Pending.as_str()))
        .count(conn)
        .await
}
