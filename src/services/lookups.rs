//! Asking the provider before a person: a case that asks whether a delivery
//! is a second legitimate operation or a retry (a weak or medium match on
//! money, a late replay whose evidence was purged) is settled by the
//! provider's own API when a look-up is configured for its provider and
//! effect type. The policy (`domain::cases::judge_lookup`): the provider
//! lists N operations matching the delivery, Unicity applied M for its key;
//! N > M → processed as distinct with the provider's reference, N == M →
//! confirmed duplicate, anything else (or an API failure) stays for a person.
//! Every look-up is journaled (`LookupPerformed`); an automatic resolution is
//! attributed to `look-up`, never to a person. Nothing runs inside a write
//! transaction while the provider is asked.

use chrono::Utc;
use serde_json::Value;
use uuid::Uuid;

use super::cases::{self, CaseError, Resolve};
use super::effects::Journaled;
use super::engine::{SharedEngine, WriteEvent};
use crate::domain::cases::{CaseStatus, LookupVerdict, Refusal, Resolution, judge_lookup};
use crate::domain::decision::Reason;
use crate::domain::delivery::DeliveryId;
use crate::domain::journal::{JournalEvent, KeySummary, LookupPerformed, ProviderOperation};
use crate::providers::lookup;
use crate::store::entities::case;

/// Case reasons the provider's list of operations can settle.
const ASKABLE: [&str; 3] = [
    "weak_match_critical",
    "medium_match_critical",
    "evidence_purged",
];

/// Asks the provider about `case_id` and resolves it when the answer settles
/// it. `None`: nothing to ask (not an askable open case, no look-up
/// configured, no body).
pub async fn settle(
    engine: &SharedEngine,
    case_id: Uuid,
) -> Result<Option<LookupVerdict>, CaseError> {
    let Some((case, delivery, journaled)) = askable(engine, case_id).await? else {
        return Ok(None);
    };
    let Some(key) = journaled.key.clone() else {
        return Ok(None);
    };
    let Some((provider, configured)) = configured(engine, &key) else {
        return Ok(None);
    };
    let Some(event) = journaled.body(&engine.db).await? else {
        return Ok(None);
    };
    let answer = match engine
        .lookup_breakers
        .check(&provider, std::time::Instant::now())
    {
        // The provider is not asked while its breaker is open; the case
        // waits and the skipped question is journaled as such.
        Some(_) => lookup::Answer {
            url: String::new(),
            status: None,
            latency_ms: 0,
            operations: Err(format!("not asked: {provider}'s circuit breaker is open")),
        },
        None => {
            let answer = configured.fetch(&engine.http, &event).await;
            let succeeded = answer.operations.is_ok();
            engine
                .lookup_breakers
                .record(&provider, succeeded, std::time::Instant::now());
            answer
        }
    };
    let applied =
        crate::store::ledger::applied_effects(&engine.db, super::decide::base_key(&key.key))
            .await?;
    let (operations, error) = match answer.operations {
        Ok(operations) => (operations, None),
        Err(error) => (Vec::new(), Some(error)),
    };
    let matching: Vec<String> = operations
        .iter()
        .filter(|op| matches(op, &key))
        .map(|op| op.id.clone())
        .collect();
    let verdict = match &error {
        Some(_) => LookupVerdict::ForAPerson {
            why: "the provider's API did not answer",
        },
        None => judge_lookup(&matching, applied as usize),
    };
    let retry_at = error
        .is_some()
        .then(|| Utc::now() + retry_after(engine.config.lookup_retry_secs, case.lookups));
    let performed = JournalEvent::LookupPerformed(LookupPerformed {
        case_id,
        url: answer.url,
        status: answer.status,
        latency_ms: answer.latency_ms,
        operations,
        error,
        verdict: verdict_code(&verdict).to_owned(),
        retry_at,
    });
    engine
        .writer
        .submit(WriteEvent::record(Some(delivery), performed))
        .await?;
    let note = format!(
        "the provider lists {} matching operation(s) for this resource; {applied} applied",
        matching.len()
    );
    let resolution = match &verdict {
        LookupVerdict::ProcessAsDistinct { reference } => {
            Some((Resolution::ProcessAsDistinct, Some(reference.clone())))
        }
        LookupVerdict::ConfirmDuplicate => Some((Resolution::ConfirmDuplicate, None)),
        LookupVerdict::ForAPerson { .. } => None,
    };
    if let Some((resolution, authoritative_ref)) = resolution {
        let resolved = cases::resolve(
            engine,
            Resolve {
                case_id,
                resolution,
                by: "look-up".to_owned(),
                note,
                authoritative_ref,
            },
        )
        .await;
        match resolved {
            Ok(_) | Err(CaseError::Refused(Refusal::AlreadyResolved)) => {}
            Err(error) => return Err(error),
        }
    }
    Ok(Some(verdict))
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
        .is_some_and(|key| configured(engine, &key).is_some()))
}

/// The open case `case_id` and its delivery, when its reason is askable.
async fn askable(
    engine: &SharedEngine,
    case_id: Uuid,
) -> Result<Option<(case::Model, DeliveryId, Journaled)>, CaseError> {
    let case = crate::store::cases::find(&engine.db, case_id)
        .await?
        .ok_or(CaseError::NotFound)?;
    if case.status != CaseStatus::Open.as_str() || !ASKABLE.contains(&case.reason.as_str()) {
        return Ok(None);
    }
    let delivery: DeliveryId = case.delivery_id.parse().map_err(|_| CaseError::NotFound)?;
    let journaled = Journaled::read(&engine.db, delivery).await?;
    Ok(Some((case, delivery, journaled)))
}

/// The provider of `key`'s strategy and the look-up configured for it.
fn configured<'a>(
    engine: &'a SharedEngine,
    key: &KeySummary,
) -> Option<(String, &'a lookup::Lookup)> {
    let provider = provider_of(engine, key)?;
    let found = lookup::find(&engine.lookups, &provider, &key.effect_type)?;
    Some((provider, found))
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
            if let Err(error) = settle(&engine, case_id).await {
                tracing::warn!(case.id = %case_id, %error, "look-up failed; the case stays open");
            }
        });
    }
}

/// Asks whoever can settle `case_id`: the downstream's status URL for an
/// effect whose outcome is unknown (`services::status`), else the
/// provider's list of operations. Returns the verdict's code, `None` when
/// there was nothing to ask.
pub async fn ask(engine: &SharedEngine, case_id: Uuid) -> Result<Option<&'static str>, CaseError> {
    let case = crate::store::cases::find(&engine.db, case_id)
        .await?
        .ok_or(CaseError::NotFound)?;
    if case.reason == Reason::OutcomeUnknown.as_str() {
        return super::status::settle(engine, &case).await;
    }
    Ok(settle(engine, case_id).await?.as_ref().map(verdict_code))
}

/// Open cases whose look-up is due (a failed one to try again, an unknown
/// outcome to verify), asked now (the sweeper calls this). Returns how many
/// were asked.
pub async fn retry_due(engine: &SharedEngine) -> Result<usize, CaseError> {
    let due = crate::store::cases::lookups_due(&engine.db, Utc::now(), 20).await?;
    for case_id in &due {
        if let Err(error) = ask(engine, *case_id).await {
            tracing::warn!(case.id = %case_id, %error, "look-up retry failed");
        }
    }
    Ok(due.len())
}

/// The pause before the next try after `failures` failed ones: doubling from
/// `base_secs`, at most an hour, plus up to a quarter of jitter (so that
/// cases held by one outage are not all asked again at the same instant).
pub(super) fn retry_after(base_secs: u64, failures: i64) -> chrono::Duration {
    let doubling = 1u64 << failures.clamp(0, 20);
    let secs = base_secs.max(1).saturating_mul(doubling).min(3600);
    let random = (Uuid::now_v7().as_u128() & 0xffff) as u64;
    let jitter_ms = random * secs * 250 / 0xffff;
    chrono::Duration::milliseconds((secs * 1000 + jitter_ms) as i64)
}

pub fn verdict_code(verdict: &LookupVerdict) -> &'static str {
    match verdict {
        LookupVerdict::ProcessAsDistinct { .. } => "process_as_distinct",
        LookupVerdict::ConfirmDuplicate => "confirm_duplicate",
        LookupVerdict::ForAPerson { .. } => "for_a_person",
    }
}

/// An operation matches the delivery when it happened and agrees with the
/// delivery's amount and currency (where the key discriminates on them).
fn matches(op: &ProviderOperation, key: &KeySummary) -> bool {
    let agrees = |name: &str, value: &Option<Value>| {
        key.discriminants
            .get(name)
            .is_none_or(|mine| value.as_ref() == Some(mine))
    };
    !op.status
        .as_deref()
        .is_some_and(|s| crate::domain::reconcile::NOT_DONE.contains(&s))
        && agrees("amount", &op.amount)
        && agrees("currency", &op.currency)
}

/// The provider of the strategy that keyed `key`.
fn provider_of(engine: &SharedEngine, key: &KeySummary) -> Option<String> {
    let (name, version) = key.strategy.split_once('@')?;
    engine
        .catalog
        .strategy(name, version.parse().ok()?)
        .map(|s| s.provider.clone())
}

#[cfg(test)]
mod tests {
    use super::retry_after;

    #[test]
    fn a_failed_look_up_waits_twice_as_long_each_time_up_to_an_hour_plus_jitter() {
        for (failures, secs) in [(0, 30), (1, 60), (2, 120), (10, 3600), (60, 3600)] {
            let wait = retry_after(30, failures).num_milliseconds();
            let base = secs * 1000;
            assert!(
                (base..=base + base / 4).contains(&wait),
                "{failures} failures: {wait} ms"
            );
        }
    }
}
