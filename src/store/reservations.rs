//! Reading the fast key index (the rows of `effects` within their horizon):
//! what a decision finds for its keys, and what the sweeper has to act on. Claims
//! on it (reserve, retake, settle, expire) are projections of their events
//! (`projections::effects`).

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, Query};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbBackend, DbErr, EntityTrait, QueryFilter, QuerySelect,
};

use super::entities::{effect, effect_horizon};
use crate::domain::reservation::ReservationState;

/// The row of `key`, in the fast index or purged from it (callers check
/// its state: a purged key is applied).
pub async fn find<C: ConnectionTrait>(conn: &C, key: &str) -> Result<Option<effect::Model>, DbErr> {
    effect::Entity::find()
        .filter(effect::Column::Key.eq(key))
        .one(conn)
        .await
}

/// The rows of `keys` a decision reads, purged ones included. On PostgreSQL the rows stay
/// locked until the transaction ends: deciders and settlers of one key are
/// serialised, so that a delivery deferred on it is always seen by the
/// settler's re-decision.
pub async fn for_decision<C: ConnectionTrait>(
    conn: &C,
    keys: &[String],
) -> Result<Vec<effect::Model>, DbErr> {
    let mut query =
        effect::Entity::find().filter(effect::Column::Key.is_in(keys.iter().map(String::as_str)));
    if conn.get_database_backend() == DbBackend::Postgres {
        query = query.lock_exclusive();
    }
    query.all(conn).await
}

/// Those of `keys` held by a lease still running at `now`.
pub async fn held<C: ConnectionTrait>(
    conn: &C,
    keys: &[&str],
    now: DateTime<Utc>,
) -> Result<Vec<String>, DbErr> {
    effect::Entity::find()
        .select_only()
        .column(effect::Column::Key)
        .filter(effect::Column::Key.is_in(keys.iter().copied()))
        .filter(effect::Column::State.eq(ReservationState::Reserved.as_str()))
        .filter(effect::Column::LeaseUntil.gt(now))
        .into_tuple()
        .all(conn)
        .await
}

/// Up to `limit` reservations whose lease ran out before `now` unsettled.
pub async fn lease_expired<C: ConnectionTrait>(
    conn: &C,
    now: DateTime<Utc>,
    limit: u64,
) -> Result<Vec<effect::Model>, DbErr> {
    lease_expired_query(now, limit).all(conn).await
}

/// Walks `effects_leased`, the index of running leases only: settled
/// reservations (most of them, and every one settled in its own batch) have
/// no entry in it. Its condition is written as the index's, a literal, so
/// that both SQLite and PostgreSQL's generic plans can use it.
fn lease_expired_query(now: DateTime<Utc>, limit: u64) -> sea_orm::Select<effect::Entity> {
    debug_assert_eq!(ReservationState::Reserved.as_str(), "reserved");
    effect::Entity::find()
        .filter(Expr::cust("state = 'reserved'"))
        .filter(effect::Column::LeaseUntil.lt(now))
        .limit(limit)
}

/// Up to `limit` applied keys whose horizon ended before `now`, found
/// through `effect_horizons` (walking its index by horizon), which the
/// projector writes after the commit: callers catch it up first. A key whose
/// purge it has not applied yet is left out by its row's flag.
pub async fn past_horizon<C: ConnectionTrait>(
    conn: &C,
    now: DateTime<Utc>,
    limit: u64,
) -> Result<Vec<String>, DbErr> {
    past_horizon_query(now, limit).into_tuple().all(conn).await
}

fn past_horizon_query(now: DateTime<Utc>, limit: u64) -> sea_orm::Select<effect::Entity> {
    let expired = Query::select()
        .column(effect_horizon::Column::EffectId)
        .from(effect_horizon::Entity)
        .and_where(effect_horizon::Column::ExpiresAt.lt(now))
        .to_owned();
    effect::Entity::find()
        .select_only()
        .column(effect::Column::Key)
        .filter(effect::Column::EffectId.in_subquery(expired))
        .filter(effect::Column::State.eq(ReservationState::Applied.as_str()))
        .filter(effect::Column::KeyPurged.eq(false))
        .limit(limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn expired_leases_are_found_through_the_index_of_running_leases() {
        let (_dir, db) = crate::store::test_database().await;
        let plan = crate::store::sqlite_plan(&db, &lease_expired_query(Utc::now(), 10)).await;
        assert!(
            plan.iter()
                .any(|step| step.contains("USING INDEX effects_leased")),
            "{plan:?}"
        );
    }

    #[tokio::test]
    async fn keys_past_their_horizon_are_found_through_the_index_of_horizons() {
        let (_dir, db) = crate::store::test_database().await;
        let plan = crate::store::sqlite_plan(&db, &past_horizon_query(Utc::now(), 10)).await;
        assert!(
            plan.iter()
                .any(|step| step.contains("USING COVERING INDEX effect_horizons_expiring")),
            "{plan:?}"
        );
        assert!(
            !plan.iter().any(|step| step.starts_with("SCAN")),
            "{plan:?}"
        );
    }
}
