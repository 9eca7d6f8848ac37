//! Reading the fast key index (the `reservations` projection): what a
//! decision finds for its keys, and what the sweeper has to act on. Claims
//! on it (reserve, retake, settle, expire) are projections of their events
//! (`projections::effects`).

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbBackend, DbErr, EntityTrait, QueryFilter, QuerySelect,
};

use super::entities::reservation;
use crate::domain::reservation::ReservationState;

/// The reservation of `key`, if it is in the fast index.
pub async fn find<C: ConnectionTrait>(
    conn: &C,
    key: &str,
) -> Result<Option<reservation::Model>, DbErr> {
    reservation::Entity::find_by_id(key.to_owned())
        .one(conn)
        .await
}

/// The reservations of `keys` a decision reads. On PostgreSQL the rows stay
/// locked until the transaction ends: deciders and settlers of one key are
/// serialised, so that a delivery deferred on it is always seen by the
/// settler's re-decision.
pub async fn for_decision<C: ConnectionTrait>(
    conn: &C,
    keys: &[String],
) -> Result<Vec<reservation::Model>, DbErr> {
    let mut query = reservation::Entity::find()
        .filter(reservation::Column::Key.is_in(keys.iter().map(String::as_str)));
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
    reservation::Entity::find()
        .select_only()
        .column(reservation::Column::Key)
        .filter(reservation::Column::Key.is_in(keys.iter().copied()))
        .filter(reservation::Column::State.eq(ReservationState::Reserved.as_str()))
        .filter(reservation::Column::LeaseUntil.gt(now))
        .into_tuple()
        .all(conn)
        .await
}

/// Up to `limit` reservations whose lease ran out before `now` unsettled.
pub async fn lease_expired<C: ConnectionTrait>(
    conn: &C,
    now: DateTime<Utc>,
    limit: u64,
) -> Result<Vec<reservation::Model>, DbErr> {
    lease_expired_query(now, limit).all(conn).await
}

/// Walks `reservations_leased`, the index of running leases only: settled
/// reservations (most of them, and every one settled in its own batch) have
/// no entry in it. Its condition is written as the index's, a literal, so
/// that both SQLite and PostgreSQL's generic plans can use it.
fn lease_expired_query(now: DateTime<Utc>, limit: u64) -> sea_orm::Select<reservation::Entity> {
    debug_assert_eq!(ReservationState::Reserved.as_str(), "reserved");
    reservation::Entity::find()
        .filter(Expr::cust("state = 'reserved'"))
        .filter(reservation::Column::LeaseUntil.lt(now))
        .limit(limit)
}

/// Up to `limit` applied keys whose horizon ended before `now`.
pub async fn past_horizon<C: ConnectionTrait>(
    conn: &C,
    now: DateTime<Utc>,
    limit: u64,
) -> Result<Vec<String>, DbErr> {
    reservation::Entity::find()
        .select_only()
        .column(reservation::Column::Key)
        .filter(reservation::Column::State.eq(ReservationState::Applied.as_str()))
        .filter(reservation::Column::ExpiresAt.lt(now))
        .limit(limit)
        .into_tuple()
        .all(conn)
        .await
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
                .any(|step| step.contains("USING INDEX reservations_leased")),
            "{plan:?}"
        );
    }
}
