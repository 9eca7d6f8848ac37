//! The effects a delivery lacking a field may stand for under another
//! strategy's key (`KeySummary::lacking`): taken for the same resource by a
//! strategy its missing field skipped, found through the deliveries read
//! model by resource and, past what the read model holds, through the
//! journal's tail. Read by `Tx::decide_key` only when such a delivery would
//! be applied: never on the path of a delivery keyed by its first strategy.

use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect,
};
use serde_json::Value;

use super::checkpoint::{DELIVERIES, checkpoint, head};
use super::entities::{delivery, effect};
use super::journal;
use crate::domain::decision::LookAlike;
use crate::domain::journal::{JournalEvent, KeySummary, Lacking};
use crate::domain::reservation::ReservationState;

/// Rows of the journal's tail read at most: past it (a read model stopped
/// or far behind) nothing proves there is no look-alike.
const TAIL_ROWS: i64 = 20_000;

/// Deliveries of one resource read at most from the read model.
const PER_RESOURCE: u64 = 1_000;

/// The first effect `key`'s delivery may be the same operation as, or
/// a look-alike naming nothing when the journal's tail is too long to tell.
pub async fn find<C: ConnectionTrait>(
    conn: &C,
    key: &KeySummary,
    lacking: &Lacking,
) -> Result<Option<LookAlike>, DbErr> {
    // The newest deliveries of the resource first.
    let mut keys: Vec<String> = delivery::Entity::find()
        .select_only()
        .column(delivery::Column::BusinessKey)
        .filter(delivery::Column::Resource.eq(lacking.resource.as_str()))
        .filter(delivery::Column::BusinessKey.is_not_null())
        .order_by_desc(delivery::Column::DeliveryId)
        .limit(PER_RESOURCE)
        .into_tuple::<Option<String>>()
        .all(conn)
        .await?
        .into_iter()
        .flatten()
        .filter(|k| lacks(lacking, strategy_of(k)))
        .collect();
    let Some(tail) = tail_keys(conn, lacking).await? else {
        return Ok(Some(LookAlike {
            reference_delivery: None,
            effect_id: None,
        }));
    };
    keys.extend(tail);
    keys.sort();
    keys.dedup();
    if keys.is_empty() {
        return Ok(None);
    }
    // A key's own effect, and those processed as distinct under it
    // (`key~…`: '~' is followed by DEL in ASCII, which no key holds).
    let mut under = Condition::any().add(effect::Column::Key.is_in(keys.iter().cloned()));
    for k in &keys {
        under = under.add(
            Condition::all()
                .add(effect::Column::Key.gt(format!("{k}~")))
                .add(effect::Column::Key.lt(format!("{k}\u{7f}"))),
        );
    }
    let effects = effect::Entity::find().filter(under).all(conn).await?;
    Ok(effects
        .iter()
        .find(|e| alike(e, key, lacking))
        .map(|e| LookAlike {
            reference_delivery: e.first_delivery_id.parse().ok(),
            effect_id: e.effect_id.parse().ok(),
        }))
}

/// The keys the journal's tail past the read model took for the resource
/// under one of the strategies lacked; `None` when the tail is longer than
/// `TAIL_ROWS`.
async fn tail_keys<C: ConnectionTrait>(
    conn: &C,
    lacking: &Lacking,
) -> Result<Option<Vec<String>>, DbErr> {
    let after = checkpoint(conn, DELIVERIES).await?;
    if head(conn).await? - after > TAIL_ROWS {
        return Ok(None);
    }
    let types = ["DeliveryDecided", "KeyDerived"];
    // Only the rows whose text names the resource are decoded: a tail of
    // a thousand rows is read, not parsed, for each such delivery.
    let named = serde_json::to_string(&lacking.resource).unwrap_or_default();
    let holding = format!("\"resource\":{named}");
    let range = (after, i64::MAX);
    let (events, more) =
        journal::page_between_holding(conn, range, &types, &holding, TAIL_ROWS as u64)
            .await
            .map_err(|e| DbErr::Custom(format!("reading the journal's tail: {e}")))?;
    if more.is_some() {
        return Ok(None);
    }
    Ok(Some(
        events
            .into_iter()
            .filter_map(|stored| match stored.event {
                JournalEvent::KeyDerived(derived)
                    if derived.resource.as_deref() == Some(lacking.resource.as_str()) =>
                {
                    derived
                        .business
                        .filter(|b| lacks(lacking, &b.strategy))
                        .map(|b| b.key)
                }
                _ => None,
            })
            .collect(),
    ))
}

/// The strategy (`name@version`) a key `name@version:hex…` was made by.
fn strategy_of(key: &str) -> &str {
    key.split_once(':').map_or(key, |(strategy, _)| strategy)
}

/// Whether `strategy` (`name@version`) is one of those `lacking` names.
fn lacks(lacking: &Lacking, strategy: &str) -> bool {
    let name = strategy.split_once('@').map_or(strategy, |(name, _)| name);
    lacking.strategies.iter().any(|s| s == name)
}

/// Whether `e` may be the operation `key`'s delivery stands for: taken by
/// a strategy it lacks a field of, for the same effect type, not failed
/// without effect, its discriminating fields agreeing on every name the
/// two share.
fn alike(e: &effect::Model, key: &KeySummary, lacking: &Lacking) -> bool {
    let theirs = match &e.discriminants {
        Value::Object(theirs) => Some(theirs),
        _ => None,
    };
    e.effect_type == key.effect_type
        && e.state != ReservationState::Failed.as_str()
        && lacks(lacking, strategy_of(&e.key))
        && key.discriminants.iter().all(|(name, ours)| {
            theirs
                .and_then(|t| t.get(name))
                .is_none_or(|value| value == ours)
        })
}
