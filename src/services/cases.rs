//! Resolving cases: a person (later, the provider's API) settles what the
//! decision matrix could not. The rules are in `domain::cases`; who may
//! resolve which case is decided by the caller's authorization table, and
//! recorded here as `resolved_by`.
//!
//! A case resolves once: the resolution is an atomic claim on the open case,
//! in the transaction that applies its consequence (a reservation under the
//! case's own key, or a link to the existing effect). Two operators at once,
//! or one form submitted twice, get one resolution and at most one effect.

use chrono::Utc;
use sea_orm::DbErr;
use uuid::Uuid;

use super::decide::{Claim, reserve_effect};
use super::effects::{self, Journaled};
use super::engine::{SharedEngine, WriteEvent};
use crate::domain::cases::{self, CaseFacts, CaseStatus, Refusal, Resolution};
use crate::domain::confidence::Criticality;
use crate::domain::decision::Reason;
use crate::domain::delivery::DeliveryId;
use crate::domain::journal::{CaseCommented, CaseResolved, JournalEvent};
use crate::providers::sinks;
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
        open: case.status == CaseStatus::Open.as_str(),
        can_apply: journaled.key.is_some() && journaled.body.is_some(),
        has_existing_effect: existing.is_some(),
        outcome_unknown: case.reason == Reason::OutcomeUnknown.as_str(),
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
        .run(move |tx| {
            Box::pin(async move {
                let at = Utc::now();
                let resolution = event.resolution;
                // The claim: only an open case resolves, once.
                if !tx
                    .claim(Some(delivery_id), &JournalEvent::CaseResolved(event), at)
                    .await?
                {
                    return Ok(None);
                }
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
                        let reserved =
                            reserve_effect(tx, &shared, sink, delivery_id, &key, claim, at).await?;
                        // The case's own key taken while the case was open:
                        // nothing commits.
                        job = reserved.ok_or_else(|| {
                            DbErr::Custom("the case's effect key is already taken".to_owned())
                        })?;
                    }
                    (Resolution::ConfirmDuplicate, _, _, Some(effect_id)) => {
                        tx.effect_link(&effect_id.to_string(), &delivery_id.to_string(), at);
                    }
                    _ => {}
                }
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
        .submit(WriteEvent::record(delivery_id, event))
        .await?;
    Ok(())
}

/// How long a resolution form stays valid once shown.
const FORM_TOKEN_TTL: chrono::Duration = chrono::Duration::hours(12);

/// A one-time token for the resolution form of `case_id` shown to
/// `operator_id`: `consume_form_token` accepts it once.
pub async fn form_token(
    engine: &SharedEngine,
    case_id: Uuid,
    operator_id: Uuid,
) -> Result<String, DbErr> {
    let token = crate::auth::secrets::random_hex();
    let now = Utc::now();
    crate::store::form_tokens::issue(
        &engine.db,
        crate::auth::secrets::digest(&token),
        &case_id.to_string(),
        &operator_id.to_string(),
        now + FORM_TOKEN_TTL,
        now,
    )
    .await?;
    Ok(token)
}

/// Whether `token` is a live form token of this case and operator, used now
/// for the first and only time.
pub async fn consume_form_token(
    engine: &SharedEngine,
    case_id: Uuid,
    operator_id: Uuid,
    token: &str,
) -> Result<bool, DbErr> {
    crate::store::form_tokens::consume(
        &engine.db,
        &crate::auth::secrets::digest(token),
        &case_id.to_string(),
        &operator_id.to_string(),
        Utc::now(),
    )
    .await
}

/// The effect a case's delivery was compared with, when there is one.
pub(crate) fn existing_effect(case: &case::Model) -> Option<Uuid> {
    case.details
        .get("effect_id")
        .and_then(|v| v.as_str())
        .and_then(|id| id.parse().ok())
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
