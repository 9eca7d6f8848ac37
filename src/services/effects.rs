//! Effects, from their key to their settlement: a key taken outside a
//! delivery's decision (`reserve_effect`: a case processed as distinct, a
//! failed effect sent again after a status look-up; a decision takes its key
//! through `Tx::decide_key`), the one way an effect starts once the
//! transaction that reserved it committed (`spawn`), the one way an attempt
//! settles, by compare-and-set on the fencing token (`settle`), then the
//! deliveries that waited on the key decided again (`redecide_deferred`).
//! Nothing here runs inside a database transaction while a sink is called.
//!
//! An effect whose task never ran (the process stopped first) is not lost:
//! its lease expires to `unknown` (`sweeper`), and the sink's status URL
//! tells whether the downstream ever applied it; if it did not, the key is
//! taken back and the effect sent again (`status`).

use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;
use sea_orm::{ConnectionTrait, DbErr};
use serde_json::Value;
use uuid::Uuid;

use super::engine::{Engine, SharedEngine, WriteEvent};
use crate::domain::cases::Resolution;
use crate::domain::decision::{Action, TransportMatch};
use crate::domain::delivery::{BodyParse, BodyRef, DeliveryId};
use crate::domain::journal::{
    CaseResolved, DecisionMade, DownstreamCall, EffectSettled, JournalEvent, KeySummary, KeyTaken,
    SettlementOutcome,
};
use crate::domain::plan::{self, Claim, EffectJob, Given, Plan, base_key};
use crate::domain::reservation::ReservationState;
use crate::metrics::DecisionLabels;
use crate::providers::sinks::{self, Attempt, EffectRequest, SinkKind};
use crate::store::Tx;
use crate::store::entities::deferred_delivery;
use crate::store::projections::deliveries;
use crate::store::writer::WriteJob;
use crate::store::{bodies, journal};

/// Reserves `claim` for the effect `key` describes; `None` when the key is
/// taken (nothing was written). On `Some`, the caller journals the key taken
/// in the same transaction (`Tx::append_taken`) and runs its effect
/// (`plan::job_of`) once it has committed.
pub async fn reserve_effect(
    tx: &mut Tx<'_>,
    engine: &Engine,
    sink: &str,
    delivery_id: DeliveryId,
    key: &KeySummary,
    claim: Claim,
    at: DateTime<Utc>,
) -> Result<Option<KeyTaken>, DbErr> {
    let taken = plan::take(key, claim, sink, engine.lease(), delivery_id, at);
    Ok(tx.reserve(&taken, at).await?.then_some(taken))
}

/// Runs the effect in the background, in its turn among the calls in flight
/// (`downstream_concurrency`); failures are journaled or, if the journal
/// itself fails, left to the lease sweeper (outcome unknown). A turn that
/// came after half the lease takes the key again first (`taken_again`).
pub fn spawn(engine: SharedEngine, job: EffectJob, source: String, event: Option<Value>) {
    tokio::spawn(async move {
        let queued = std::time::Instant::now();
        let Ok(turn) = engine.effect_calls.acquire().await else {
            return;
        };
        let job = if late(&engine, queued.elapsed()) {
            match taken_again(&engine, job.clone()).await {
                Ok(Some(renewed)) => renewed,
                Ok(None) => {
                    tracing::info!(effect.id = %job.effect_id, "effect not called: its reservation moved on while it waited for a turn");
                    return;
                }
                Err(DbErr::Custom(why)) if why == EXPIRY_SETTLED => {
                    tracing::info!(effect.id = %job.effect_id, "effect not called: {why}");
                    return;
                }
                Err(error) => {
                    tracing::error!(effect.id = %job.effect_id, %error, "effect not called: its key could not be taken again after a late turn; its lease will expire to unknown");
                    return;
                }
            }
        } else {
            job
        };
        if let Err(error) = run(&engine, &job, &source, event, turn).await {
            tracing::error!(delivery.id = %job.delivery_id, effect.id = %job.effect_id, %error, "effect not settled; its lease will expire to unknown");
        }
    });
}

/// Calls the downstream in its `turn`, given back once the call ended (the
/// settlement may wait on the database), then settles what it answered.
async fn run(
    engine: &SharedEngine,
    job: &EffectJob,
    source: &str,
    event: Option<Value>,
    turn: tokio::sync::SemaphorePermit<'_>,
) -> Result<(), DbErr> {
    let sink = sinks::select(&engine.sinks, source, &job.effect_type);
    let request = EffectRequest {
        idempotency_key: job.key.clone(),
        effect_id: job.effect_id,
        effect_type: job.effect_type.clone(),
        delivery_id: job.delivery_id.to_string(),
        source: source.to_owned(),
        event,
    };
    let sent_at = Utc::now();
    let started = std::time::Instant::now();
    let attempt = sinks::apply(&engine.http, sink, &request).await;
    drop(turn);
    let took = started.elapsed();
    engine
        .metrics
        .downstream_latency(&job.effect_type, took.as_secs_f64());
    let call = matches!(sink, SinkKind::Http { .. }).then(|| DownstreamCall {
        sent_at,
        latency_ms: u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
        status: attempt.status(),
    });
    settle_patiently(engine, job, attempt, call).await?;
    redecide_deferred(engine, base_key(&job.key)).await
}

/// `settle`, tried again while the database refuses it (its writer busy
/// past its timeout while a rebuild holds it, a connection lost) for as
/// long as a lease: the downstream has answered, and an effect it applied
/// or refused, left unsettled, would expire to an unknown outcome, a case
/// for a person. Such a settlement moves its reservation on: one that
/// committed before its answer was lost is refused the second time,
/// harmlessly. An unknown outcome is settled once: the lease's expiry says
/// the same, and a second one would open a second case.
async fn settle_patiently(
    engine: &Engine,
    job: &EffectJob,
    attempt: Attempt,
    call: Option<DownstreamCall>,
) -> Result<bool, DbErr> {
    let deadline = std::time::Instant::now() + engine.lease().to_std().unwrap_or_default();
    let mut pause = std::time::Duration::from_millis(100);
    loop {
        let again = !matches!(attempt, Attempt::Unknown { .. });
        match settle(engine, job, attempt.clone(), call).await {
            Err(error) if again && std::time::Instant::now() + pause < deadline => {
                tracing::warn!(effect.id = %job.effect_id, %error, "settlement not written; trying again");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(std::time::Duration::from_secs(5));
            }
            settled => return settled,
        }
    }
}

/// Journals how the attempt ended (with the downstream `call` it made, if
/// any), if the reservation is still this job's.
pub async fn settle(
    engine: &Engine,
    job: &EffectJob,
    attempt: Attempt,
    call: Option<DownstreamCall>,
) -> Result<bool, DbErr> {
    let (outcome, result, authoritative_ref, error) = match attempt {
        Attempt::Applied {
            result,
            authoritative_ref,
        } => (
            SettlementOutcome::Applied,
            Some(result),
            authoritative_ref,
            None,
        ),
        Attempt::Failed { error, answer, .. } => (
            SettlementOutcome::Failed,
            answer,
            None,
            Some(error.to_owned()),
        ),
        Attempt::Unknown { error, answer, .. } => (
            SettlementOutcome::Unknown,
            answer,
            None,
            Some(error.to_owned()),
        ),
    };
    let settled = EffectSettled {
        key: job.key.clone(),
        effect_id: job.effect_id,
        fencing_token: job.fencing_token,
        outcome,
        result,
        authoritative_ref,
        error,
        case_id: (outcome == SettlementOutcome::Unknown).then(Uuid::now_v7),
        delivery_id: job.delivery_id,
        call,
    };
    let event = match outcome {
        SettlementOutcome::Applied => JournalEvent::EffectApplied(settled),
        SettlementOutcome::Failed => JournalEvent::EffectFailed(settled),
        SettlementOutcome::Unknown => JournalEvent::EffectOutcomeUnknown(settled),
    };
    let took = engine
        .writer
        .submit(WriteEvent::claim(Some(job.delivery_id), event))
        .await?;
    if took {
        engine
            .metrics
            .effect_settled(&job.effect_type, outcome.state());
        tracing::info!(delivery.id = %job.delivery_id, effect.id = %job.effect_id, outcome = outcome.state(), "effect settled");
    } else {
        tracing::warn!(effect.id = %job.effect_id, "settlement refused: the reservation moved on (fencing token)");
    }
    Ok(took)
}

/// Re-decides every delivery deferred on `key`.
pub async fn redecide_deferred(engine: &SharedEngine, key: &str) -> Result<(), DbErr> {
    let waiting = deliveries::waiting_on(&engine.db, key).await?;
    for row in waiting {
        redecide(engine, &row).await?;
    }
    Ok(())
}

/// Decides a deferred delivery again. Does nothing while its key's lease is
/// alive, or if another re-decider got to it first.
pub async fn redecide(engine: &SharedEngine, row: &deferred_delivery::Model) -> Result<(), DbErr> {
    let Ok(delivery_id) = row.delivery_id.parse::<DeliveryId>() else {
        return Ok(());
    };
    let journaled = Journaled::read(&engine.db, delivery_id).await?;
    let Some(mut key) = journaled.key.clone() else {
        return Ok(());
    };
    // Sealed from its body, as at its reception (the seal is not
    // journaled), so that an operation made by hand holds it too.
    key.held_as = crate::services::cases::sealed(engine, &journaled).await?;
    let redecision = Redecision {
        engine: engine.clone(),
        delivery_id,
        id: row.delivery_id.clone(),
        source: row.source.clone(),
        key: key.clone(),
    };
    let redecided = engine.writer.submit(redecision).await?;
    if let Redecided::Decided(made, job) = &redecided {
        // A `record` sink's effect is applied with the claim.
        if made.decision.action == Action::Process && job.is_none() {
            engine.metrics.effect_settled(&key.effect_type, "applied");
        }
        engine.metrics.decided(DecisionLabels {
            source: &row.source,
            provider: journaled.provider.as_deref().unwrap_or("none"),
            strategy: &key.strategy,
            effect_type: &key.effect_type,
            strength: key.strength.as_str(),
            decision: made.decision.action.as_str(),
            reason: made.decision.reason.as_str(),
            retry: journaled.sent_again,
        });
    }
    if let Redecided::Decided(_, Some(job)) = redecided {
        let event = journaled.event(engine).await?;
        spawn(engine.clone(), job, row.source.clone(), event);
    }
    Ok(())
}

/// A deferred delivery decided again, as a writer job.
struct Redecision {
    engine: SharedEngine,
    delivery_id: DeliveryId,
    /// The delivery's id as its row spells it.
    id: String,
    source: String,
    key: KeySummary,
}

/// What a re-decision came to.
enum Redecided {
    /// Another re-decider had it, or it stays deferred.
    NotNow,
    /// Decided (as journaled); the effect to run after commit, if any.
    Decided(Box<DecisionMade>, Option<EffectJob>),
}

impl WriteJob for Redecision {
    type Output = Redecided;

    /// It may take a key after reading whether a person made its operation
    /// by hand (`Tx::decide_key`): committed alone, it waits for a case's
    /// resolution that may record one, as keyed work does.
    fn owns_every_key(&self) -> bool {
        true
    }

    fn run<'a>(self, tx: &'a mut Tx<'_>) -> BoxFuture<'a, Result<Self::Output, DbErr>> {
        Box::pin(async move {
            let Self {
                engine,
                delivery_id,
                id,
                source,
                key,
            } = self;
            // Its turn in the writer came: a lease taken now starts now.
            let at = Utc::now();
            // Claim the re-decision: only one re-decider per deferred delivery.
            if !tx.claim_redecision(&id).await? {
                return Ok(Redecided::NotNow);
            }
            let given = Given {
                key: &key,
                transport: TransportMatch::FirstSeen,
                route: engine.route(&source, &key),
                delivery_id,
                at,
                new_effect: Uuid::now_v7(),
            };
            let plan = tx.decide_key(&given).await?;
            if plan.made.decision.action == Action::Defer {
                return Ok(Redecided::NotNow);
            }
            let job = plan.job();
            let Plan { mut made, take } = plan;
            made.redecided = true;
            if let Some(taken) = take {
                tx.append_taken(taken, at);
            }
            tx.record(
                Some(delivery_id),
                JournalEvent::DecisionMade(made.clone()),
                at,
            )
            .await?;
            Ok(Redecided::Decided(Box::new(made), job))
        })
    }
}

/// What the journal holds about a delivery that waits (deferred, or in a
/// case), read once: its key, its body and the source it came from.
#[derive(Default)]
pub(crate) struct Journaled {
    pub key: Option<KeySummary>,
    pub body: Option<BodyRef>,
    pub source: Option<String>,
    pub provider: Option<String>,
    /// Its first decision found it a provider's retry of an earlier
    /// delivery (the same delivery id or raw body).
    pub sent_again: bool,
}

impl Journaled {
    pub async fn read<C: ConnectionTrait>(conn: &C, id: DeliveryId) -> Result<Self, DbErr> {
        let events = journal::for_delivery(conn, id)
            .await
            .map_err(|e| DbErr::Custom(e.to_string()))?;
        Ok(Self::of(events.into_iter().map(|stored| stored.event)))
    }

    /// What a delivery's events, in journal order from its reception, say.
    pub fn of(events: impl IntoIterator<Item = JournalEvent>) -> Self {
        let mut journaled = Self::default();
        let mut decided = false;
        for event in events {
            match event {
                JournalEvent::KeyDerived(derived) => journaled.key = derived.business,
                JournalEvent::DeliveryReceived(r) => {
                    journaled.source = Some(r.origin.source);
                    journaled.provider = Some(r.origin.provider);
                    if r.parse == BodyParse::Json {
                        journaled.body = Some(r.body);
                    }
                }
                JournalEvent::DecisionMade(made) if !decided => {
                    decided = true;
                    journaled.sent_again = made.first_delivery_id.is_some();
                }
                _ => {}
            }
        }
        journaled
    }

    /// The event the delivery asks for, for the downstream service, its
    /// look-ups and reconciliation: its parsed body, or the one event of a
    /// batch of one (`ProviderDef::batch_of_one`), as the ingest sent it.
    pub async fn event(&self, engine: &Engine) -> Result<Option<Value>, DbErr> {
        self.event_on(&engine.db, engine).await
    }

    /// `event`, read through `conn` (a transaction sees what it wrote).
    pub async fn event_on<C: ConnectionTrait>(
        &self,
        conn: &C,
        engine: &Engine,
    ) -> Result<Option<Value>, DbErr> {
        let Some(body) = &self.body else {
            return Ok(None);
        };
        let parsed: Option<Value> = bodies::get(conn, &body.sha256)
            .await?
            .and_then(|raw| serde_json::from_slice(&raw).ok());
        let provider = self
            .provider
            .as_deref()
            .and_then(|p| engine.catalog.provider(p));
        Ok(match (provider, parsed) {
            (Some(provider), Some(body)) => Some(provider.batch_of_one(&body).unwrap_or(body)),
            (_, parsed) => parsed,
        })
    }
}

// An effect's turn among the calls in flight (`downstream_concurrency`).
//
// Waiting for a turn counts against the reservation's lease. A call whose
// turn comes after half its lease is not sent on that lease: the sweeper
// may expire it while the call is in flight, and the status look-up could
// then send a second attempt beside it. The key is taken again first, in
// one transaction: the unsent attempt settled failed (`not_called_in_time`,
// which is true: nothing left), the key reserved with the next fencing
// token and a fresh lease. The call goes out under that token. A lease
// that ran out while the call waited opened a case (outcome unknown): the
// call resolves it in the same transaction, after the unsent attempt is
// claimed, and is sent only if no one else (a person, the status look-up)
// settled it before; otherwise the transaction rolls back
// (`EXPIRY_SETTLED`).

/// Why an attempt whose turn came too late was never sent.
pub const NOT_CALLED: &str = "not_called_in_time";

/// The error a late turn rolls back with when someone settled the case its
/// lease's expiry opened: they decided, and nothing is sent.
const EXPIRY_SETTLED: &str =
    "the case its lease's expiry opened was settled meanwhile: nothing is sent";

/// Whether a call that waited `waited` for its turn must take its key again.
pub fn late(engine: &SharedEngine, waited: std::time::Duration) -> bool {
    waited > engine.lease().to_std().unwrap_or_default() / 2
}

/// `job` under a fresh lease and the next fencing token, or `None` when its
/// reservation moved on meanwhile (settled, or taken by someone else):
/// nothing is to be sent.
pub async fn taken_again(
    engine: &SharedEngine,
    job: EffectJob,
) -> Result<Option<EffectJob>, DbErr> {
    let journaled = Journaled::read(&engine.db, job.delivery_id).await?;
    let Some(summary) = journaled.key else {
        return Ok(None);
    };
    let source = journaled.source.unwrap_or_default();
    let sink = sinks::select(&engine.sinks, &source, &job.effect_type).name();
    let again = TakeAgain {
        engine: engine.clone(),
        job,
        summary,
        sink,
    };
    engine.writer.submit(again).await
}

/// The retake, as a writer job.
struct TakeAgain {
    engine: SharedEngine,
    job: EffectJob,
    summary: KeySummary,
    sink: &'static str,
}

impl WriteJob for TakeAgain {
    type Output = Option<EffectJob>;

    fn run<'a>(self, tx: &'a mut Tx<'_>) -> BoxFuture<'a, Result<Self::Output, DbErr>> {
        let Self {
            engine,
            job,
            summary,
            sink,
        } = self;
        Box::pin(async move {
            let at = Utc::now();
            let held = tx.reservation(&job.key).await?;
            let Some(held) = held.filter(|r| {
                r.fencing_token == Some(job.fencing_token)
                    && matches!(
                        ReservationState::parse(&r.state),
                        Some(ReservationState::Reserved | ReservationState::Unknown)
                    )
            }) else {
                return Ok(None);
            };
            // Read unknown, its lease ran out: whoever settled the case the
            // expiry opened (a person, a refund made by hand) decided, and
            // nothing is sent on the engine's say alone.
            let read_unknown =
                ReservationState::parse(&held.state) == Some(ReservationState::Unknown);
            let open = tx
                .open_expiry(&held.first_delivery_id, job.effect_id, job.fencing_token)
                .await?;
            if read_unknown && open.is_none() {
                return Ok(None);
            }
            let unsent = EffectSettled {
                key: job.key.clone(),
                effect_id: job.effect_id,
                fencing_token: job.fencing_token,
                outcome: SettlementOutcome::Failed,
                result: None,
                authoritative_ref: None,
                error: Some(NOT_CALLED.to_owned()),
                case_id: None,
                delivery_id: job.delivery_id,
                call: None,
            };
            let failed = JournalEvent::EffectFailed(unsent);
            if !tx.claim(Some(job.delivery_id), &failed, at).await? {
                return Ok(None);
            }
            // The expiry's case, read, or opened since the read by another
            // process's sweeper (without group commit nothing orders the
            // two, and the claim takes the row unknown too): this call's,
            // which never left. Settled by someone else meanwhile, the
            // claim rolls back and nothing is sent.
            let open = match open {
                Some(case_id) => Some(case_id),
                None => {
                    tx.open_expiry(&held.first_delivery_id, job.effect_id, job.fencing_token)
                        .await?
                }
            };
            if let Some(case_id) = open
                && !the_call_never_left(tx, &held, &job, case_id, at).await?
            {
                return Err(DbErr::Custom(EXPIRY_SETTLED.to_owned()));
            }
            let claimed = Claim {
                key: job.key.clone(),
                effect_id: job.effect_id,
                fencing_token: job.fencing_token + 1,
                provider_ref: held.provider_ref,
            };
            retake(tx, &engine, sink, job.delivery_id, &summary, claimed, at).await
        })
    }
}

/// Resolves `case_id`, the case the expiry of `held`'s lease opened, as the
/// call that never left and goes out now (`effect_retried`); false when it
/// is no longer open.
async fn the_call_never_left(
    tx: &mut Tx<'_>,
    held: &crate::store::entities::effect::Model,
    job: &EffectJob,
    case_id: Uuid,
    at: DateTime<Utc>,
) -> Result<bool, DbErr> {
    let first: Option<DeliveryId> = held.first_delivery_id.parse().ok();
    let resolved = JournalEvent::CaseResolved(CaseResolved {
        case_id,
        resolution: Resolution::EffectRetried,
        resolved_by: "engine".to_owned(),
        note: "the call never left: its turn came after its lease ran out; sent now under its key"
            .to_owned(),
        authoritative_ref: None,
        effect_id: Some(job.effect_id),
        key: None,
        made_by_hand: None,
    });
    tx.claim(first, &resolved, at).await
}

/// Takes a key settled failed in this transaction again under `claimed`
/// (its next fencing token), journaled with it; the effect to send once it
/// commits. The key taken by anyone else meanwhile rolls everything back.
pub async fn retake(
    tx: &mut Tx<'_>,
    engine: &Engine,
    sink: &str,
    delivery_id: DeliveryId,
    summary: &KeySummary,
    claimed: Claim,
    at: DateTime<Utc>,
) -> Result<Option<EffectJob>, DbErr> {
    let Some(taken) = reserve_effect(tx, engine, sink, delivery_id, summary, claimed, at).await?
    else {
        return Err(DbErr::Custom("the effect's key was taken back".to_owned()));
    };
    let job = plan::job_of(&taken);
    tx.append_taken(taken, at);
    Ok(job)
}
