//! Reading the effects ledger (the `effects` projection) beyond one key.

use chrono::{DateTime, Utc};
use sea_orm::{ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QuerySelect};

use super::entities::effect;
use crate::domain::reservation::ReservationState;

/// The ledger rows of `keys`.
pub async fn of_keys<C: ConnectionTrait>(
    conn: &C,
    keys: &[String],
) -> Result<Vec<effect::Model>, DbErr> {
    effect::Entity::find()
        .filter(effect::Column::Key.is_in(keys.iter().map(String::as_str)))
        .all(conn)
        .await
}

/// The ids of the effects applied before `before` whose stored result is
/// still there. An effect whose outcome is unknown, or that failed, has no
/// result that proves it happened: retention leaves it (its `settled_at`
/// may be an earlier attempt's).
pub async fn evidence_settled_before<C: ConnectionTrait>(
    conn: &C,
    before: DateTime<Utc>,
) -> Result<Vec<String>, DbErr> {
    purgeable(effect::Entity::find(), before)
        .select_only()
        .column(effect::Column::EffectId)
        .into_tuple()
        .all(conn)
        .await
}

/// Whether the effect `effect_id` is still one `evidence_settled_before`
/// lists, read in the transaction that purges it (its row held there on
/// PostgreSQL): settled again since the list was read, its fresh result
/// stays.
pub async fn still_purgeable<C: ConnectionTrait>(
    conn: &C,
    effect_id: &str,
    before: DateTime<Utc>,
) -> Result<bool, DbErr> {
    let mut query = purgeable(effect::Entity::find_by_id(effect_id.to_owned()), before);
    if conn.get_database_backend() == sea_orm::DbBackend::Postgres {
        query = query.lock_exclusive();
    }
    Ok(query.one(conn).await?.is_some())
}

fn purgeable(
    query: sea_orm::Select<effect::Entity>,
    before: DateTime<Utc>,
) -> sea_orm::Select<effect::Entity> {
    query
        .filter(effect::Column::State.eq(ReservationState::Applied.as_str()))
        .filter(effect::Column::SettledAt.lt(before))
        .filter(effect::Column::EvidencePurgedAt.is_null())
}

/// Keys that start with `prefix`, taken literally: a strategy's name may
/// hold `_`, which a LIKE pattern reads as any character (`refund_id@1`
/// would select `refund-id@1`'s effects).
fn key_starts_with(prefix: &str) -> sea_orm::sea_query::Expr {
    effect::Column::Key.like(like(&format!("{prefix}*")))
}

/// A `*` wildcard pattern (`domain::identity::pattern`) as a LIKE pattern,
/// every other character taken literally. SQLite's LIKE ignores the case
/// of ASCII letters: what it selects may need the pattern's own test.
pub fn like(glob: &str) -> sea_orm::sea_query::LikeExpr {
    let mut pattern = String::with_capacity(glob.len() + 1);
    for c in glob.chars() {
        match c {
            '*' => pattern.push('%'),
            '!' | '%' | '_' => {
                pattern.push('!');
                pattern.push(c);
            }
            c => pattern.push(c),
        }
    }
    sea_orm::sea_query::LikeExpr::new(pattern).escape('!')
}

/// The effects keyed by `strategy` (`name@version`) under its own keys — not
/// those processed as distinct under a key derived from one (`key~…`), which
/// no retry ever looks up.
pub async fn keyed_by<C: ConnectionTrait>(
    conn: &C,
    strategy: &str,
) -> Result<Vec<effect::Model>, DbErr> {
    let prefix = format!("{strategy}:");
    Ok(effect::Entity::find()
        .filter(key_starts_with(&prefix))
        .all(conn)
        .await?
        .into_iter()
        .filter(|e| !e.key.contains('~'))
        .collect())
}

/// Whether any effect was keyed by `strategy` (`name@version`), under its
/// own keys or one derived from them (`key~…`).
pub async fn any_keyed_by<C: ConnectionTrait>(conn: &C, strategy: &str) -> Result<bool, DbErr> {
    let prefix = format!("{strategy}:");
    Ok(effect::Entity::find()
        .select_only()
        .column(effect::Column::EffectId)
        .filter(key_starts_with(&prefix))
        .into_tuple::<String>()
        .one(conn)
        .await?
        .is_some())
}

/// Whether an effect that may have moved money (any state but failed)
/// cites one of the provider operations `ids`, whatever its type.
pub async fn cited_by_a_live_effect<C: ConnectionTrait>(
    conn: &C,
    ids: &[String],
) -> Result<bool, DbErr> {
    Ok(effect::Entity::find()
        .filter(effect::Column::ProviderRef.is_in(ids.iter().map(String::as_str)))
        .filter(effect::Column::State.ne(ReservationState::Failed.as_str()))
        .one(conn)
        .await?
        .is_some())
}

/// Which of `provider`'s operations `ids` a person recorded as made by
/// hand: no effect may cite them, nor a run or a look-up count them as owed.
pub async fn made_by_hand_among<C: ConnectionTrait>(
    conn: &C,
    provider: &str,
    ids: &[String],
) -> Result<std::collections::BTreeSet<String>, DbErr> {
    use super::entities::hand_made_hold;
    let mut found = std::collections::BTreeSet::new();
    for chunk in ids.chunks(500) {
        let rows = hand_made_hold::Entity::find()
            .filter(hand_made_hold::Column::OperationId.is_in(chunk.iter().map(String::as_str)))
            .filter(hand_made_hold::Column::Provider.eq(provider))
            .all(conn)
            .await?;
        found.extend(rows.into_iter().map(|row| row.operation_id));
    }
    Ok(found)
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
                .or(key_starts_with(&format!("{key}~"))),
        )
        .filter(effect::Column::State.eq(ReservationState::Applied.as_str()))
        .count(conn)
        .await
}

/// Every effect reserved under `key` and keys derived from it, whatever
/// became of it: the effects its deliveries and cases asked for.
pub async fn effects_under<C: ConnectionTrait>(
    conn: &C,
    key: &str,
) -> Result<Vec<effect::Model>, DbErr> {
    use sea_orm::sea_query::ExprTrait;

    effect::Entity::find()
        .filter(
            effect::Column::Key
                .eq(key)
                .or(key_starts_with(&format!("{key}~"))),
        )
        .all(conn)
        .await
}

/// Every effect under the business keys `keys` in a state that may have
/// moved money — reserved, pending, unknown or applied, not failed: each
/// key's own and those applied as distinct under keys derived from it
/// (`key~…`).
pub async fn live_effects<C: ConnectionTrait>(
    conn: &C,
    keys: &[String],
) -> Result<Vec<effect::Model>, DbErr> {
    use crate::domain::reservation::ReservationState;
    use sea_orm::Condition;

    let mut under = Condition::any();
    for key in keys {
        under = under
            .add(effect::Column::Key.eq(key.as_str()))
            .add(key_starts_with(&format!("{key}~")));
    }
    effect::Entity::find()
        .filter(under)
        .filter(effect::Column::State.ne(ReservationState::Failed.as_str()))
        .all(conn)
        .await
}

/// The effects of `effect_type` that cite one of the provider operations
/// `refs` (each cited by one effect at most: a unique index).
pub async fn citing<C: ConnectionTrait>(
    conn: &C,
    effect_type: &str,
    refs: &[String],
) -> Result<Vec<effect::Model>, DbErr> {
    if refs.is_empty() {
        return Ok(Vec::new());
    }
    effect::Entity::find()
        .filter(effect::Column::EffectType.eq(effect_type))
        .filter(effect::Column::ProviderRef.is_in(refs.iter().map(String::as_str)))
        .all(conn)
        .await
}

/// The effect `id`, if the ledger holds it.
pub async fn effect<C: ConnectionTrait>(
    conn: &C,
    id: uuid::Uuid,
) -> Result<Option<effect::Model>, DbErr> {
    effect::Entity::find_by_id(id.to_string()).one(conn).await
}

/// How many effects are still pending (reserved, not settled).
pub async fn pending_effects<C: ConnectionTrait>(conn: &C) -> Result<u64, DbErr> {
    use crate::domain::reservation::ReservationState;
    use sea_orm::PaginatorTrait;
    effect::Entity::find()
        .filter(effect::Column::State.eq(ReservationState::Reserved.as_str()))
        .count(conn)
        .await
}

/// Whether a person recorded an operation sealed as `seal` as made by hand
/// (`hand_made_holds`): a delivery with its fields is held for a person.
pub async fn made_by_hand<C: ConnectionTrait>(conn: &C, seal: &str) -> Result<bool, DbErr> {
    use super::entities::hand_made_hold;
    Ok(hand_made_hold::Entity::find()
        .filter(hand_made_hold::Column::Seal.eq(seal))
        .one(conn)
        .await?
        .is_some())
}

#[cfg(test)]
mod tests {
    use sea_orm::{ActiveModelTrait, IntoActiveModel, QueryOrder};

    use super::*;

    fn keyed(key: &str) -> effect::Model {
        effect::Model {
            effect_id: uuid::Uuid::now_v7().to_string(),
            key: key.to_owned(),
            effect_type: "refund.create".to_owned(),
            criticality: "critical".to_owned(),
            state: ReservationState::Applied.as_str().to_owned(),
            fencing_token: Some(1),
            lease_until: None,
            expires_at: None,
            key_purged: false,
            sink: "http".to_owned(),
            result: None,
            downstream_ref: None,
            provider_ref: None,
            first_delivery_id: uuid::Uuid::now_v7().to_string(),
            discriminants: serde_json::json!({}),
            created_at: Utc::now(),
            settled_at: None,
            evidence_purged_at: None,
        }
    }

    #[tokio::test]
    async fn a_strategy_named_with_an_underscore_owns_no_effect_of_one_named_with_a_dash() {
        let (_dir, db) = crate::store::test_database().await;
        for key in ["refund-id@1:aa", "refund-id@1:aa~case-1"] {
            keyed(key)
                .into_active_model()
                .reset_all()
                .insert(&db)
                .await
                .unwrap();
        }
        assert!(keyed_by(&db, "refund_id@1").await.unwrap().is_empty());
        assert!(!any_keyed_by(&db, "refund_id@1").await.unwrap());
        assert_eq!(effects_under(&db, "refund_id@1:aa").await.unwrap().len(), 0);
        assert_eq!(
            live_effects(&db, &["refund_id@1:aa".to_owned()])
                .await
                .unwrap()
                .len(),
            0
        );
        // Its own are found
        assert_eq!(keyed_by(&db, "refund-id@1").await.unwrap().len(), 1);
        assert!(any_keyed_by(&db, "refund-id@1").await.unwrap());
        assert_eq!(effects_under(&db, "refund-id@1:aa").await.unwrap().len(), 2);
        assert_eq!(applied_effects(&db, "refund-id@1:aa").await.unwrap(), 2);
    }

    #[tokio::test]
    async fn an_effect_type_pattern_reads_only_its_star_as_a_wildcard() {
        let (_dir, db) = crate::store::test_database().await;
        for effect_type in ["refund.create", "refund-create", "refunds", "payout.create"] {
            let mut effect = keyed(&format!("{effect_type}@1:k"));
            effect.effect_type = effect_type.to_owned();
            effect
                .into_active_model()
                .reset_all()
                .insert(&db)
                .await
                .unwrap();
        }
        for (glob, expected) in [
            ("refund.*", vec!["refund.create"]),
            ("refund_*", vec![]),
            ("refund%", vec![]),
            ("*.create", vec!["payout.create", "refund.create"]),
            ("refunds", vec!["refunds"]),
        ] {
            let found: Vec<String> = effect::Entity::find()
                .filter(effect::Column::EffectType.like(like(glob)))
                .order_by_asc(effect::Column::EffectType)
                .all(&db)
                .await
                .unwrap()
                .into_iter()
                .map(|e| e.effect_type)
                .collect();
            assert_eq!(found, expected, "{glob}");
        }
    }
}
