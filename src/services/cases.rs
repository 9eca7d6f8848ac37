//! Resolving cases: a person (later, the provider's API) settles what the
//! decision matrix could not. The rules are in `domain::cases`; who may
//! resolve which case is decided by the caller's authorization table, and
//! recorded here as `resolved_by`.
//!
//! A case resolves once: the resolution is an atomic claim on the open case,
//! in the transaction that applies its consequence (a reservation under the
//! case's own key, or a link to the existing effect). Two operators at once,
//! or one form submitted twice, get one resolution and at most one effect.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::Utc;
use sea_orm::DbErr;
use uuid::Uuid;

use super::decide::{Claim, reserve_effect};
use super::deliveries::{self, DeliveryView, ShowError};
use super::effects::{self, Journaled};
use super::engine::{Appends, SharedEngine, claim, record};
use crate::config::Source;
use crate::domain::cases::{self, CaseFacts, Refusal, Resolution};
use crate::domain::confidence::Criticality;
use crate::domain::delivery::DeliveryId;
use crate::domain::diff::{FieldChange, diff};
use crate::domain::journal::{CaseCommented, CaseResolved, JournalEvent};
use crate::providers::sinks;
pub use crate::store::cases::QueueFilter;
use crate::store::deferred::Deferred;
use crate::store::entities::case;

/// A resolution asked for.
pub struct Resolve {
    pub case_id: Uuid,
    pub resolution: Resolution,
    /// Who resolves it (an operator, a token, a look-up).
    pub by: String,
    pub note: String,
    pub authoritative_ref: Option<String>,
}

/// How a case ended, as journaled.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub case_id: Uuid,
    pub resolution: Resolution,
    pub effect_id: Option<Uuid>,
    pub key: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum CaseError {
    #[error("no case with this id")]
    NotFound,
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error(transparent)]
    Db(#[from] DbErr),
}

/// Resolves a case and, when processed as distinct, starts its effect once
/// the resolution committed.
pub async fn resolve(engine: &SharedEngine, request: Resolve) -> Result<Resolved, CaseError> {
    let case = crate::store::cases::find(&engine.db, request.case_id)
        .await?
        .ok_or(CaseError::NotFound)?;
    let delivery_id: DeliveryId = case.delivery_id.parse().map_err(|_| CaseError::NotFound)?;
    let journaled = Journaled::read(&engine.db, delivery_id).await?;
    let existing = existing_effect(&case);
    let facts = CaseFacts {
        open: case.status == "open",
        can_apply: journaled.key.is_some() && journaled.body.is_some(),
        has_existing_effect: existing.is_some(),
        outcome_unknown: case.reason == "outcome_unknown",
    };
    cases::check(facts, request.resolution, &request.note)?;

    let source = journaled.source.clone().unwrap_or_default();
    let key = journaled.key.clone();
    let (effect_id, applied_key) = match (request.resolution, &key) {
        (Resolution::ProcessAsDistinct, Some(key)) => (
            Some(Uuid::now_v7()),
            Some(cases::distinct_key(&key.key, request.case_id)),
        ),
        (Resolution::ConfirmDuplicate, _) => (existing, None),
        _ => (None, None),
    };
    let event = CaseResolved {
        case_id: request.case_id,
        resolution: request.resolution,
        resolved_by: request.by,
        note: request.note,
        authoritative_ref: request.authoritative_ref,
        effect_id,
        key: applied_key.clone(),
    };
    let shared = engine.clone();
    let sink_source = source.clone();
    let claim_key = applied_key.clone();
    let outcome = engine
        .writer
        .run(move |txn| {
            Box::pin(async move {
                let at = Utc::now();
                let resolution = event.resolution;
                // The claim: only an open case resolves, once.
                if !claim(
                    txn,
                    Some(delivery_id),
                    &JournalEvent::CaseResolved(event),
                    at,
                )
                .await?
                {
                    return Ok(None);
                }
                let mut appends = Appends::default();
                let mut rows = Deferred::default();
                let mut job = None;
                match (resolution, key, claim_key, effect_id) {
                    (
                        Resolution::ProcessAsDistinct,
                        Some(key),
                        Some(claim_key),
                        Some(effect_id),
                    ) => {
                        let sink =
                            sinks::select(&shared.sinks, &sink_source, &key.effect_type).name();
                        let claim = Claim {
                            key: claim_key,
                            effect_id,
                            fencing_token: 1,
                        };
                        let reserved = reserve_effect(
                            txn,
                            &shared,
                            sink,
                            delivery_id,
                            &key,
                            claim,
                            at,
                            &mut appends,
                            &mut rows,
                        )
                        .await?;
                        // The case's own key taken while the case was open:
                        // nothing commits.
                        job = reserved.ok_or_else(|| {
                            DbErr::Custom("the case's effect key is already taken".to_owned())
                        })?;
                    }
                    (Resolution::ConfirmDuplicate, _, _, Some(effect_id)) => {
                        rows.effect_link(&effect_id.to_string(), &delivery_id.to_string(), at);
                    }
                    _ => {}
                }
                appends.flush(txn, at).await?;
                rows.flush(txn).await?;
                Ok(Some(job))
            })
        })
        .await?;
    let Some(job) = outcome else {
        return Err(Refusal::AlreadyResolved.into());
    };
    if let Some(job) = job {
        let body = journaled.body(&engine.db).await?;
        effects::spawn(engine.clone(), job, source, body);
    }
    Ok(Resolved {
        case_id: request.case_id,
        resolution: request.resolution,
        effect_id,
        key: applied_key,
    })
}

/// Adds a note to a case (journaled with its delivery).
pub async fn comment(
    engine: &SharedEngine,
    case_id: Uuid,
    by: String,
    note: String,
) -> Result<(), CaseError> {
    if note.trim().is_empty() {
        return Err(Refusal::NoteRequired.into());
    }
    let case = crate::store::cases::find(&engine.db, case_id)
        .await?
        .ok_or(CaseError::NotFound)?;
    let delivery_id: Option<DeliveryId> = case.delivery_id.parse().ok();
    let event = JournalEvent::CaseCommented(CaseCommented {
        case_id,
        commented_by: by,
        note,
    });
    engine
        .writer
        .run(move |txn| {
            Box::pin(async move { record(txn, delivery_id, event, Utc::now()).await.map(drop) })
        })
        .await?;
    Ok(())
}

/// The effect a case's delivery was compared with, when there is one.
fn existing_effect(case: &case::Model) -> Option<Uuid> {
    case.details
        .get("effect_id")
        .and_then(|v| v.as_str())
        .and_then(|id| id.parse().ok())
}

/// A case as the case page shows it: the case, its delivery and the
/// reference delivery side by side (masked), and what differs between them.
#[derive(Debug, serde::Serialize)]
pub struct CaseView {
    pub case_id: String,
    pub status: String,
    pub action: String,
    pub reason: String,
    pub business_key: Option<String>,
    pub opened_at: chrono::DateTime<Utc>,
    pub resolved_at: Option<chrono::DateTime<Utc>>,
    pub resolution: Option<String>,
    pub resolved_by: Option<String>,
    pub details: serde_json::Value,
    /// The effect is critical (money, rights, stock): only finance or an
    /// admin may resolve it. A case without a key counts as critical.
    pub critical: bool,
    pub delivery: DeliveryView,
    pub reference: Option<DeliveryView>,
    /// Field by field, the reference's body against this delivery's;
    /// discriminating fields (of the strategy that keyed it) marked.
    pub changes: Vec<MarkedChange>,
}

/// One differing field, and whether the strategy discriminates on it.
#[derive(Debug, serde::Serialize)]
pub struct MarkedChange {
    #[serde(flatten)]
    pub change: FieldChange,
    pub discriminating: bool,
}

/// The case `case_id` with both deliveries and their differences.
pub async fn show(
    engine: &SharedEngine,
    sources: &HashMap<String, Arc<Source>>,
    case_id: Uuid,
) -> Result<CaseView, CaseError> {
    let case = crate::store::cases::find(&engine.db, case_id)
        .await?
        .ok_or(CaseError::NotFound)?;
    let id: DeliveryId = case.delivery_id.parse().map_err(|_| CaseError::NotFound)?;
    let delivery = view(engine, sources, id).await?;
    let reference_id = case
        .details
        .get("reference_delivery_id")
        .and_then(|v| v.as_str())
        .and_then(|id| id.parse::<DeliveryId>().ok());
    let reference = match reference_id {
        Some(reference) => Some(view(engine, sources, reference).await?),
        None => None,
    };
    let discriminating = discriminating_paths(engine, case.business_key.as_deref());
    let critical = is_critical(engine, case_id).await?;
    let changes = match (
        &reference,
        &delivery.body,
        reference.as_ref().and_then(|r| r.body.as_ref()),
    ) {
        (Some(_), Some(new), Some(old)) => diff(old, new)
            .into_iter()
            .map(|change| MarkedChange {
                discriminating: discriminating.contains(&change.path),
                change,
            })
            .collect(),
        _ => Vec::new(),
    };
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
        details: case.details,
        critical,
        delivery,
        reference,
        changes,
    })
}

/// Whether resolving `case_id` decides about a critical effect. Unknown
/// (no key, a delivery that cannot be read) counts as critical.
pub async fn is_critical(engine: &SharedEngine, case_id: Uuid) -> Result<bool, CaseError> {
    let case = crate::store::cases::find(&engine.db, case_id)
        .await?
        .ok_or(CaseError::NotFound)?;
    let Ok(delivery) = case.delivery_id.parse::<DeliveryId>() else {
        return Ok(true);
    };
    let journaled = Journaled::read(&engine.db, delivery).await?;
    Ok(journaled
        .key
        .is_none_or(|key| key.criticality == Criticality::Critical))
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

/// The body paths the strategy of `key` (`name@version:…`) discriminates on.
fn discriminating_paths(engine: &SharedEngine, key: Option<&str>) -> Vec<String> {
    let Some((name, version)) = key
        .and_then(|k| k.split_once(':'))
        .and_then(|(strategy, _)| strategy.split_once('@'))
        .and_then(|(name, v)| Some((name, v.parse::<u32>().ok()?)))
    else {
        return Vec::new();
    };
    engine
        .catalog
        .strategy(name, version)
        .map(|s| {
            s.discriminants
                .iter()
                .map(|d| d.path.as_str().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// One case as the queue lists it.
#[derive(Debug, serde::Serialize)]
pub struct CaseRow {
    pub case_id: String,
    pub delivery_id: String,
    pub business_key: Option<String>,
    pub action: String,
    pub reason: String,
    pub status: String,
    pub opened_at: chrono::DateTime<Utc>,
    pub resolution: Option<String>,
}

impl From<case::Model> for CaseRow {
    fn from(c: case::Model) -> Self {
        Self {
            case_id: c.case_id,
            delivery_id: c.delivery_id,
            business_key: c.business_key,
            action: c.action,
            reason: c.reason,
            status: c.status,
            opened_at: c.opened_at,
            resolution: c.resolution,
        }
    }
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
    filter: &QueueFilter,
    limit: u64,
    offset: u64,
) -> Result<QueuePage, CaseError> {
    let db = &engine.db;
    let mut cases = crate::store::cases::queue(db, filter, limit + 1, offset).await?;
    let more = cases.len() as u64 > limit;
    cases.truncate(limit as usize);
    let status = filter.status.as_deref().unwrap_or("open");
    let counts = crate::store::cases::counts_by_reason(db, status).await?;
    Ok(QueuePage {
        cases: cases.into_iter().map(CaseRow::from).collect(),
        counts,
        next_offset: more.then_some(offset + limit),
    })
}
