//! Projection `deliveries` (the read model: one row per delivery, latest
//! decision), and what a decision writes before the commit beside it:
//! `transport_links` (first reception of each transport identity),
//! `deferred_deliveries` (the deliveries waiting for their key) and the
//! links of ignored deliveries to their effects.
//!
//! The read model follows the journal after the commit (`store::projector`):
//! `Fold` builds its rows from a stretch of events, replayed one by one
//! (insert, then key columns, then decision columns) or folded in one journal
//! row, through the same column builders, so both reach the same row.

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveModelTrait,
    ActiveValue::{NotSet, Set},
    ColumnTrait, ConnectionTrait, DbErr, EntityTrait, IntoActiveModel, QueryFilter, QueryOrder,
    QuerySelect, Select,
};

use std::collections::HashMap;

use super::cases;
use super::horizons::Horizons;
use super::rows as rows_of;
use crate::domain::decision::Action;
use crate::domain::journal::{DecisionMade, DeliveryReceived, JournalEvent, KeyDerived, Origin};
use crate::domain::search;
use crate::store::bulk;
use crate::store::deferred::Deferred;
use crate::store::entities::{deferred_delivery, delivery, transport_link};

/// The deliveries deferred on `key` (a query, to read its plan in tests).
fn deferred_on(key: &str) -> Select<deferred_delivery::Entity> {
    deferred_delivery::Entity::find().filter(deferred_delivery::Column::BusinessKey.eq(key))
}

/// The `limit` deliveries deferred the longest (a query).
fn oldest_deferred(limit: u64) -> Select<deferred_delivery::Entity> {
    deferred_delivery::Entity::find()
        .order_by_asc(deferred_delivery::Column::ReceivedAt)
        .limit(limit)
}

/// The deliveries deferred on `key`, to decide again.
pub async fn waiting_on<C: ConnectionTrait>(
    conn: &C,
    key: &str,
) -> Result<Vec<deferred_delivery::Model>, DbErr> {
    deferred_on(key).all(conn).await
}

/// The `limit` deliveries deferred the longest.
pub async fn longest_deferred<C: ConnectionTrait>(
    conn: &C,
    limit: u64,
) -> Result<Vec<deferred_delivery::Model>, DbErr> {
    oldest_deferred(limit).all(conn).await
}

/// Claims the re-decision of the deferred delivery `id`: true for the one
/// re-decider that finds it still deferred (the row stays locked until its
/// transaction ends; others then find it decided, its row gone).
pub async fn claim_redecision<C: ConnectionTrait>(conn: &C, id: &str) -> Result<bool, DbErr> {
    let claimed = deferred_delivery::Entity::update_many()
        .col_expr(
            deferred_delivery::Column::DeliveryId,
            sea_orm::sea_query::Expr::col(deferred_delivery::Column::DeliveryId),
        )
        .filter(deferred_delivery::Column::DeliveryId.eq(id))
        .exec(conn)
        .await?
        .rows_affected;
    Ok(claimed == 1)
}

/// What a delivery's deferral row holds, known from its reception: built
/// with the reception's other rows, outside the writer.
#[derive(Debug, Clone)]
pub struct Arrival {
    source: String,
    business_key: Option<String>,
    received_at: DateTime<Utc>,
}

impl Arrival {
    pub fn new(received: &DeliveryReceived, derived: &KeyDerived) -> Self {
        Self {
            source: received.origin.source.clone(),
            business_key: derived.business.as_ref().map(|b| b.key.clone()),
            received_at: received.received_at,
        }
    }

    /// The deferral row of delivery `id`, filed under the key `made` waits
    /// on: the one it matched (an older version's, when a server of the
    /// version before holds the reservation), which is the key whose
    /// settlement wakes it — else its own. None for a delivery with no key:
    /// a batch answered "defer" for one of its items, which waits in a row
    /// of its own; the batch itself waits on nothing.
    fn row(&self, id: &str, made: &DecisionMade) -> Option<deferred_delivery::ActiveModel> {
        let waits_on = made
            .matched_key
            .as_deref()
            .map(|key| crate::domain::plan::base_key(key).to_owned())
            .or_else(|| self.business_key.clone())?;
        Some(deferred_delivery::ActiveModel {
            delivery_id: Set(id.to_owned()),
            source: Set(self.source.clone()),
            business_key: Set(Some(waits_on)),
            received_at: Set(self.received_at),
        })
    }
}

/// The columns a reception sets; key and decision columns empty.
fn received_columns(
    id: &str,
    origin: &Origin,
    (received_at, position): (DateTime<Utc>, i64),
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
        received_position: Set(Some(position)),
    }
}

/// Sets the columns a derived key fills.
fn set_key_columns(row: &mut delivery::ActiveModel, e: &KeyDerived) {
    let business = e.business.as_ref();
    row.event_type = Set(e.event_type.clone());
    // A longer id stays in the journal, unsearchable: rows journaled before
    // 2026-12-07 kept any length, and one stopped the read model.
    row.provider_event_id = Set(search::searchable_id(e.provider_event_id.as_deref()));
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
        received_position: NotSet,
    }
}

/// The read model's rows for a stretch of the journal, folded in journal
/// order: the rows of deliveries first seen in the stretch are completed in
/// memory and inserted many to a statement, in primary-key order; events on
/// deliveries inserted before it become updates, in journal order. The
/// keys' horizons the stretch adds and removes go with them (`Horizons`).
#[derive(Debug, Default)]
pub struct Fold {
    rows: Vec<delivery::ActiveModel>,
    new: HashMap<String, usize>,
    updates: Vec<(String, delivery::ActiveModel)>,
    horizons: Horizons,
}

impl Fold {
    /// Folds one event of delivery `id`, journaled at `at` in the row at
    /// `position` (events the read model does not show are ignored).
    pub fn add(&mut self, id: &str, event: &JournalEvent, (at, position): (DateTime<Utc>, i64)) {
        self.horizons.add(event);
        match event {
            JournalEvent::DeliveryReceived(e) => {
                let received = (e.received_at, position);
                self.insert(id, received_columns(id, &e.origin, received, "received"));
            }
            JournalEvent::DeliveryRejected(e) => {
                let received = (e.received_at, position);
                self.insert(id, received_columns(id, &e.origin, received, "rejected"));
            }
            JournalEvent::KeyDerived(e) => self.update(id, |row| set_key_columns(row, e)),
            JournalEvent::DecisionMade(e) => {
                self.update(id, |row| set_decision_columns(row, e, at));
            }
            _ => {}
        }
    }

    fn insert(&mut self, id: &str, row: delivery::ActiveModel) {
        if self.new.contains_key(id) {
            return;
        }
        self.new.insert(id.to_owned(), self.rows.len());
        self.rows.push(row);
    }

    fn update(&mut self, id: &str, set: impl FnOnce(&mut delivery::ActiveModel)) {
        match self.new.get(id) {
            Some(&at) => set(&mut self.rows[at]),
            None => {
                let mut row = untouched();
                set(&mut row);
                self.updates.push((id.to_owned(), row));
            }
        }
    }

    /// Writes the folded rows; returns how many deliveries it inserted.
    pub async fn write<C: ConnectionTrait>(self, conn: &C) -> Result<u64, DbErr> {
        let Self {
            mut rows,
            updates,
            horizons,
            ..
        } = self;
        rows.sort_by(|a, b| super::text_of(&a.delivery_id).cmp(super::text_of(&b.delivery_id)));
        let inserted = bulk::insert(conn, rows).await?;
        for (id, row) in updates {
            delivery::Entity::update_many()
                .set(row)
                .filter(delivery::Column::DeliveryId.eq(id))
                .exec(conn)
                .await?;
        }
        horizons.write(conn).await?;
        Ok(inserted)
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
        .map(rows_of)
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

/// What a decision writes before the commit, replayed: the link of an
/// ignored delivery to its effect, and its deferral row, kept while it is
/// deferred. A deferral's row is built from the delivery's reception, read
/// from the journal (a deferral is rare; the live path builds it ahead,
/// `decided`). Its case is the cases projection's (`cases::apply`). Returns
/// the deferral rows changed.
pub(super) async fn decision_made<C: ConnectionTrait>(
    conn: &C,
    id: &str,
    e: &DecisionMade,
    at: DateTime<Utc>,
) -> Result<u64, DbErr> {
    let mut rows = Deferred::default();
    link_to_effect(&mut rows, id, e, at);
    let changed = if e.decision.action == Action::Defer {
        let row = arrival_of(conn, id).await?.row(id, e);
        let waits = u64::from(row.is_some());
        rows.deferral(row);
        waits
    } else {
        deferred_delivery::Entity::delete_by_id(id.to_owned())
            .exec(conn)
            .await?
            .rows_affected
    };
    rows.flush(conn).await?;
    Ok(changed)
}

/// A delivery's arrival as its journaled reception says.
async fn arrival_of<C: ConnectionTrait>(conn: &C, id: &str) -> Result<Arrival, DbErr> {
    let missing = || DbErr::Custom(format!("delivery {id} is deferred but was never received"));
    let delivery_id = id.parse().map_err(|_| missing())?;
    let events = crate::store::journal::for_delivery(conn, delivery_id)
        .await
        .map_err(|e| DbErr::Custom(e.to_string()))?;
    let received = events.iter().find_map(|s| match &s.event {
        JournalEvent::DeliveryReceived(r) => Some(r),
        _ => None,
    });
    let derived = events.iter().find_map(|s| match &s.event {
        JournalEvent::KeyDerived(k) => Some(k),
        _ => None,
    });
    match (received, derived) {
        (Some(received), Some(derived)) => Ok(Arrival::new(received, derived)),
        _ => Err(missing()),
    }
}

/// Defers what a new delivery's decision writes before the commit: the case
/// it opens, the link of an ignored delivery to its effect, the row of a
/// deferred one.
pub fn decided(
    rows: &mut Deferred,
    arrival: &Arrival,
    id: &str,
    made: &DecisionMade,
    at: DateTime<Utc>,
) {
    if let Some(case) = cases::opened_by_decision(id, made) {
        rows.case(cases::row(case, at));
    }
    link_to_effect(rows, id, made, at);
    if made.decision.action == Action::Defer {
        rows.deferral(arrival.row(id, made));
    }
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
    async fn deferred_lookups_read_their_indexes_not_the_table() {
        let (_dir, db) = crate::store::test_database().await;
        // Many deferred deliveries, on 150 keys, and statistics that say so:
        // the planner's choice then follows from the indexes, not from an
        // empty table (any plan is cheapest on an empty table).
        let rows = (0..300).map(|i| deferred_delivery::ActiveModel {
            delivery_id: Set(format!("d{i}")),
            source: Set("s".to_owned()),
            business_key: Set(Some(format!("k{}", i % 150))),
            received_at: Set(Utc::now()),
        });
        deferred_delivery::Entity::insert_many(rows)
            .exec_without_returning(&db)
            .await
            .unwrap();
        db.execute_unprepared("ANALYZE").await.unwrap();
        for (query, index) in [
            (deferred_on("k"), "deferred_deliveries_by_key"),
            (oldest_deferred(10), "deferred_deliveries_oldest"),
        ] {
            let plan = crate::store::sqlite_plan(&db, &query).await;
            assert!(
                plan.iter()
                    .any(|step| step.ends_with(&format!("USING INDEX {index}"))
                        || step.contains(&format!("USING INDEX {index} "))),
                "{plan:?}"
            );
            assert!(
                !plan.iter().any(|step| step == "SCAN deferred_deliveries"),
                "{plan:?}"
            );
        }
    }
}
