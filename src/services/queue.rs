//! The ambiguity queue: open cases oldest first, filtered the way operators
//! ask ("money cases of stripe older than a day"). The store filters on what
//! the cases projection holds; the kind of effect a case decides about (its
//! effect type, whether it is critical) is a property of the strategy that
//! derived its key, so those filters become a set of strategies here.

use std::collections::HashMap;

use chrono::Utc;

use super::cases::CaseError;
use super::engine::SharedEngine;
use crate::domain::confidence::Criticality;
use crate::domain::delivery::DeliveryId;
use crate::domain::identity::Catalog;
use crate::domain::journal::JournalEvent;
use crate::domain::journal::audit::{self, Who};
pub use crate::store::cases::QueueFilter;
use crate::store::cases::{KeyScope, QueueDelivery};
use crate::store::entities::case;
use crate::store::journal;

/// The queue's filters in operators' terms.
#[derive(Debug, Clone, Default)]
pub struct CaseFilter {
    pub queue: QueueFilter,
    /// Only cases about this effect type (`refund.create`, ...).
    pub effect_type: Option<String>,
    /// Only critical (money, rights, stock) cases, or only the others. A
    /// case without a key counts as critical, as when it is resolved.
    pub critical: Option<bool>,
}

/// One case as the queue lists it.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct CaseRow {
    pub case_id: String,
    pub delivery_id: String,
    pub business_key: Option<String>,
    pub action: String,
    pub reason: String,
    pub status: String,
    pub opened_at: chrono::DateTime<Utc>,
    pub resolution: Option<String>,
    /// Who resolved it: an operator's or token's name, or what did (a look-up).
    pub resolved_by: Option<String>,
    pub resolved_at: Option<chrono::DateTime<Utc>>,
    /// The provider's reference the resolution recorded (its operation, the
    /// proof a "process as distinct" rests on), when one was given.
    pub resolution_reference: Option<String>,
    /// Who the case was given to.
    pub assignee: Option<String>,
    /// `name@version` of the strategy that derived the key.
    pub strategy: Option<String>,
    pub effect_type: Option<String>,
    pub critical: bool,
    pub source: Option<String>,
    pub provider: Option<String>,
    pub event_type: Option<String>,
}

/// One page of the queue and the counts per reason of its status.
pub struct QueuePage {
    pub cases: Vec<CaseRow>,
    pub counts: Vec<(String, i64)>,
    /// Where the next page starts, if there is one.
    pub next_offset: Option<u64>,
}

/// The queue's page at `offset` (at most `limit` cases), oldest first.
pub async fn queue(
    engine: &SharedEngine,
    filter: &CaseFilter,
    limit: u64,
    offset: u64,
) -> Result<QueuePage, CaseError> {
    super::projector::before_reading(engine).await;
    let db = &engine.db;
    let mut store_filter = filter.queue.clone();
    store_filter.keys = key_scope(&engine.catalog, filter);
    let mut cases = crate::store::cases::queue(db, &store_filter, limit + 1, offset).await?;
    let more = cases.len() as u64 > limit;
    cases.truncate(limit as usize);
    let ids: Vec<&str> = cases.iter().map(|c| c.delivery_id.as_str()).collect();
    let deliveries = crate::store::cases::queue_deliveries(db, &ids).await?;
    let mut references = references(db, &cases).await?;
    // A reference the downstream gave (a status look-up's) may echo what
    // it was sent: masked as the delivery's own page masks it.
    for case in &cases {
        if let (Some(reference), Ok(id)) = (
            references.get_mut(&case.case_id),
            case.delivery_id.parse::<DeliveryId>(),
        ) {
            let sensitive = super::deliveries::sensitive_of(engine, id).await?;
            *reference = sensitive.scrub_text(reference);
        }
    }
    let counts = crate::store::cases::counts_matching(db, &store_filter).await?;
    Ok(QueuePage {
        cases: cases
            .into_iter()
            .map(|c| {
                let reference = references.get(&c.case_id).cloned();
                row(&engine.catalog, &deliveries, c, reference)
            })
            .collect(),
        counts,
        next_offset: more.then_some(offset + limit),
    })
}

/// The provider's reference each resolved case of `cases` was resolved
/// with, by case id: the cases projection keeps how and by whom, the
/// journal's `CaseResolved` the rest, read for this page's deliveries only
/// (and, when one is listed, the resolutions of reconciliation's findings,
/// which have no delivery).
async fn references(
    db: &sea_orm::DatabaseConnection,
    cases: &[case::Model],
) -> Result<HashMap<String, String>, CaseError> {
    let resolved: Vec<&case::Model> = cases.iter().filter(|c| c.resolution.is_some()).collect();
    let with_delivery: Vec<&str> = resolved
        .iter()
        .filter(|c| !c.delivery_id.is_empty())
        .map(|c| c.delivery_id.as_str())
        .collect();
    let read = |e: crate::store::journal::ReadError| sea_orm::DbErr::Custom(e.to_string());
    let mut events = journal::for_deliveries(db, &with_delivery, &["CaseResolved"])
        .await
        .map_err(read)?;
    if resolved.iter().any(|c| c.delivery_id.is_empty()) {
        events.extend(
            journal::without_delivery(db, &["CaseResolved"])
                .await
                .map_err(read)?,
        );
    }
    Ok(events
        .into_iter()
        .filter_map(|stored| match stored.event {
            JournalEvent::CaseResolved(r) => r
                .authoritative_ref
                .map(|reference| (r.case_id.to_string(), reference)),
            _ => None,
        })
        .collect())
}

/// The strategies whose keys a case must have to pass the effect-type and
/// criticality filters; `None` when neither is asked for.
fn key_scope(catalog: &Catalog, filter: &CaseFilter) -> Option<KeyScope> {
    if filter.effect_type.is_none() && filter.critical.is_none() {
        return None;
    }
    let strategies = catalog
        .strategies()
        .filter(|s| {
            filter
                .effect_type
                .as_deref()
                .is_none_or(|t| s.effect_type == t)
        })
        .filter(|s| {
            filter
                .critical
                .is_none_or(|c| c == (s.criticality == Criticality::Critical))
        })
        .map(|s| s.strategy_ref().to_string())
        .collect();
    Some(KeyScope {
        strategies,
        keyless: filter.effect_type.is_none() && filter.critical == Some(true),
    })
}

fn row(
    catalog: &Catalog,
    deliveries: &[QueueDelivery],
    c: case::Model,
    resolution_reference: Option<String>,
) -> CaseRow {
    let strategy = c.business_key.as_deref().and_then(|key| catalog.keyed(key));
    let delivery = deliveries.iter().find(|d| d.delivery_id == c.delivery_id);
    CaseRow {
        strategy: strategy.map(|s| s.strategy_ref().to_string()),
        effect_type: strategy.map(|s| s.effect_type.clone()),
        critical: strategy.is_none_or(|s| s.criticality == Criticality::Critical),
        source: delivery.map(|d| d.source.clone()),
        provider: delivery.map(|d| d.provider.clone()),
        event_type: delivery.and_then(|d| d.event_type.clone()),
        case_id: c.case_id,
        delivery_id: c.delivery_id,
        business_key: c.business_key,
        action: c.action,
        reason: c.reason,
        status: c.status,
        opened_at: c.opened_at,
        resolution: c.resolution,
        resolved_by: c.resolved_by.as_deref().map(|by| match audit::stored(by) {
            Who::Named(name) | Who::Id(name) => name,
            Who::System(what) => what.to_owned(),
            Who::Unknown(_) => "an unknown name".to_owned(),
        }),
        resolved_at: c.resolved_at,
        resolution_reference,
        assignee: c.assignee,
    }
}

/// The effect types of the catalog's strategies, sorted (the queue's filter).
pub fn effect_types(catalog: &Catalog) -> Vec<String> {
    let mut types: Vec<String> = catalog
        .strategies()
        .map(|s| s.effect_type.clone())
        .collect();
    types.sort();
    types.dedup();
    types
}
