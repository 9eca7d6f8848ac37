//! Asking the provider before a person: a case that asks whether a delivery
//! is a second legitimate operation or a retry (a weak or medium match on
//! money, a late replay whose evidence was purged) is settled by the
//! provider's own API when a look-up is configured for its provider and
//! effect type. The policy (`domain::lookup`): the provider lists N
//! operations matching the delivery — its resource, and every discriminant
//! compared with the operation field the configuration names for it — and
//! M effects exist under its key in any state but failed; N > M → processed
//! as distinct, consuming the first operation not yet accounted for, N == M
//! → confirmed duplicate, anything else (an API failure, a discriminant the
//! look-up cannot compare) stays for a person, with the reason.
//!
//! The provider is asked outside any transaction; the count of effects and
//! of consumed operations is read in the transaction that resolves, with
//! the look-up journaled (`LookupPerformed`) in it (`cases::settle`). An
//! automatic resolution is attributed to `look-up`, never to a person.

use chrono::Utc;
use uuid::Uuid;

use super::backoff;
use super::cases::{self, CaseError, Settled, Settler};
use super::effects::Journaled;
use super::engine::SharedEngine;
use crate::auth::Principal;
use crate::domain::cases::{CaseStatus, Refusal, Resolution};
use crate::domain::decision::Reason;
use crate::domain::delivery::DeliveryId;
use crate::domain::journal::LookupPerformed;
use crate::domain::lookup::{self as lookup_policy, LookupVerdict};
use crate::providers::lookup;
use crate::store::entities::case;

/// Asks the provider about `case_id` and resolves it when the answer settles
/// it. `None`: nothing to ask (not an askable open case, no look-up
/// configured, no body).
pub async fn settle(
    engine: &SharedEngine,
    case_id: Uuid,
    asked_by: Option<String>,
) -> Result<Option<LookupVerdict>, CaseError> {
    let Some((case, _, journaled)) = askable(engine, case_id).await? else {
        return Ok(None);
    };
    let Some(key) = journaled.key.clone() else {
        return nothing_to_ask(engine, &case, asked_by, "the delivery has no business key").await;
    };
    let Some((provider, configured)) = engine.lookup_for(&key) else {
        let why = "no look-up is configured for its provider and effect type any more";
        return nothing_to_ask(engine, &case, asked_by, why).await;
    };
    let Some(event) = journaled.event(engine).await? else {
        let why = "the delivery's body is gone: nothing to put to the provider";
        return nothing_to_ask(engine, &case, asked_by, why).await;
    };
    let breaker = engine
        .lookup_breakers
        .check(&provider, std::time::Instant::now());
    let asked = breaker.is_none();
    let answer = match breaker {
        // The provider is not asked while its breaker is open; the case
        // waits and the skipped question is journaled as such.
        Some(_) => lookup::Answer {
            url: String::new(),
            status: None,
            latency_ms: 0,
            operations: Err(format!("not asked: {provider}'s circuit breaker is open")),
        },
        None => {
            let started = std::time::Instant::now();
            let answer = configured.fetch(&engine.http, &event).await;
            engine
                .metrics
                .lookup_latency(&provider, started.elapsed().as_secs_f64());
            let succeeded = answer.operations.is_ok();
            engine
                .lookup_breakers
                .record(&provider, succeeded, std::time::Instant::now());
            answer
        }
    };
    let (operations, error) = match answer.operations {
        Ok(operations) => (operations, None),
        Err(error) => (Vec::new(), Some(error)),
    };
    let resource = configured.resource_of(&event);
    let matching = match &error {
        Some(error) => Err(format!("the provider's API gave no usable answer: {error}")),
        None => lookup_policy::matching(
            &operations,
            &configured.compare,
            lookup_policy::Delivery {
                resource: resource.as_deref(),
                discriminants: &key.discriminants,
                missing: &key.missing_discriminants,
            },
        ),
    };
    let retry_at = error
        .is_some()
        .then(|| Utc::now() + backoff::retry_after(engine.config.lookup_retry_secs, case.lookups));
    let note = match &matching {
        Ok(ids) => format!(
            "the provider lists {} matching operation(s) for this resource",
            ids.len()
        ),
        Err(why) => why.clone(),
    };
    let performed = LookupPerformed {
        case_id,
        url: answer.url,
        status: answer.status,
        latency_ms: answer.latency_ms,
        operations,
        error,
        // Judged in the transaction that resolves.
        verdict: String::new(),
        why: None,
        retry_at,
        asked_by,
    };
    let settled = cases::settle(
        engine,
        case_id,
        Settler::LookUp {
            performed,
            matching,
        },
        "look-up".to_owned(),
        note,
    )
    .await;
    let verdict = match settled {
        Ok(Settled::Resolved(resolved)) => Ok(Some(match resolved.resolution {
            Resolution::ProcessAsDistinct => LookupVerdict::ProcessAsDistinct {
                reference: resolved.reference.unwrap_or_default(),
            },
            _ => LookupVerdict::ConfirmDuplicate,
        })),
        Ok(Settled::ForAPerson(verdict)) => Ok(Some(verdict)),
        // Resolved by someone else meanwhile: the question is moot.
        Err(CaseError::Refused(Refusal::AlreadyResolved)) => Ok(None),
        Err(error) => Err(error),
    };
    if let Ok(Some(verdict)) = &verdict {
        let code = if asked { verdict.code() } else { "not_asked" };
        engine.metrics.looked_up("provider", code);
    }
    verdict
}

/// A case due for a look-up that nothing can ask about any more stops being
/// due: its look-up is journaled as not asked, with why, and no retry.
/// Left due, it would come back first in every sweep, and twenty of them
/// would hold every place of the sweeper's batch. Returns `None`: nothing
/// was asked.
async fn nothing_to_ask(
    engine: &SharedEngine,
    case: &case::Model,
    asked_by: Option<String>,
    why: &str,
) -> Result<Option<LookupVerdict>, CaseError> {
    if case.next_lookup_at.is_none() {
        return Ok(None);
    }
    let case_id: Uuid = case.case_id.parse().map_err(|_| CaseError::NotFound)?;
    let performed = LookupPerformed {
        case_id,
        url: String::new(),
        status: None,
        latency_ms: 0,
        operations: Vec::new(),
        error: Some(format!("not asked: {why}")),
        verdict: String::new(),
        why: None,
        retry_at: None,
        asked_by,
    };
    let settler = Settler::LookUp {
        performed,
        matching: Err(format!("not asked: {why}")),
    };
    match cases::settle(
        engine,
        case_id,
        settler,
        "look-up".to_owned(),
        why.to_owned(),
    )
    .await
    {
        Ok(_) | Err(CaseError::Refused(Refusal::AlreadyResolved)) => Ok(None),
        Err(error) => Err(error),
    }
}

/// Whether the provider can be asked about `case_id` now: an open case of a
/// reason its answer settles, keyed by a strategy of a provider and effect
/// type a look-up is configured for.
pub async fn available(engine: &SharedEngine, case_id: Uuid) -> Result<bool, CaseError> {
    let Some((_, _, journaled)) = askable(engine, case_id).await? else {
        return Ok(false);
    };
    Ok(journaled
        .key
        .is_some_and(|key| engine.lookup_for(&key).is_some()))
}

/// The open case `case_id` and its delivery, when its reason is askable.
async fn askable(
    engine: &SharedEngine,
    case_id: Uuid,
) -> Result<Option<(case::Model, DeliveryId, Journaled)>, CaseError> {
    let case = crate::store::cases::find(&engine.db, case_id)
        .await?
        .ok_or(CaseError::NotFound)?;
    let askable = Reason::SETTLED_BY_THE_PROVIDER
        .iter()
        .any(|r| r.as_str() == case.reason);
    if case.status != CaseStatus::Open.as_str() || !askable {
        return Ok(None);
    }
    let delivery: DeliveryId = case.delivery_id.parse().map_err(|_| CaseError::NotFound)?;
    let journaled = Journaled::read(&engine.db, delivery).await?;
    Ok(Some((case, delivery, journaled)))
}

/// Starts `settle` for each case in the background, when any look-up is
/// configured; failures stay in the log and the case stays open.
pub fn spawn(engine: &SharedEngine, case_ids: impl IntoIterator<Item = Uuid>) {
    if engine.lookups.is_empty() {
        return;
    }
    for case_id in case_ids {
        let engine = engine.clone();
        tokio::spawn(async move {
            if let Err(error) = settle(&engine, case_id, None).await {
                tracing::warn!(case.id = %case_id, %error, "look-up failed; the case stays open");
            }
        });
    }
}

/// Asks whoever can settle `case_id`: the downstream's status URL for an
/// effect whose outcome is unknown (`services::status`), else the
/// provider's list of operations. Returns the verdict's code, `None` when
/// there was nothing to ask.
pub async fn ask(
    engine: &SharedEngine,
    case_id: Uuid,
    asked_by: Option<&Principal>,
) -> Result<Option<Asked>, CaseError> {
    let asked_by = asked_by.map(Principal::signature);
    let case = crate::store::cases::find(&engine.db, case_id)
        .await?
        .ok_or(CaseError::NotFound)?;
    if case.reason == Reason::OutcomeUnknown.as_str() {
        return Ok(super::status::settle(engine, &case, asked_by)
            .await?
            .map(|verdict| Asked {
                verdict,
                asked: true,
                why: None,
            }));
    }
    let breaker_open = provider_breaker_open(engine, &case).await?;
    Ok(settle(engine, case_id, asked_by)
        .await?
        .map(|verdict| Asked {
            verdict: verdict.code(),
            asked: !breaker_open,
            why: match verdict {
                LookupVerdict::ForAPerson { why } => Some(why),
                _ => None,
            },
        }))
}

/// What asking about a case came to.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Asked {
    /// `process_as_distinct`, `confirm_duplicate` or `for_a_person`; for an
    /// effect whose outcome is unknown, `effect_confirmed`, `effect_retried`
    /// or `for_a_person`.
    pub verdict: &'static str,
    /// Whether the question reached anyone: false while the provider's
    /// circuit breaker is open.
    pub asked: bool,
    /// Why the answer leaves the case for a person.
    pub why: Option<String>,
}

/// Whether the breaker of the provider `case` would be asked is open now.
async fn provider_breaker_open(
    engine: &SharedEngine,
    case: &case::Model,
) -> Result<bool, CaseError> {
    let Ok(delivery) = case.delivery_id.parse::<DeliveryId>() else {
        return Ok(false);
    };
    let journaled = Journaled::read(&engine.db, delivery).await?;
    let Some((provider, _)) = journaled
        .key
        .as_ref()
        .and_then(|key| engine.lookup_for(key))
    else {
        return Ok(false);
    };
    Ok(engine
        .lookup_breakers
        .is_open(&provider, std::time::Instant::now()))
}

/// Open cases whose look-up is due (a failed one to try again, an unknown
/// outcome to verify), asked now (the sweeper calls this). Returns how many
/// were asked.
pub async fn retry_due(engine: &SharedEngine) -> Result<usize, CaseError> {
    let due = crate::store::cases::lookups_due(&engine.db, Utc::now(), 20).await?;
    for case_id in &due {
        if let Err(error) = ask(engine, *case_id, None).await {
            tracing::warn!(case.id = %case_id, %error, "look-up retry failed");
        }
    }
    Ok(due.len())
}
