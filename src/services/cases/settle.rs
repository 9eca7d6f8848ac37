//! Settling a case, by a person or by the provider's answer: one writer job
//! reads what the verdict needs, judges a look-up's answer against what the
//! transaction sees, claims the open case and takes the effect's key — all
//! or nothing. A provider operation cited is consumed by the effect it
//! justifies, atomically with its claim.

use crate::domain::reservation::ReservationState;
use chrono::Utc;
use futures_util::future::BoxFuture;
use sea_orm::DbErr;
use uuid::Uuid;

use super::accounted::{accounted, uncited_distinct};
use super::by_hand::{ARRIVED, PAID, Recorded, UNCHECKED};
use crate::auth::{Action, Principal};
use crate::domain::cases::{self, CaseFacts, CaseStatus, Refusal, Resolution};
use crate::domain::decision::Reason;
use crate::domain::delivery::DeliveryId;
use crate::domain::journal::{
    CaseResolved, DiscrepancyKind, JournalEvent, KeySummary, LookupPerformed,
};
use crate::domain::lookup::{LookupVerdict, judge};
use crate::domain::plan::{self, Claim, EffectJob};
use crate::providers::sinks;
use crate::services::access;
use crate::services::effects::reserve_effect;
use crate::services::effects::{self, Journaled};
use crate::services::engine::{Engine, SharedEngine};
use crate::store::Tx;
use crate::store::entities::case;
use crate::store::writer::WriteJob;

/// How a case ended, as journaled.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub case_id: Uuid,
    pub resolution: Resolution,
    pub effect_id: Option<Uuid>,
    pub key: Option<String>,
    /// The provider operation the resolution cited (and its effect consumed).
    pub reference: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum CaseError {
    #[error("no case with this id")]
    NotFound,
    /// The caller's role may not resolve this case.
    #[error("{}", forbidden_why(*critical))]
    Forbidden { critical: bool },
    /// The caller, read again as the action is written, was disabled,
    /// revoked or demoted since the request was let in.
    #[error("the account that asked no longer allows this")]
    NoLongerAllowed,
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error(transparent)]
    Db(#[from] DbErr),
}

/// Who settles a case, and on what.
pub(crate) enum Settler {
    /// A person's choice, citing a provider operation or not.
    Person {
        resolution: Resolution,
        reference: Option<String>,
        /// Who asks, and what their role must allow: read again in the
        /// transaction that resolves (`access::still`).
        caller: Principal,
        needs: Action,
    },
    /// The provider's answer: the operations that match the delivery (or
    /// why none can be compared), judged against the effects under the key
    /// inside the transaction that acts on the verdict; the look-up is
    /// journaled in it too.
    LookUp {
        performed: LookupPerformed,
        matching: Result<Vec<String>, String>,
    },
}

/// What a settlement came to.
pub(crate) enum Settled {
    Resolved(Resolved),
    /// The look-up's answer settles nothing: the case stays for a person.
    ForAPerson(LookupVerdict),
}

/// How many times a settlement is tried when another process consumed the
/// provider operation it cited between its read and its commit.
const CONTENDED: usize = 3;

fn forbidden_why(critical: bool) -> &'static str {
    if critical {
        "a case about money is resolved by finance or an admin"
    } else {
        "this case is resolved by an engineer or an admin"
    }
}

/// Settles `case_id` by `settler`: one job reads what the verdict needs,
/// claims the open case and takes the effect's key, or does nothing.
pub(crate) async fn settle(
    engine: &SharedEngine,
    case_id: Uuid,
    settler: Settler,
    by: String,
    note: String,
) -> Result<Settled, CaseError> {
    let case = crate::store::cases::find(&engine.db, case_id)
        .await?
        .ok_or(CaseError::NotFound)?;
    // A reconciliation finding about a missing effect has no delivery.
    let delivery_id: Option<DeliveryId> = case.delivery_id.parse().ok();
    let journaled = match delivery_id {
        Some(id) => Journaled::read(&engine.db, id).await?,
        None => Journaled::default(),
    };
    // Held on an outcome unknown: the effect's own case always, another
    // delivery's (a retry, or a second operation that looks alike) until
    // that effect settles — applied, another may be distinct; unknown,
    // applying another could be the first one twice. Settled is for good:
    // a key is only taken again after a failure.
    let unsettled = match (
        case.reason == Reason::OutcomeUnknown.as_str(),
        &case.business_key,
    ) {
        (true, Some(key)) => crate::store::reservations::find(&engine.db, key)
            .await?
            .is_some_and(|row| {
                row.state == ReservationState::Unknown.as_str()
                    || row.state == ReservationState::Reserved.as_str()
            }),
        _ => false,
    };
    let facts = CaseFacts {
        open: case.status == CaseStatus::Open.as_str(),
        can_apply: journaled.key.is_some() && journaled.body.is_some(),
        has_existing_effect: existing_effect(&case).is_some(),
        outcome_unknown: case.reason == Reason::OutcomeUnknown.as_str()
            && (unsettled
                || case
                    .details
                    .get("effect_id")
                    .is_some_and(|id| !id.is_null())),
        close_only: is_finding(&case),
        missing_effect: case.reason == DiscrepancyKind::MissingEffect.as_str(),
    };
    let mut made_by_hand = None;
    if let Settler::Person {
        resolution,
        reference,
        ..
    } = &settler
    {
        cases::check(facts, *resolution, &note)?;
        // Held as made by hand: applied only for the operation it is, even
        // when nothing seals it any more (its listing or strategy gone,
        // its body purged); the transaction checks any held delivery.
        let uncited = reference.as_deref().is_none_or(|r| r.trim().is_empty());
        if case.reason == Reason::MadeByHand.as_str()
            && *resolution == Resolution::ProcessAsDistinct
            && uncited
        {
            return Err(Refusal::CiteTheOperation.into());
        }
        if *resolution == Resolution::MadeByHand {
            made_by_hand = Some(super::by_hand::recorded(engine, &case).await?);
        }
    }
    let source = journaled.source.clone().unwrap_or_default();
    // Sealed from its body, as at its reception (the seal is not
    // journaled): what an operation made by hand would hold it by.
    let mut key = journaled.key.clone();
    if let Some(key) = key.as_mut() {
        key.held_as = super::by_hand::sealed(engine, &journaled).await?;
    }
    let context = Context {
        case_id,
        delivery_id,
        existing: existing_effect(&case),
        facts,
        key,
        sink: journaled.key.as_ref().map(|key| {
            sinks::select(&engine.sinks, &source, &key.effect_type)
                .name()
                .to_owned()
        }),
        by,
        note,
        made_by_hand,
    };
    let critical = matches!(
        settler,
        Settler::Person {
            needs: Action::ResolveCriticalCases,
            ..
        }
    );
    let mut settler = Some(settler);
    let mut tries = 0;
    let outcome = loop {
        tries += 1;
        let attempt = settler.take().ok_or(Refusal::AlreadyResolved)?;
        let retry = attempt.clone_for_retry();
        let job = ResolveCase {
            engine: engine.clone(),
            context: context.clone(),
            settler: attempt,
        };
        let outcome = engine.writer.submit(job).await;
        match outcome {
            Err(error) if consumed_meanwhile(&error) && tries < CONTENDED => {
                settler = Some(retry);
            }
            Err(error) if consumed_meanwhile(&error) => {
                return Err(Refusal::OperationConsumed.into());
            }
            // A refusal the job rolled back with, or a storage error.
            Err(DbErr::Custom(why)) => {
                let refusal = rolled_back_by(&why).ok_or(DbErr::Custom(why))?;
                return Err(refusal.into());
            }
            other => break other?,
        }
    };
    let (settled, job) = match outcome {
        Outcome::Forbidden => return Err(CaseError::Forbidden { critical }),
        Outcome::Refused(refusal) => return Err(refusal.into()),
        Outcome::ForAPerson(verdict) => return Ok(Settled::ForAPerson(verdict)),
        Outcome::Resolved(resolved, job) => (resolved, job),
    };
    match (job, &context.key) {
        (Some(job), _) => {
            let body = journaled.event(engine).await?;
            effects::spawn(engine.clone(), job, source, body);
        }
        // A `record` sink's effect, applied with the resolution's claim.
        (None, Some(key))
            if settled.resolution == Resolution::ProcessAsDistinct && settled.key.is_some() =>
        {
            engine.metrics.effect_settled(&key.effect_type, "applied");
        }
        (None, _) => {}
    }
    Ok(Settled::Resolved(settled))
}

impl Settler {
    fn clone_for_retry(&self) -> Self {
        match self {
            Self::Person {
                resolution,
                reference,
                caller,
                needs,
            } => Self::Person {
                resolution: *resolution,
                reference: reference.clone(),
                caller: caller.clone(),
                needs: *needs,
            },
            Self::LookUp {
                performed,
                matching,
            } => Self::LookUp {
                performed: performed.clone(),
                matching: matching.clone(),
            },
        }
    }
}

/// The error a settlement job ends with when the operation it cites is
/// consumed: its writes roll back.
const CONSUMED: &str = "the provider operation cited is already consumed";
const UNCITED: &str = "another effect under the key cites no provider operation";
const HELD: &str = "the delivery looks like an operation made by hand and cites none";

/// The refusal a settlement job's transaction rolled back with, by the
/// error it ended with.
fn rolled_back_by(why: &str) -> Option<Refusal> {
    [
        (CONSUMED, Refusal::OperationConsumed),
        (UNCITED, Refusal::CiteAnOperation),
        (HELD, Refusal::CiteTheOperation),
        (PAID, Refusal::OperationPaid),
        (UNCHECKED, Refusal::ReadModelBehind),
        (ARRIVED, Refusal::LookAlikeArrived),
    ]
    .into_iter()
    .find_map(|(marker, refusal)| (marker == why).then_some(refusal))
}

/// Whether a settlement lost a race for the provider operation it cited:
/// another process's effect took it between this one's read and its commit.
fn consumed_meanwhile(error: &DbErr) -> bool {
    matches!(
        error.sql_err(),
        Some(sea_orm::SqlErr::UniqueConstraintViolation(ref what)) if what.contains("provider_ref")
    )
}

enum Outcome {
    /// The caller's role, read in the transaction, does not allow it.
    Forbidden,
    Refused(Refusal),
    ForAPerson(LookupVerdict),
    Resolved(Resolved, Option<EffectJob>),
}

/// What a settlement job knows before it starts.
#[derive(Clone)]
struct Context {
    case_id: Uuid,
    delivery_id: Option<DeliveryId>,
    existing: Option<Uuid>,
    facts: CaseFacts,
    key: Option<KeySummary>,
    sink: Option<String>,
    by: String,
    note: String,
    /// Made by hand: the finding's operation, its reference from then on,
    /// and what its look-alikes are held by.
    made_by_hand: Option<Recorded>,
}

impl Context {
    /// Inside the write transaction: the verdict (a look-up's is judged
    /// here, against what this transaction sees), then the claim on the
    /// open case and the effect's key, all or nothing.
    async fn settle(
        self,
        tx: &mut Tx<'_>,
        engine: &Engine,
        settler: Settler,
    ) -> Result<Outcome, DbErr> {
        let at = Utc::now();
        let (resolution, reference) = match settler {
            Settler::Person {
                resolution,
                reference,
                caller,
                needs,
            } => {
                // Disabled or demoted since the request was let in (or since
                // a bulk resolution began): it resolves nothing more.
                let now = access::still(tx.connection(), &caller)
                    .await
                    .map_err(|error| DbErr::Custom(error.to_string()))?;
                if !now.is_some_and(|caller| caller.may(needs)) {
                    return Ok(Outcome::Forbidden);
                }
                (resolution, reference)
            }
            Settler::LookUp {
                mut performed,
                matching,
            } => {
                let verdict = match (&self.key, matching) {
                    (_, Err(why)) => LookupVerdict::person(why),
                    (None, Ok(_)) => LookupVerdict::person("the delivery has no business key"),
                    (Some(key), Ok(matching)) => {
                        judge(&matching, &accounted(tx, engine, key, &matching).await?)
                    }
                };
                let verdict = match &verdict {
                    LookupVerdict::ProcessAsDistinct { .. } => {
                        cases::check(self.facts, Resolution::ProcessAsDistinct, &self.note)
                            .map_or_else(|r| LookupVerdict::person(r.to_string()), |()| verdict)
                    }
                    LookupVerdict::ConfirmDuplicate => {
                        cases::check(self.facts, Resolution::ConfirmDuplicate, &self.note)
                            .map_or_else(|r| LookupVerdict::person(r.to_string()), |()| verdict)
                    }
                    LookupVerdict::ForAPerson { .. } => verdict,
                };
                performed.verdict = verdict.code().to_owned();
                if let LookupVerdict::ForAPerson { why } = &verdict {
                    performed.why = Some(why.clone());
                }
                tx.record(
                    self.delivery_id,
                    JournalEvent::LookupPerformed(performed),
                    at,
                )
                .await?;
                match verdict {
                    LookupVerdict::ProcessAsDistinct { reference } => {
                        (Resolution::ProcessAsDistinct, Some(reference))
                    }
                    LookupVerdict::ConfirmDuplicate => (Resolution::ConfirmDuplicate, None),
                    person @ LookupVerdict::ForAPerson { .. } => {
                        return Ok(Outcome::ForAPerson(person));
                    }
                }
            }
        };
        let distinct = match (resolution, &self.key) {
            (Resolution::ProcessAsDistinct, Some(key)) => Some(key),
            _ => None,
        };
        // One spelling of the operation cited, whichever door it came in by:
        // the ledger and its unique index compare references exactly.
        // Made by hand, the finding's own operation, whatever was typed.
        let reference = match &self.made_by_hand {
            Some(recorded) => Some(recorded.made.operation_id.clone()),
            None => reference
                .map(|r| r.trim().to_owned())
                .filter(|r| !r.is_empty()),
        };
        let effect_id = match resolution {
            Resolution::ProcessAsDistinct if distinct.is_some() => Some(Uuid::now_v7()),
            Resolution::ConfirmDuplicate => self.existing,
            _ => None,
        };
        let applied_key = distinct.map(|key| cases::distinct_key(&key.key, self.case_id));
        let event = CaseResolved {
            case_id: self.case_id,
            resolution,
            resolved_by: self.by.clone(),
            note: self.note.clone(),
            authoritative_ref: reference.clone(),
            effect_id,
            key: applied_key.clone(),
            made_by_hand: self.made_by_hand.as_ref().map(|r| r.made.clone()),
        };
        // The claim: only an open case resolves, once.
        if !tx
            .claim(self.delivery_id, &JournalEvent::CaseResolved(event), at)
            .await?
        {
            return Ok(Outcome::Refused(Refusal::AlreadyResolved));
        }
        // Made by hand: refused if it was paid, or may have been since
        // the checks before this transaction (`by_hand::Recorded`).
        if let Some(recorded) = &self.made_by_hand {
            recorded.still_unpaid(tx, engine).await?;
        }
        // The operation cited: consumed by the effect it justifies, once.
        // Already consumed, the resolution's claim is rolled back with it.
        if let (Some(key), Some(cited)) = (distinct, &reference) {
            let taken = tx
                .citing(&key.effect_type, std::slice::from_ref(cited))
                .await?;
            if !taken.is_empty() || super::by_hand::made(tx, engine, key, cited).await? {
                return Err(DbErr::Custom(CONSUMED.to_owned()));
            }
        }
        // A delivery that looks like an operation made by hand, whatever
        // held it (its own hold, a look-alike, a look-up that named the
        // operation): applied only for the operation it is, which the
        // ledger then consumes.
        if let (Some(key), None) = (distinct, &reference)
            && super::by_hand::holds(tx, key).await?
        {
            return Err(DbErr::Custom(HELD.to_owned()));
        }
        // Two effects beside the key's own that no provider operation
        // justifies: two people may each have processed a look-alike of
        // the same retry as distinct. The second must say which operation
        // it is, so that the ledger's one-use rule can hold; its claim is
        // rolled back with it.
        if let (Some(key), None) = (distinct, &reference)
            && uncited_distinct(tx, key).await?
        {
            return Err(DbErr::Custom(UNCITED.to_owned()));
        }
        let resolved = Resolved {
            case_id: self.case_id,
            resolution,
            effect_id,
            key: applied_key.clone(),
            reference: reference.clone(),
        };
        // A duplicate's link to the existing effect is the resolution's own
        // projection (`store::projections`); a distinct effect takes the
        // case's own key.
        let mut job = None;
        if let (Some(key), Some(claim_key), Some(effect_id), Some(delivery_id)) =
            (distinct, applied_key, effect_id, self.delivery_id)
        {
            let claim = Claim {
                key: claim_key,
                effect_id,
                fencing_token: 1,
                provider_ref: reference,
            };
            let sink = self.sink.as_deref().unwrap_or_default();
            // The case's own key taken while the case was open: nothing
            // commits.
            let Some(taken) = reserve_effect(tx, engine, sink, delivery_id, key, claim, at).await?
            else {
                return Err(DbErr::Custom(
                    "the case's effect key is already taken".to_owned(),
                ));
            };
            job = plan::job_of(&taken);
            tx.append_taken(taken, at);
        }
        Ok(Outcome::Resolved(resolved, job))
    }
}

/// A case settled, as a writer job (see `Context::settle`).
struct ResolveCase {
    engine: SharedEngine,
    context: Context,
    settler: Settler,
}

impl WriteJob for ResolveCase {
    type Output = Outcome;

    fn owns_every_key(&self) -> bool {
        true
    }

    fn run<'a>(self, tx: &'a mut Tx<'_>) -> BoxFuture<'a, Result<Outcome, DbErr>> {
        Box::pin(async move { self.context.settle(tx, &self.engine, self.settler).await })
    }
}

/// Whether `case` is a finding of reconciliation (a missing or an
/// unexpected effect), which can only be closed with a reason.
pub(super) fn is_finding(case: &case::Model) -> bool {
    closes_only(&case.reason)
}

/// Whether a case of `reason` is a reconciliation finding, closed only with
/// a reason.
pub(crate) fn closes_only(reason: &str) -> bool {
    [
        DiscrepancyKind::MissingEffect.as_str(),
        DiscrepancyKind::UnexpectedEffect.as_str(),
    ]
    .contains(&reason)
}

/// The effect a case's delivery was compared with, when there is one.
pub(crate) fn existing_effect(case: &case::Model) -> Option<Uuid> {
    case.details
        .get("effect_id")
        .and_then(|v| v.as_str())
        .and_then(|id| id.parse().ok())
}
