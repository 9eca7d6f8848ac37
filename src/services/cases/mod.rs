//! Resolving cases: a person or the provider's API settles what the
//! decision matrix could not. The rules are in `domain::cases`; who may
//! resolve which case is decided here (`resolving`), on the caller, for
//! every route alike, and recorded as `resolved_by`; `settle` is the one
//! job that resolves.
//!
//! A case resolves once: the resolution is an atomic claim on the open case,
//! in the transaction that applies its consequence (a reservation under the
//! case's own key, or a link to the existing effect). Two operators at once,
//! or one form submitted twice, get one resolution and at most one effect.

mod accounted;
mod by_hand;
pub use by_hand::held;
pub(crate) use by_hand::sealed;
mod settle;

pub use settle::{CaseError, Resolved};
pub(super) use settle::{Settled, Settler, settle};
pub(crate) use settle::{closes_only, existing_effect};

use chrono::Utc;
use futures_util::future::BoxFuture;
use sea_orm::DbErr;
use uuid::Uuid;

use super::access::AsCaller;
use super::effects::Journaled;
use super::engine::{IfClaimed, SharedEngine, WriteEvent};
use crate::auth::{Action, Principal};
use crate::domain::cases::{Refusal, Resolution};
use crate::domain::confidence::Criticality;
use crate::domain::delivery::DeliveryId;
use crate::domain::journal::{CaseAssigned, CaseCommented, JournalEvent};
use crate::store::Tx;
use crate::store::writer::WriteJob;

/// A resolution asked for by a person (or a token).
pub struct Resolve {
    pub case_id: Uuid,
    pub resolution: Resolution,
    /// Who resolves it (an operator, a token): their role must allow it
    /// (`may_resolve`).
    pub by: Principal,
    pub note: String,
    /// The provider's operation the person cites: processed as distinct,
    /// the effect consumes it.
    pub authoritative_ref: Option<String>,
}

/// What resolving a case takes: a case about a critical effect (money,
/// rights, stock) is resolved by finance or an admin; any other by an
/// engineer or an admin. Unknown criticality counts as critical.
pub fn resolving(critical: bool) -> Action {
    if critical {
        Action::ResolveCriticalCases
    } else {
        Action::ResolveCases
    }
}

/// Whether `caller` may resolve `case_id`, and whether it is critical.
pub async fn may_resolve(
    engine: &SharedEngine,
    caller: &Principal,
    case_id: Uuid,
) -> Result<bool, CaseError> {
    let critical = is_critical(engine, case_id).await?;
    Ok(caller.may(resolving(critical)))
}

/// Resolves a case as a person asked and, when processed as distinct,
/// starts its effect once the resolution committed. Refused unless the
/// caller's role may resolve the case (`resolving`).
pub async fn resolve(engine: &SharedEngine, request: Resolve) -> Result<Resolved, CaseError> {
    let critical = is_critical(engine, request.case_id).await?;
    let needs = resolving(critical);
    if !request.by.may(needs) {
        return Err(CaseError::Forbidden { critical });
    }
    // The effect keeps the operation in an index, where ids are short (an
    // empty reference is none: the settlement drops it).
    let cited = request.authoritative_ref.as_deref().map(str::trim);
    if cited.is_some_and(|r| !r.is_empty() && crate::domain::search::searchable(r).is_none()) {
        return Err(Refusal::ReferenceTooLong.into());
    }
    // Operations are told apart byte for byte: one that differs from a
    // cited one only by what nobody sees (a zero-width space, a Cyrillic
    // letter that looks Latin) would justify a second effect.
    if cited.is_some_and(|r| !r.bytes().all(|b| b.is_ascii_graphic())) {
        return Err(Refusal::ReferenceNotAnId.into());
    }
    // The caller's role is read again in the transaction that resolves.
    let settler = Settler::Person {
        resolution: request.resolution,
        reference: request.authoritative_ref,
        caller: request.by.clone(),
        needs,
    };
    let by = request.by.signature();
    let operator = request.by.id;
    match settle(engine, request.case_id, settler, by, request.note).await? {
        Settled::Resolved(resolved) => {
            tracing::info!(
                operator.id = %operator,
                case.id = %resolved.case_id,
                resolution = resolved.resolution.as_str(),
                "case resolved"
            );
            Ok(resolved)
        }
        Settled::ForAPerson(_) => Err(Refusal::AlreadyResolved.into()),
    }
}

/// Most cases one bulk resolution takes.
pub const BULK_MOST: usize = 200;

/// What resolving many cases the same way came to.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Bulk {
    pub resolved: usize,
    /// Money (critical) cases: resolved one at a time, never in bulk.
    pub money: usize,
    /// Resolved before, by someone else or a look-up.
    pub already: usize,
    /// Refused for a reason of their own (nothing to confirm, a
    /// reconciliation finding that only closes, ...): left open.
    pub refused: usize,
}

/// Resolves non-money cases the same way, with one note for all, each
/// through `resolve` (its own claim: a case resolves once whoever else
/// resolves it meanwhile). A money case is left open: money is decided one
/// case at a time, its own delivery compared. The caller's role must allow
/// resolving non-money cases; more than `BULK_MOST` cases are refused whole.
pub async fn resolve_many(
    engine: &SharedEngine,
    case_ids: &[Uuid],
    resolution: Resolution,
    by: &Principal,
    note: &str,
) -> Result<Bulk, CaseError> {
    if !by.may(resolving(false)) {
        return Err(CaseError::Forbidden { critical: false });
    }
    if note.trim().is_empty() {
        return Err(Refusal::NoteRequired.into());
    }
    if !matches!(
        resolution,
        Resolution::ConfirmDuplicate
            | Resolution::Reject
            | Resolution::ProcessAsDistinct
            | Resolution::MadeByHand
    ) {
        return Err(Refusal::NotAPersonsResolution.into());
    }
    // A case ticked twice is one case.
    let mut unique = Vec::with_capacity(case_ids.len());
    for &case_id in case_ids {
        if !unique.contains(&case_id) {
            unique.push(case_id);
        }
    }
    if unique.len() > BULK_MOST {
        return Err(Refusal::TooManyCases.into());
    }
    let mut bulk = Bulk::default();
    for case_id in unique {
        if is_critical(engine, case_id).await? {
            bulk.money += 1;
            continue;
        }
        let request = Resolve {
            case_id,
            resolution,
            by: by.clone(),
            note: note.to_owned(),
            authoritative_ref: None,
        };
        match resolve(engine, request).await {
            Ok(_) => bulk.resolved += 1,
            Err(CaseError::Refused(Refusal::AlreadyResolved)) => bulk.already += 1,
            Err(CaseError::Refused(_) | CaseError::NotFound) => bulk.refused += 1,
            Err(error) => return Err(error),
        }
    }
    Ok(bulk)
}

/// Gives an open case to `assignee` (an enabled operator's name), or back
/// to nobody (`None`), journaled with who did it.
pub async fn assign(
    engine: &SharedEngine,
    case_id: Uuid,
    assignee: Option<&str>,
    by: &Principal,
) -> Result<(), CaseError> {
    let case = crate::store::cases::find(&engine.db, case_id)
        .await?
        .ok_or(CaseError::NotFound)?;
    let event = JournalEvent::CaseAssigned(CaseAssigned {
        case_id,
        assignee: assignee.map(str::to_owned),
        by: by.actor(),
    });
    // Journaled only if the case is still open when it is written (a case
    // resolved meanwhile gets no assignment on its record), its author
    // still may, and its assignee is still an enabled operator.
    let assigned = engine
        .writer
        .submit(AsCaller {
            caller: by.clone(),
            needs: Action::CommentCases,
            job: AssignTo {
                assignee: assignee.map(str::to_owned),
                claim: WriteEvent::claim(case.delivery_id.parse().ok(), event),
            },
        })
        .await?;
    match assigned {
        None => Err(CaseError::NoLongerAllowed),
        Some(None) => Err(Refusal::NoSuchOperator.into()),
        Some(Some(false)) => Err(Refusal::AlreadyResolved.into()),
        Some(Some(true)) => Ok(()),
    }
}

/// An assignment's claim, taken only if its assignee is, in the same
/// transaction, an enabled operator: `None` when not.
struct AssignTo {
    assignee: Option<String>,
    claim: WriteEvent<IfClaimed>,
}

impl WriteJob for AssignTo {
    type Output = Option<bool>;

    fn run<'a>(self, tx: &'a mut Tx<'_>) -> BoxFuture<'a, Result<Self::Output, DbErr>> {
        Box::pin(async move {
            if let Some(name) = &self.assignee {
                let operator =
                    crate::store::access::operator_by_name_held(tx.connection(), name).await?;
                if !operator.is_some_and(|o| o.enabled) {
                    return Ok(None);
                }
            }
            self.claim.run(tx).await.map(Some)
        })
    }
}

/// Adds a note to a case (journaled with its delivery), if its author,
/// read again as it is written, still may.
pub async fn comment(
    engine: &SharedEngine,
    case_id: Uuid,
    by: &Principal,
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
        commented_by: by.signature(),
        note,
    });
    engine
        .writer
        .submit(AsCaller {
            caller: by.clone(),
            needs: Action::CommentCases,
            job: WriteEvent::record(delivery_id, event),
        })
        .await?
        .ok_or(CaseError::NoLongerAllowed)
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
