//! Settling an effect whose outcome is unknown (the downstream timed out or
//! dropped the connection after the request was sent) by asking the
//! downstream itself, through the sink's status URL keyed by the
//! Idempotency-Key the effect was sent with. Never a blind retry:
//!
//! * **applied** → the effect is settled applied; the case is resolved
//!   (`effect_confirmed`, by `look-up`);
//! * **failed** (the downstream never applied it) → the effect is settled
//!   failed, and in the same transaction its key is taken back with the next
//!   fencing token, exactly as a provider's retry would take it
//!   (`effects::reserve_effect`); the effect is then sent again with the same
//!   Idempotency-Key. The case is resolved (`effect_retried`, by `look-up`).
//!   If that attempt's outcome is unknown again, a new case opens and is
//!   verified the same way;
//! * **unknown**, an error, or no status URL → the case stays for a person;
//!   after an error or an `unknown` answer the downstream is asked again
//!   with backoff (`backoff::retry_after`).
//!
//! The downstream is asked outside any transaction; what it answered is
//! journaled (`StatusLookupPerformed`) with what it settled, in one
//! transaction guarded by the reservation's state and fencing token.

use chrono::Utc;
use futures_util::future::BoxFuture;
use sea_orm::DbErr;
use serde_json::json;
use uuid::Uuid;

use super::cases::CaseError;
use super::effects::{self, Journaled};
use super::engine::{SharedEngine, WriteEvent};
use crate::domain::cases::{CaseStatus, Resolution};
use crate::domain::decision::Reason;
use crate::domain::delivery::DeliveryId;
use crate::domain::journal::{
    CaseResolved, EffectSettled, JournalEvent, KeySummary, SettlementOutcome, StatusLookupPerformed,
};
use crate::domain::plan::{Claim, EffectJob};
use crate::domain::reservation::ReservationState;
use crate::providers::sinks;
use crate::providers::status::{self, StatusMeaning};
use crate::store::Tx;
use crate::store::entities::case;
use crate::store::writer::WriteJob;

/// Asks the downstream about the effect of an open `outcome_unknown` case and
/// settles it when the answer does. Returns the answer's verdict code:
/// `effect_confirmed`, `effect_retried` or `for_a_person`; `None` when there
/// is nothing to ask (not such a case, or its effect is no longer unknown).
pub async fn settle(
    engine: &SharedEngine,
    case: &case::Model,
    asked_by: Option<String>,
) -> Result<Option<&'static str>, CaseError> {
    if case.status != CaseStatus::Open.as_str() || case.reason != Reason::OutcomeUnknown.as_str() {
        return Ok(None);
    }
    let (Some(key), Some(effect_id)) = (
        case.business_key.clone(),
        case.details
            .get("effect_id")
            .and_then(|v| v.as_str())
            .and_then(|id| id.parse::<Uuid>().ok()),
    ) else {
        return Ok(None);
    };
    let held = crate::store::reservations::find(&engine.db, &key).await?;
    let held = match held {
        Some(held)
            if held.state == ReservationState::Unknown.as_str()
                && held.effect_id == effect_id.to_string()
                && held.fencing_token.is_some() =>
        {
            held
        }
        // Settled meanwhile (a late answer on the expired lease), or taken
        // again: nothing to ask. Journaled so, the case is no longer due —
        // it stays for a person, who sees what became of the effect.
        moved => {
            let now = moved.map_or_else(|| "gone".to_owned(), |h| h.state);
            let event = JournalEvent::StatusLookupPerformed(StatusLookupPerformed {
                case_id: case.case_id.parse().map_err(|_| CaseError::NotFound)?,
                effect_id,
                key,
                url: String::new(),
                status: None,
                latency_ms: 0,
                answer: None,
                error: Some(format!(
                    "the effect is no longer of unknown outcome ({now}): nothing to ask"
                )),
                retry_at: None,
                asked_by,
            });
            let delivery = case.delivery_id.parse().ok();
            engine
                .writer
                .submit(WriteEvent::record(delivery, event))
                .await?;
            return Ok(None);
        }
    };
    let first: DeliveryId = held
        .first_delivery_id
        .parse()
        .map_err(|_| CaseError::NotFound)?;
    let journaled = Journaled::read(&engine.db, first).await?;
    let source = journaled.source.clone().unwrap_or_default();
    let sink = sinks::select(&engine.sinks, &source, &held.effect_type);
    // A lease that ran out on a call still in flight: the downstream may
    // not know the key yet, and "never applied" would send a second call
    // beside the first. Asked once that call's own timeout has run out,
    // whichever of the key's cases asks (an earlier attempt's may still be
    // open).
    if in_flight_until(&held, sink).is_some_and(|until| until > Utc::now()) {
        return Ok(None);
    }
    let answer = status::ask(&engine.http, sink, &key).await;
    let case_id: Uuid = case.case_id.parse().map_err(|_| CaseError::NotFound)?;
    let mut performed = StatusLookupPerformed {
        case_id,
        effect_id,
        key: key.clone(),
        url: String::new(),
        status: None,
        latency_ms: 0,
        answer: None,
        error: Some("the effect's sink declares no status URL".to_owned()),
        retry_at: None,
        asked_by,
    };
    let mut reference = None;
    let meaning = match answer {
        None => StatusMeaning::Unknown,
        Some(answer) => {
            performed.url = answer.url;
            performed.status = answer.status;
            performed.latency_ms = answer.latency_ms;
            reference = answer.reference;
            let meaning = answer.meaning.clone().unwrap_or(StatusMeaning::Unknown);
            performed.answer = answer.meaning.as_ref().ok().map(|m| m.as_str().to_owned());
            performed.error = answer.meaning.err();
            if meaning == StatusMeaning::Unknown {
                performed.retry_at = Some(
                    Utc::now()
                        + super::backoff::retry_after(
                            engine.config.lookup_retry_secs,
                            case.lookups,
                        ),
                );
            }
            meaning
        }
    };
    let Some(token) = held.fencing_token else {
        return Ok(None);
    };
    let settled = |outcome, error: Option<&str>| EffectSettled {
        key: key.clone(),
        effect_id,
        fencing_token: token,
        outcome,
        result: (outcome == SettlementOutcome::Applied)
            .then(|| json!({ "status_lookup": performed.answer })),
        authoritative_ref: reference.clone(),
        error: error.map(str::to_owned),
        case_id: None,
        delivery_id: first,
        call: None,
    };
    let resolved = |resolution: Resolution, note: &str| CaseResolved {
        case_id,
        resolution,
        resolved_by: "look-up".to_owned(),
        note: note.to_owned(),
        authoritative_ref: reference.clone(),
        effect_id: Some(effect_id),
        key: None,
        made_by_hand: None,
    };
    let plan = match meaning {
        StatusMeaning::Applied => Some((
            settled(SettlementOutcome::Applied, None),
            resolved(
                Resolution::EffectConfirmed,
                "the downstream reports the effect applied",
            ),
        )),
        StatusMeaning::Failed => Some((
            settled(
                SettlementOutcome::Failed,
                Some("downstream_reports_not_applied"),
            ),
            resolved(
                Resolution::EffectRetried,
                "the downstream reports the effect never applied: sent again under its key",
            ),
        )),
        StatusMeaning::Unknown => None,
    };
    let effect_type = held.effect_type.clone();
    let settled = engine
        .writer
        .submit(SettleFromStatus {
            engine: engine.clone(),
            first,
            effect_id,
            token,
            performed,
            plan,
            summary: journaled.key.clone(),
            sink: sink.name(),
        })
        .await?;
    // What the answer settled, not what it meant: one that came after a
    // person resolved the case, or after a late answer settled the effect,
    // settled nothing.
    let verdict = match (settled.outcome, meaning) {
        (Some(SettlementOutcome::Applied), _) => "effect_confirmed",
        (Some(_), _) => "effect_retried",
        (None, StatusMeaning::Unknown) => "for_a_person",
        (None, _) => "settled_meanwhile",
    };
    if let Some(outcome) = settled.outcome {
        let outcome = match outcome {
            SettlementOutcome::Applied => "applied",
            _ => "failed",
        };
        engine.metrics.effect_settled(&effect_type, outcome);
    }
    engine.metrics.looked_up("status", verdict);
    tracing::info!(case.id = %case_id, effect.id = %effect_id, verdict, "effect status looked up");
    if let Some(job) = settled.again {
        let body = journaled.event(engine).await?;
        effects::spawn(engine.clone(), job, source, body);
    }
    Ok(Some(verdict))
}

/// A status answer settled, as a writer job: the question journaled, then,
/// if the effect is still the unknown one that was asked about, its
/// settlement and the case's resolution claimed, and a failed effect's key
/// taken again to send it once more.
struct SettleFromStatus {
    engine: SharedEngine,
    first: DeliveryId,
    effect_id: Uuid,
    token: i64,
    performed: StatusLookupPerformed,
    /// The settlement and resolution the answer means (`None`: it settles
    /// nothing).
    plan: Option<(EffectSettled, CaseResolved)>,
    summary: Option<KeySummary>,
    sink: &'static str,
}

/// What a status answer settled: the effect's outcome, when it settled it,
/// and the call that sends it again.
struct Settled {
    outcome: Option<SettlementOutcome>,
    again: Option<EffectJob>,
}

impl Settled {
    const NOTHING: Self = Self {
        outcome: None,
        again: None,
    };
}

impl WriteJob for SettleFromStatus {
    type Output = Settled;

    fn run<'a>(self, tx: &'a mut Tx<'_>) -> BoxFuture<'a, Result<Self::Output, DbErr>> {
        let Self {
            engine,
            first,
            effect_id,
            token,
            performed,
            plan,
            summary,
            sink,
        } = self;
        Box::pin(async move {
            let at = Utc::now();
            tx.record(
                Some(first),
                JournalEvent::StatusLookupPerformed(performed),
                at,
            )
            .await?;
            let Some((settlement, resolution)) = plan else {
                return Ok(Settled::NOTHING);
            };
            // The effect moved on since it was read (a late answer to
            // the first attempt settled it): only the question is kept.
            let still = tx.reservation(&settlement.key).await?;
            if still.is_none_or(|r| {
                ReservationState::parse(&r.state) != Some(ReservationState::Unknown)
                    || r.fencing_token != Some(token)
            }) {
                return Ok(Settled::NOTHING);
            }
            let resolved = tx
                .claim(Some(first), &JournalEvent::CaseResolved(resolution), at)
                .await?;
            let retry = settlement.outcome == SettlementOutcome::Failed;
            // A person who resolved the case meanwhile decided: an answer
            // "never applied" settles nothing, so the key stays unknown and
            // every retry of the delivery goes to a person (settled failed,
            // the next retry would send it again, after a refund by hand).
            // An answer "applied" is recorded: it sends nothing.
            if retry && !resolved {
                return Ok(Settled::NOTHING);
            }
            let event = if retry {
                JournalEvent::EffectFailed(settlement.clone())
            } else {
                JournalEvent::EffectApplied(settlement.clone())
            };
            if !tx.claim(Some(first), &event, at).await? {
                return Err(DbErr::Custom("the effect's settlement moved on".to_owned()));
            }
            let outcome = Some(settlement.outcome);
            let (true, Some(summary)) = (retry, summary) else {
                return Ok(Settled {
                    outcome,
                    again: None,
                });
            };
            let claimed = Claim {
                key: settlement.key.clone(),
                effect_id,
                fencing_token: token + 1,
                provider_ref: None,
            };
            let again = effects::retake(tx, &engine, sink, first, &summary, claimed, at).await?;
            Ok(Settled { outcome, again })
        })
    }
}

/// Until when the key's current call may still be in flight, its lease run
/// out: it was sent within its lease and lasts at most the sink's timeout.
/// Read from the key's row, whatever case asks: an expiry leaves the lease
/// on the row, and every settlement (the call's answer, its timeout)
/// clears it. `None` when the current attempt's call is over.
fn in_flight_until(
    held: &crate::store::entities::effect::Model,
    sink: &sinks::SinkKind,
) -> Option<chrono::DateTime<Utc>> {
    let sinks::SinkKind::Http { timeout_ms, .. } = sink else {
        return None;
    };
    let timeout = chrono::Duration::milliseconds(i64::try_from(*timeout_ms).unwrap_or(i64::MAX));
    Some(
        held.lease_until?
            .checked_add_signed(timeout)
            .unwrap_or(chrono::DateTime::<Utc>::MAX_UTC),
    )
}
