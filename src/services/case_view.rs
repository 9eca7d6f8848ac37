//! A case as the case page (and `GET /api/cases/{id}`, and its fixture)
//! shows it: the case, its delivery and the reference delivery side by side
//! (both masked), what differs between them field by field (discriminating
//! and volatile fields marked), the effect it is about, and its history —
//! opening, comments, look-ups and resolution, read from the journal.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use sea_orm::DbErr;
use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

use super::cases::{CaseError, existing_effect, is_critical};
use super::deliveries::{self, DeliveryView, EventView, ShowError};
use super::engine::SharedEngine;
use crate::config::Source;
use crate::domain::delivery::DeliveryId;
use crate::domain::diff::{FieldChange, diff};
use crate::domain::identity::Catalog;
use crate::domain::journal::{
    CaseCommented, CaseResolved, KeyDerived, LookupPerformed, ProviderOperation,
};
use crate::domain::masking::SensitiveMask;

/// One case, everything a person needs to decide it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct CaseView {
    pub case_id: String,
    pub status: String,
    pub action: String,
    pub reason: String,
    pub business_key: Option<String>,
    pub opened_at: DateTime<Utc>,
    pub resolved_at: Option<DateTime<Utc>>,
    pub resolution: Option<String>,
    pub resolved_by: Option<String>,
    /// The operator the case was given to.
    pub assignee: Option<String>,
    pub details: serde_json::Value,
    /// The effect is critical (money, rights, stock): only finance or an
    /// admin may resolve it. A case without a key counts as critical.
    pub critical: bool,
    /// The delivery the case is about; none for an operation the provider
    /// made that never arrived as a delivery (a `missing_effect` case).
    pub delivery: Option<DeliveryView>,
    pub reference: Option<DeliveryView>,
    /// Field by field, the reference's body against this delivery's;
    /// discriminating fields (of the strategy that keyed it) marked.
    #[schema(value_type = Vec<Object>)]
    pub changes: Vec<MarkedChange>,
    /// The strategy that derived the delivery's key.
    #[schema(value_type = Option<Object>)]
    pub strategy: Option<StrategyUsed>,
    /// What the strategy discriminates on (amount, currency, ...), for this
    /// delivery and the reference, side by side.
    #[schema(value_type = Vec<Object>)]
    pub figures: Vec<Figure>,
    /// The effect the delivery was compared with.
    #[schema(value_type = Option<Object>)]
    pub existing_effect: Option<EffectState>,
    /// The effect a "process as distinct" resolution applied.
    #[schema(value_type = Option<Object>)]
    pub applied_effect: Option<EffectState>,
    /// Opening, comments, look-ups and the resolution, oldest first.
    #[schema(value_type = Vec<Object>)]
    pub history: Vec<CaseEvent>,
    /// The provider's operation a reconciliation case is about.
    #[schema(value_type = Option<Object>)]
    pub operation: Option<ProviderOperation>,
}

/// One differing field, and how the strategy treats it.
#[derive(Debug, Serialize)]
pub struct MarkedChange {
    #[serde(flatten)]
    pub change: FieldChange,
    pub discriminating: bool,
    /// Why the provider or strategy drops it before keying, when it does.
    pub volatile: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct StrategyUsed {
    /// `name@version`.
    pub strategy: String,
    pub strength: String,
    pub effect_type: String,
}

/// One discriminating value of both deliveries.
#[derive(Debug, Serialize)]
pub struct Figure {
    pub name: String,
    pub delivery: Option<Value>,
    pub reference: Option<Value>,
}

/// An effect of the ledger and where it stands.
#[derive(Debug, Serialize)]
pub struct EffectState {
    pub effect_id: String,
    pub key: String,
    pub status: String,
    /// The downstream's id of the applied effect.
    pub downstream_ref: Option<String>,
    /// The provider's operation the effect was applied for.
    pub provider_ref: Option<String>,
}

/// One step of a case's life.
#[derive(Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CaseEvent {
    Opened {
        at: DateTime<Utc>,
        summary: String,
    },
    Commented {
        at: DateTime<Utc>,
        by: String,
        note: String,
    },
    LookedUp {
        at: DateTime<Utc>,
        url: String,
        status: Option<u16>,
        latency_ms: u64,
        operations: Vec<ProviderOperation>,
        error: Option<String>,
        verdict: String,
        /// Why the answer left the case for a person.
        why: Option<String>,
    },
    Resolved {
        at: DateTime<Utc>,
        resolution: String,
        by: String,
        note: String,
        authoritative_ref: Option<String>,
        effect_id: Option<Uuid>,
    },
}

/// The case `case_id` with both deliveries and their differences.
pub async fn show(
    engine: &SharedEngine,
    sources: &HashMap<String, Arc<Source>>,
    case_id: Uuid,
) -> Result<CaseView, CaseError> {
    let mut case = crate::store::cases::find(&engine.db, case_id)
        .await?
        .ok_or(CaseError::NotFound)?;
    // A collision opened before 2026-12-07 named both bodies' fingerprints.
    let mut fingerprints = SensitiveMask::default();
    for digest in crate::domain::plan::journaled_fingerprints(&case.details) {
        fingerprints.hide_fingerprint(&digest, &engine.key_secret);
    }
    fingerprints.scrub(&mut case.details);
    let delivery = match case.delivery_id.parse::<DeliveryId>() {
        Ok(id) => Some(view(engine, sources, id).await?),
        Err(_) => None,
    };
    let reference_id = case
        .details
        .get("reference_delivery_id")
        .and_then(|v| v.as_str())
        .and_then(|id| id.parse::<DeliveryId>().ok());
    let reference = match reference_id {
        Some(reference) => Some(view(engine, sources, reference).await?),
        None => None,
    };
    let provider = delivery
        .as_ref()
        .map(|d| d.origin.provider.as_str())
        .or_else(|| case.details.get("provider").and_then(Value::as_str));
    let marks = Marks::of(&engine.catalog, case.business_key.as_deref(), provider);
    let critical = is_critical(engine, case_id).await?;
    let changes = match (
        &reference,
        delivery.as_ref().and_then(|d| d.body.as_ref()),
        reference.as_ref().and_then(|r| r.body.as_ref()),
    ) {
        (Some(_), Some(new), Some(old)) => diff(old, new)
            .into_iter()
            .map(|change| marks.mark(change))
            .collect(),
        _ => Vec::new(),
    };
    let key = delivery.as_ref().and_then(key_of);
    let reference_key = reference.as_ref().and_then(key_of);
    let unattached;
    let events = match &delivery {
        Some(d) => d.events.as_slice(),
        None => {
            unattached = events_without_delivery(engine).await?;
            unattached.as_slice()
        }
    };
    let history = history(case_id, &case.details, case.opened_at, events);
    let operation = case
        .details
        .get("operation")
        .and_then(|o| serde_json::from_value(o.clone()).ok());
    let applied = history.iter().find_map(|e| match e {
        CaseEvent::Resolved {
            effect_id: Some(id),
            resolution,
            ..
        } if resolution == "process_as_distinct" => Some(*id),
        _ => None,
    });
    let shown: Vec<&DeliveryView> = delivery.iter().chain(&reference).collect();
    let existing_effect = effect(engine, sources, existing_effect(&case), &shown).await?;
    let applied_effect = effect(engine, sources, applied, &shown).await?;
    Ok(CaseView {
        case_id: case.case_id,
        status: case.status,
        action: case.action,
        reason: case.reason,
        business_key: case.business_key,
        opened_at: case.opened_at,
        resolved_at: case.resolved_at,
        resolution: case.resolution,
        resolved_by: case.resolved_by,
        assignee: case.assignee,
        details: case.details,
        critical,
        delivery,
        reference,
        changes,
        strategy: key.as_ref().and_then(|k| {
            let business = k.business.as_ref()?;
            Some(StrategyUsed {
                strategy: business.strategy.clone(),
                strength: business.strength.as_str().to_owned(),
                effect_type: business.effect_type.clone(),
            })
        }),
        figures: figures(key.as_ref(), reference_key.as_ref()),
        existing_effect,
        applied_effect,
        history,
        operation,
    })
}

async fn view(
    engine: &SharedEngine,
    sources: &HashMap<String, Arc<Source>>,
    id: DeliveryId,
) -> Result<DeliveryView, CaseError> {
    deliveries::show(engine, sources, id)
        .await
        .map_err(|error| match error {
            ShowError::NotFound => CaseError::NotFound,
            ShowError::Db(db) => CaseError::Db(db),
            other => CaseError::Db(DbErr::Custom(other.to_string())),
        })
}

/// What the strategy of the case's key says about each body path.
struct Marks {
    discriminating: Vec<String>,
    /// `(path, reason)`: the provider's volatile fields, then the strategy's.
    volatile: Vec<(String, String)>,
}

impl Marks {
    fn of(catalog: &Catalog, key: Option<&str>, provider: Option<&str>) -> Self {
        let strategy = key.and_then(|key| catalog.keyed(key));
        let provider = provider.and_then(|p| catalog.provider(p));
        let volatile = provider
            .map(|p| p.volatile.iter())
            .into_iter()
            .flatten()
            .chain(
                strategy
                    .map(|s| s.normalize.volatile.iter())
                    .into_iter()
                    .flatten(),
            )
            .map(|v| (v.path.as_str().to_owned(), v.reason.clone()))
            .collect();
        Self {
            discriminating: strategy
                .map(|s| {
                    s.discriminants
                        .iter()
                        .map(|d| d.path.as_str().to_owned())
                        .collect()
                })
                .unwrap_or_default(),
            volatile,
        }
    }

    fn mark(&self, change: FieldChange) -> MarkedChange {
        let within = |path: &str| {
            change.path == path
                || change
                    .path
                    .strip_prefix(path)
                    .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
        };
        MarkedChange {
            discriminating: self.discriminating.iter().any(|p| within(p)),
            volatile: self
                .volatile
                .iter()
                .find(|(p, _)| within(p))
                .map(|(_, reason)| reason.clone()),
            change,
        }
    }
}

/// The identity derived for a delivery, as its (masked) view shows it.
fn key_of(delivery: &DeliveryView) -> Option<KeyDerived> {
    serde_json::from_value(delivery.identity.clone()?).ok()
}

/// The discriminating values of both sides, by name, in the delivery's order.
fn figures(delivery: Option<&KeyDerived>, reference: Option<&KeyDerived>) -> Vec<Figure> {
    let mine = delivery
        .and_then(|k| k.business.as_ref())
        .map(|b| &b.discriminants);
    let theirs = reference
        .and_then(|k| k.business.as_ref())
        .map(|b| &b.discriminants);
    let mut names: Vec<&String> = mine
        .into_iter()
        .chain(theirs)
        .flat_map(|d| d.keys())
        .collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .map(|name| Figure {
            name: name.clone(),
            delivery: mine.and_then(|d| d.get(name)).cloned(),
            reference: theirs.and_then(|d| d.get(name)).cloned(),
        })
        .collect()
}

/// Effect `id` as the ledger holds it, its references masked as the page of
/// the delivery that first caused it masks them (`shown`, or read): the
/// downstream's answer may echo what it was sent whole. A reference that
/// page does not show is not shown here either.
async fn effect(
    engine: &SharedEngine,
    sources: &HashMap<String, Arc<Source>>,
    id: Option<Uuid>,
    shown: &[&DeliveryView],
) -> Result<Option<EffectState>, CaseError> {
    let Some(id) = id else {
        return Ok(None);
    };
    let Some(effect) = crate::store::ledger::effect(&engine.db, id).await? else {
        return Ok(None);
    };
    let read;
    let first = match shown
        .iter()
        .find(|d| d.delivery_id.to_string() == effect.first_delivery_id)
    {
        Some(first) => Some(*first),
        None => match effect.first_delivery_id.parse::<DeliveryId>() {
            Ok(first) => {
                read = view(engine, sources, first).await?;
                Some(&read)
            }
            Err(_) => None,
        },
    };
    let masked = first
        .into_iter()
        .flat_map(|first| &first.effects)
        .find(|masked| masked.effect_id == effect.effect_id);
    Ok(Some(EffectState {
        effect_id: effect.effect_id,
        key: effect.key,
        status: crate::domain::reservation::ReservationState::shown(&effect.state),
        downstream_ref: masked.and_then(|m| m.downstream_ref.clone()),
        provider_ref: masked.and_then(|m| m.provider_ref.clone()),
    }))
}

/// The case events journaled with no delivery (a reconciliation finding's
/// resolution and comments); `history` keeps those of one case.
async fn events_without_delivery(engine: &SharedEngine) -> Result<Vec<EventView>, CaseError> {
    let stored = crate::store::journal::without_delivery(
        &engine.db,
        &["CaseCommented", "LookupPerformed", "CaseResolved"],
    )
    .await
    .map_err(|e| DbErr::Custom(e.to_string()))?;
    Ok(stored
        .into_iter()
        .map(|s| EventView {
            position: s.position,
            event_type: s.event.event_type(),
            version: s.event.version(),
            recorded_at: s.recorded_at,
            data: s.event.data(),
        })
        .collect())
}

/// The case's life from its delivery's journal: the events about this case.
fn history(
    case_id: Uuid,
    details: &Value,
    opened_at: DateTime<Utc>,
    events: &[EventView],
) -> Vec<CaseEvent> {
    let summary = details
        .get("summary")
        .and_then(Value::as_str)
        .unwrap_or("opened for review")
        .to_owned();
    let mut history = vec![CaseEvent::Opened {
        at: opened_at,
        summary,
    }];
    for e in events {
        let data = e.data.clone();
        let at = e.recorded_at;
        let step = match e.event_type {
            "CaseCommented" => serde_json::from_value::<CaseCommented>(data)
                .ok()
                .filter(|c| c.case_id == case_id)
                .map(|c| CaseEvent::Commented {
                    at,
                    by: c.commented_by,
                    note: c.note,
                }),
            "LookupPerformed" => serde_json::from_value::<LookupPerformed>(data)
                .ok()
                .filter(|l| l.case_id == case_id)
                .map(|l| CaseEvent::LookedUp {
                    at,
                    url: l.url,
                    status: l.status,
                    latency_ms: l.latency_ms,
                    operations: l.operations,
                    error: l.error,
                    verdict: l.verdict,
                    why: l.why,
                }),
            "CaseResolved" => serde_json::from_value::<CaseResolved>(data)
                .ok()
                .filter(|r| r.case_id == case_id)
                .map(|r| CaseEvent::Resolved {
                    at,
                    resolution: r.resolution.as_str().to_owned(),
                    by: r.resolved_by,
                    note: r.note,
                    authoritative_ref: r.authoritative_ref,
                    effect_id: r.effect_id,
                }),
            _ => None,
        };
        history.extend(step);
    }
    history
}
