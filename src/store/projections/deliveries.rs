//! Projection `deliveries` (one row per delivery, latest decision) and
//! `transport_links` (first reception of each transport identity).
//!
//! Replaying a delivery's events one by one (insert, then key columns, then
//! decision columns) and the live path's single folded row (`received_row`, `decide_row`)
//! go through the same column builders, so both reach the same row.

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveModelTrait,
    ActiveValue::{NotSet, Set},
    ColumnTrait, ConnectionTrait, DbErr, EntityTrait, IntoActiveModel, QueryFilter, QueryOrder,
    QuerySelect, Select,
};

use super::cases;
use super::rows;
use crate::domain::decision::Action;
use crate::domain::journal::{DecisionMade, DeliveryReceived, KeyDerived, Origin};
use crate::store::deferred::Deferred;
use crate::store::entities::{delivery, transport_link};

/// Deliveries still deferred, written literally so that the partial indexes
/// over them (`deliveries_deferred*`) apply to any plan: a generic
/// PostgreSQL plan does not use a partial index for a bound parameter.
fn deferred() -> sea_orm::sea_query::SimpleExpr {
    sea_orm::sea_query::Expr::cust(format!("decision = '{}'", Action::Defer.as_str()))
}

/// The deliveries deferred on `key` (a query, to read its plan in tests).
fn deferred_on(key: &str) -> Select<delivery::Entity> {
    delivery::Entity::find()
        .filter(delivery::Column::BusinessKey.eq(key))
        .filter(deferred())
}

/// The `limit` deliveries deferred the longest (a query).
fn oldest_deferred(limit: u64) -> Select<delivery::Entity> {
    delivery::Entity::find()
        .filter(deferred())
        .order_by_asc(delivery::Column::ReceivedAt)
        .limit(limit)
}

/// The deliveries deferred on `key`, to decide again.
pub async fn waiting_on<C: ConnectionTrait>(
    conn: &C,
    key: &str,
) -> Result<Vec<delivery::Model>, DbErr> {
    deferred_on(key).all(conn).await
}

/// The `limit` deliveries deferred the longest.
pub async fn longest_deferred<C: ConnectionTrait>(
    conn: &C,
    limit: u64,
) -> Result<Vec<delivery::Model>, DbErr> {
    oldest_deferred(limit).all(conn).await
}

/// Claims the re-decision of the deferred delivery `id`: true for the one
/// re-decider that finds it still deferred (on PostgreSQL the row stays
/// locked until its transaction ends; others then find it decided).
pub async fn claim_redecision<C: ConnectionTrait>(conn: &C, id: &str) -> Result<bool, DbErr> {
    let claimed = delivery::Entity::update_many()
        .col_expr(
            delivery::Column::Decision,
            sea_orm::sea_query::Expr::value(Action::Defer.as_str()),
        )
        .filter(delivery::Column::DeliveryId.eq(id))
        .filter(delivery::Column::Decision.eq(Action::Defer.as_str()))
        .exec(conn)
        .await?
        .rows_affected;
    Ok(claimed == 1)
}

/// The columns a reception sets; key and decision columns empty.
fn received_columns(
    id: &str,
    origin: &Origin,
    received_at: DateTime<Utc>,
    status: &str,
) -> delivery::ActiveModel {
    delivery::ActiveModel {
        delivery_id: Set(id.to_owned()),
        source: Set(origin.source.clone()),
        tenant: Set(origin.tenant.clone()),
        provider: Set(origin.provider.clone()),
        environment: Set(origin.environment.clone()),
        received_at: Set(received_at),
        status: Set(status.to_owned()),
        event_type: Set(None),
        provider_event_id: Set(None),
        transport_key: Set(None),
        business_key: Set(None),
        strategy: Set(None),
        strength: Set(None),
        decision: Set(None),
        reason: Set(None),
        layer: Set(None),
        reference_delivery_id: Set(None),
        effect_id: Set(None),
        case_id: Set(None),
        decided_at: Set(None),
        resource: Set(None),
    }
}

/// Sets the columns a derived key fills.
fn set_key_columns(row: &mut delivery::ActiveModel, e: &KeyDerived) {
    let business = e.business.as_ref();
    row.event_type = Set(e.event_type.clone());
    row.provider_event_id = Set(e.provider_event_id.clone());
    row.transport_key = Set(Some(e.transport_key.clone()));
    row.business_key = Set(business.map(|b| b.key.clone()));
    row.strategy = Set(business.map(|b| b.strategy.clone()));
    row.strength = Set(business.map(|b| b.strength.as_str().to_owned()));
    row.resource = Set(e.resource.clone());
}

/// Sets the columns a decision fills.
fn set_decision_columns(row: &mut delivery::ActiveModel, e: &DecisionMade, at: DateTime<Utc>) {
    let d = &e.decision;
    row.decision = Set(Some(d.action.as_str().to_owned()));
    row.reason = Set(Some(d.reason.as_str().to_owned()));
    row.layer = Set(Some(e.layer.as_str().to_owned()));
    row.reference_delivery_id = Set(d.reference_delivery.map(|r| r.to_string()));
    row.effect_id = Set(d.effect_id.map(|r| r.to_string()));
    row.case_id = Set(e.case_id.map(|r| r.to_string()));
    row.decided_at = Set(Some(at));
}

/// An update touching nothing but what the setter fills.
fn untouched() -> delivery::ActiveModel {
    delivery::ActiveModel {
        delivery_id: NotSet,
        source: NotSet,
        tenant: NotSet,
        provider: NotSet,
        environment: NotSet,
        received_at: NotSet,
        status: NotSet,
        event_type: NotSet,
        provider_event_id: NotSet,
        transport_key: NotSet,
        business_key: NotSet,
        strategy: NotSet,
        strength: NotSet,
        decision: NotSet,
        reason: NotSet,
        layer: NotSet,
        reference_delivery_id: NotSet,
        effect_id: NotSet,
        case_id: NotSet,
        decided_at: NotSet,
        resource: NotSet,
    }
}

async fn insert_row<C: ConnectionTrait>(
    conn: &C,
    row: delivery::ActiveModel,
) -> Result<u64, DbErr> {
    delivery::Entity::insert(row)
        .on_conflict_do_nothing()
        .exec_without_returning(conn)
        .await
        .map(rows)
}

async fn update_row<C: ConnectionTrait>(
    conn: &C,
    id: &str,
    row: delivery::ActiveModel,
) -> Result<u64, DbErr> {
    Ok(delivery::Entity::update_many()
        .set(row)
        .filter(delivery::Column::DeliveryId.eq(id))
        .exec(conn)
        .await?
        .rows_affected)
}

pub(super) async fn insert<C: ConnectionTrait>(
    conn: &C,
    id: &str,
    origin: &Origin,
    received_at: DateTime<Utc>,
    status: &str,
) -> Result<u64, DbErr> {
    insert_row(conn, received_columns(id, origin, received_at, status)).await
}

pub(super) async fn key_derived<C: ConnectionTrait>(
    conn: &C,
    id: &str,
    e: &KeyDerived,
    at: DateTime<Utc>,
) -> Result<u64, DbErr> {
    let mut row = untouched();
    set_key_columns(&mut row, e);
    update_row(conn, id, row).await?;
    insert_transport_link(conn, id, e, at).await
}

/// The link a first reception of a transport identity writes.
pub fn transport_link(id: &str, e: &KeyDerived, at: DateTime<Utc>) -> transport_link::Model {
    transport_link::Model {
        transport_key: e.transport_key.clone(),
        first_delivery_id: id.to_owned(),
        body_fingerprint: e.body_fingerprint.clone().unwrap_or_default(),
        business_key: e.business.as_ref().map(|b| b.key.clone()),
        created_at: at,
    }
}

/// The first reception of a transport identity; later ones link to it.
/// Returns 1 when this delivery is that first reception.
pub async fn insert_transport_link<C: ConnectionTrait>(
    conn: &C,
    id: &str,
    e: &KeyDerived,
    at: DateTime<Utc>,
) -> Result<u64, DbErr> {
    transport_link::Entity::insert(transport_link(id, e, at).into_active_model().reset_all())
        .on_conflict_do_nothing()
        .exec_without_returning(conn)
        .await
        .map(rows)
}

pub(super) async fn decision_made<C: ConnectionTrait>(
    conn: &C,
    id: &str,
    e: &DecisionMade,
    at: DateTime<Utc>,
) -> Result<u64, DbErr> {
    let mut row = untouched();
    set_decision_columns(&mut row, e, at);
    let changed = update_row(conn, id, row).await?;
    // Its case is the cases projection's (`cases::apply`).
    let mut rows = Deferred::default();
    link_to_effect(&mut rows, id, e, at);
    rows.flush(conn).await?;
    Ok(changed)
}

/// The live path's one row for a new delivery, before its decision: what
/// replaying its `DeliveryReceived` and `KeyDerived` (but the transport link,
/// written when the link is claimed) would write.
pub fn received_row(
    id: &str,
    received: &DeliveryReceived,
    derived: &KeyDerived,
) -> delivery::ActiveModel {
    let mut row = received_columns(id, &received.origin, received.received_at, "received");
    set_key_columns(&mut row, derived);
    row
}

/// Completes `row` with what replaying `DecisionMade` would write, and defers
/// the decision's consequences (a case, a link to the effect).
pub fn decide_row(
    rows: &mut Deferred,
    row: &mut delivery::ActiveModel,
    id: &str,
    made: &DecisionMade,
    at: DateTime<Utc>,
) {
    set_decision_columns(row, made, at);
    if let Some(case) = cases::opened_by_decision(id, made) {
        rows.case(cases::row(case, at));
    }
    link_to_effect(rows, id, made, at);
}

/// An ignored delivery is linked to the effect it asked for again.
fn link_to_effect(rows: &mut Deferred, id: &str, e: &DecisionMade, at: DateTime<Utc>) {
    let d = &e.decision;
    if let (Action::Ignore, Some(effect_id)) = (d.action, d.effect_id) {
        rows.effect_link(&effect_id.to_string(), id, at);
    }
}

#[cfg(test)]
mod tests {
    use sea_orm::ConnectionTrait;

    use super::*;

    #[tokio::test]
    async fn deferred_lookups_read_the_partial_indexes_not_the_table() {
        let (_dir, db) = crate::store::test_database().await;
        // Many decided deliveries, two deferred, and statistics that say so:
        // the planner's choice then follows from the indexes, not from an
        // empty table (any plan is cheapest on an empty table).
        let origin = Origin {
            source: "s".into(),
            tenant: "t".into(),
            provider: "p".into(),
            environment: "e".into(),
        };
        let rows = (0..300).map(|i| {
            let mut row = received_columns(&format!("d{i}"), &origin, Utc::now(), "received");
            row.business_key = Set(Some(format!("k{}", i % 150)));
            row.decision = Set(Some(if i < 2 { "defer" } else { "process" }.to_owned()));
            row
        });
        delivery::Entity::insert_many(rows)
            .exec_without_returning(&db)
            .await
            .unwrap();
        db.execute_unprepared("ANALYZE").await.unwrap();
        for (query, index) in [
            // A key has few deliveries: the key's index, then their decision.
            (deferred_on("k"), "deliveries_business_key"),
            (oldest_deferred(10), "deliveries_deferred"),
        ] {
            let plan = crate::store::sqlite_plan(&db, &query).await;
            assert!(
                plan.iter()
                    .any(|step| step.ends_with(&format!("USING INDEX {index}"))
                        || step.contains(&format!("USING INDEX {index} "))),
                "{plan:?}"
            );
            // Scanning the partial index is reading only deferred rows.
            assert!(
                !plan.iter().any(|step| step == "SCAN deliveries"),
                "{plan:?}"
            );
        }
    }
}
