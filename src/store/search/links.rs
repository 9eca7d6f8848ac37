//! What links deliveries to one another, for a delivery's page and a
//! fixture: its business key, its provider id, the deliveries that asked for
//! its effects; and those effects as the ledger holds them.

use sea_orm::sea_query::ExprTrait;
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect,
};

use crate::store::entities::{delivery, effect, effect_delivery};

/// What links deliveries to one another: its business key, its provider id
/// (with the source it is scoped by), and the deliveries that asked for its
/// effects or that its decisions name.
#[derive(Debug, Clone, Default)]
pub struct Links<'a> {
    pub business_key: Option<&'a str>,
    pub provider_event_id: Option<(&'a str, &'a str)>,
    pub deliveries: &'a [String],
}

/// Every delivery linked to one by `links`, oldest first, at most `limit`:
/// its first reception, retries, duplicates, collisions.
pub async fn linked<C: ConnectionTrait>(
    conn: &C,
    links: &Links<'_>,
    limit: u64,
) -> Result<Vec<delivery::Model>, DbErr> {
    use delivery::Column as C;
    let mut any = Condition::any();
    if let Some(key) = links.business_key {
        any = any.add(C::BusinessKey.eq(key));
    }
    if let Some((source, id)) = links.provider_event_id {
        any = any.add(C::ProviderEventId.eq(id).and(C::Source.eq(source)));
    }
    if !links.deliveries.is_empty() {
        any = any.add(C::DeliveryId.is_in(links.deliveries.iter().map(String::as_str)));
    }
    if any.is_empty() {
        return Ok(Vec::new());
    }
    delivery::Entity::find()
        .filter(any)
        .order_by_asc(C::ReceivedAt)
        .order_by_asc(C::DeliveryId)
        .limit(limit)
        .all(conn)
        .await
}

/// The deliveries that asked for any of the effects `ids` (at most `limit`):
/// each effect's first delivery, then those linked to it later (duplicates,
/// resolutions). Databases written before 2026-12-01 also hold a link for
/// the first delivery; each delivery is named once.
pub async fn asked_for<C: ConnectionTrait>(
    conn: &C,
    ids: &[String],
    limit: u64,
) -> Result<Vec<String>, DbErr> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut asked: Vec<String> = effect::Entity::find()
        .select_only()
        .column(effect::Column::FirstDeliveryId)
        .filter(effect::Column::EffectId.is_in(ids.iter().map(String::as_str)))
        .limit(limit)
        .into_tuple()
        .all(conn)
        .await?;
    let linked: Vec<String> = effect_delivery::Entity::find()
        .select_only()
        .column(effect_delivery::Column::DeliveryId)
        .filter(effect_delivery::Column::EffectId.is_in(ids.iter().map(String::as_str)))
        .limit(limit)
        .into_tuple()
        .all(conn)
        .await?;
    for id in linked {
        if !asked.contains(&id) {
            asked.push(id);
        }
    }
    asked.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    Ok(asked)
}

/// The effects `ids`, as the ledger holds them.
pub async fn effects<C: ConnectionTrait>(
    conn: &C,
    ids: &[String],
) -> Result<Vec<effect::Model>, DbErr> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    effect::Entity::find()
        .filter(effect::Column::EffectId.is_in(ids.iter().map(String::as_str)))
        .order_by_asc(effect::Column::CreatedAt)
        .all(conn)
        .await
}
