//! Projection `cases`: deliveries waiting for reconciliation or review. The
//! only code that writes the `cases` table, and the one place that says which
//! events open a case (a decision that holds, an unknown outcome, an expired
//! lease, a discrepancy), close one (a resolution, the effect applied after
//! all) or count a look-up: `apply` for a replayed or claimed event,
//! `opened_by` for the live path that defers its rows.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{ActiveValue::Set, ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter};
use uuid::Uuid;

use crate::domain::cases::CaseStatus;
use crate::domain::decision::{Action, Reason};
use crate::domain::journal::{
    CaseAssigned, CaseResolved, CohortFlagged, DecisionMade, DiscrepancyFound, EffectSettled,
    JournalEvent, ReservationExpired, SettlementOutcome,
};
use crate::store::entities::case;

/// Applies `event` to `cases`; returns the rows it changed (for a
/// resolution or a discrepancy, the claim: 0 when the case was resolved or
/// opened before). Settlements and expiries reach it only once their claim
/// on the reservation took.
pub(super) async fn apply<C: ConnectionTrait>(
    conn: &C,
    delivery_id: &str,
    event: &JournalEvent,
    at: DateTime<Utc>,
) -> Result<u64, DbErr> {
    match event {
        JournalEvent::EffectApplied(e)
        | JournalEvent::EffectFailed(e)
        | JournalEvent::EffectOutcomeUnknown(e) => settled(conn, e, at).await,
        JournalEvent::DecisionMade(_)
        | JournalEvent::ReservationExpired(_)
        | JournalEvent::DiscrepancyFound(_)
        | JournalEvent::CohortFlagged(_) => match opened_by(delivery_id, event) {
            Some(new) => open(conn, new, at).await,
            None => Ok(0),
        },
        JournalEvent::CaseResolved(e) => resolved(conn, e, at).await,
        JournalEvent::CaseAssigned(e) => assigned(conn, e).await,
        JournalEvent::LookupPerformed(e) => looked_up(conn, e.case_id, e.retry_at).await,
        JournalEvent::StatusLookupPerformed(e) => looked_up(conn, e.case_id, e.retry_at).await,
        _ => Ok(0),
    }
}

/// A settlement whose claim took: an unknown outcome opens its case; an
/// applied one answers the question an expired lease raised.
pub(super) async fn settled<C: ConnectionTrait>(
    conn: &C,
    e: &EffectSettled,
    at: DateTime<Utc>,
) -> Result<u64, DbErr> {
    let mut changed = 0;
    if let Some(new) = settlement(e) {
        changed += open(conn, new, at).await?;
    }
    if e.outcome == SettlementOutcome::Applied {
        changed += resolve_outcome_unknown(conn, e, at).await?;
    }
    Ok(changed)
}

/// The case `event` opens, if any.
pub(super) fn opened_by(delivery_id: &str, event: &JournalEvent) -> Option<NewCase> {
    match event {
        JournalEvent::DecisionMade(e) => opened_by_decision(delivery_id, e),
        JournalEvent::EffectApplied(e)
        | JournalEvent::EffectFailed(e)
        | JournalEvent::EffectOutcomeUnknown(e) => settlement(e),
        JournalEvent::ReservationExpired(e) => Some(expiry(e)),
        JournalEvent::DiscrepancyFound(e) => Some(discrepancy(delivery_id, e)),
        JournalEvent::CohortFlagged(e) => Some(flagged(delivery_id, e)),
        _ => None,
    }
}

/// A decision that holds the delivery (`Action::opens_case`) carries its case.
pub(super) fn opened_by_decision(delivery_id: &str, e: &DecisionMade) -> Option<NewCase> {
    let d = &e.decision;
    Some(NewCase {
        case_id: e.case_id?,
        delivery_id: delivery_id.to_owned(),
        business_key: e.business_key.clone(),
        action: d.action.as_str(),
        reason: d.reason.as_str(),
        lookup_first: d.lookup_first,
        // A delivery's first decision has its look-up asked by the ingest,
        // in memory: it is due for the sweeper too, a while later, in case
        // the process stopped before asking (the look-up, once journaled,
        // sets when it is due next). A re-decision's (a deferred delivery
        // decided again) is due at once, for the sweeper to ask. Only when
        // the provider's list can settle its reason, as the ingest asks: a
        // tripped breaker's case, or a retry of an effect whose outcome is
        // unknown (that effect's own case is put to the downstream), waits
        // for a person.
        due: (d.lookup_first && Reason::SETTLED_BY_THE_PROVIDER.contains(&d.reason)).then(
            || match e.redecided {
                true => chrono::Duration::zero(),
                false => FIRST_LOOK_UP_GRACE,
            },
        ),
        details: serde_json::json!({
            "summary": e.summary,
            "differences": d.differences,
            "missing_fields": d.missing_fields,
            "reference_delivery_id": d.reference_delivery,
            "effect_id": d.effect_id,
        }),
    })
}

/// A delivery ignored before its strategy's breaker tripped: held for a
/// person as a would-be ignore after the trip is.
fn flagged(delivery_id: &str, e: &CohortFlagged) -> NewCase {
    NewCase {
        case_id: e.case_id,
        delivery_id: delivery_id.to_owned(),
        business_key: e.business_key.clone(),
        action: Action::Reconcile.as_str(),
        reason: Reason::BreakerTripped.as_str(),
        lookup_first: false,
        due: None,
        details: serde_json::json!({
            "summary": format!(
                "Ignored as a duplicate before the collision breaker of {} tripped: \
                 flagged for a person to confirm.",
                e.strategy
            ),
            "reference_delivery_id": e.reference_delivery_id,
            "effect_id": e.effect_id,
        }),
    }
}

/// An unknown outcome is put to the sink's status URL at once.
fn settlement(e: &EffectSettled) -> Option<NewCase> {
    Some(NewCase {
        case_id: e.case_id?,
        delivery_id: e.delivery_id.to_string(),
        business_key: Some(e.key.clone()),
        action: Action::Reconcile.as_str(),
        reason: Reason::OutcomeUnknown.as_str(),
        lookup_first: true,
        due: Some(chrono::Duration::zero()),
        details: serde_json::json!({ "effect_id": e.effect_id, "error": e.error }),
    })
}

/// A lease that ran out leaves the outcome unknown, asked about at once.
fn expiry(e: &ReservationExpired) -> NewCase {
    NewCase {
        case_id: e.case_id,
        delivery_id: e.first_delivery_id.to_string(),
        business_key: Some(e.key.clone()),
        action: Action::Reconcile.as_str(),
        reason: Reason::OutcomeUnknown.as_str(),
        lookup_first: true,
        due: Some(chrono::Duration::zero()),
        details: serde_json::json!({ "effect_id": e.effect_id, "fencing_token": e.fencing_token }),
    }
}

/// What periodic reconciliation found: its case id is derived from the
/// operation or effect, so it opens once.
fn discrepancy(delivery_id: &str, e: &DiscrepancyFound) -> NewCase {
    NewCase {
        case_id: e.case_id,
        delivery_id: delivery_id.to_owned(),
        business_key: e.key.clone(),
        action: Action::Reconcile.as_str(),
        reason: e.kind.as_str(),
        lookup_first: false,
        due: None,
        details: serde_json::json!({
            "provider": e.provider,
            "window_from": e.window_from,
            "window_to": e.window_to,
            "operation": e.operation,
            "effect_id": e.effect_id,
        }),
    }
}

/// How long after a delivery's first decision the sweeper asks about its
/// case, when the look-up the ingest started in memory was never journaled
/// (the process stopped first): long enough for that look-up, every page
/// of it, to have answered.
const FIRST_LOOK_UP_GRACE: chrono::Duration = chrono::Duration::minutes(5);

/// A case to open.
pub(super) struct NewCase {
    pub case_id: Uuid,
    pub delivery_id: String,
    pub business_key: Option<String>,
    pub action: &'static str,
    pub reason: &'static str,
    pub lookup_first: bool,
    /// When after its opening the sweeper asks about it (at once: an
    /// unknown outcome, verified through the sink's status URL), if ever.
    pub due: Option<chrono::Duration>,
    pub details: serde_json::Value,
}

/// Opens a case, once: 1, or 0 when its id was opened before.
async fn open<C: ConnectionTrait>(conn: &C, new: NewCase, at: DateTime<Utc>) -> Result<u64, DbErr> {
    case::Entity::insert(row(new, at))
        .on_conflict_do_nothing()
        .exec_without_returning(conn)
        .await
        .map(super::rows)
}

/// The row of a newly opened case.
pub(super) fn row(new: NewCase, at: DateTime<Utc>) -> case::ActiveModel {
    case::ActiveModel {
        case_id: Set(new.case_id.to_string()),
        delivery_id: Set(new.delivery_id),
        business_key: Set(new.business_key),
        action: Set(new.action.to_owned()),
        reason: Set(new.reason.to_owned()),
        status: Set(CaseStatus::Open.as_str().to_owned()),
        lookup_first: Set(new.lookup_first),
        details: Set(new.details),
        opened_at: Set(at),
        resolved_at: Set(None),
        resolution: Set(None),
        resolved_by: Set(None),
        lookups: Set(0),
        next_lookup_at: Set(new.due.map(|after| at + after)),
        assignee: Set(None),
    }
}

/// Closes the open "outcome unknown" cases of an effect once it is known to
/// have been applied: its expiry's and its settlements', which name it in
/// their details (whichever delivery they are filed under: a key taken
/// again by another delivery's retry files its expiry under the first).
/// Another delivery held on the key meanwhile (`outcome_unknown` too, named
/// no effect) may ask for a second, legitimate effect: whether it does is
/// still a person's answer, so its case stays open.
async fn resolve_outcome_unknown<C: ConnectionTrait>(
    conn: &C,
    e: &EffectSettled,
    at: DateTime<Utc>,
) -> Result<u64, DbErr> {
    Ok(case::Entity::update_many()
        .col_expr(
            case::Column::Status,
            Expr::value(CaseStatus::Resolved.as_str()),
        )
        .col_expr(case::Column::ResolvedAt, Expr::value(at))
        .filter(case::Column::BusinessKey.eq(e.key.as_str()))
        .filter(names_effect(conn.get_database_backend(), e.effect_id))
        .filter(case::Column::Reason.eq(Reason::OutcomeUnknown.as_str()))
        .filter(case::Column::Status.eq(CaseStatus::Open.as_str()))
        .exec(conn)
        .await?
        .rows_affected)
}

/// A case whose details name `effect_id` (a UUID: nothing in it to escape).
fn names_effect(backend: sea_orm::DbBackend, effect_id: Uuid) -> sea_orm::sea_query::SimpleExpr {
    let sql = match backend {
        sea_orm::DbBackend::Postgres => format!("details->>'effect_id' = '{effect_id}'"),
        _ => format!("json_extract(details, '$.effect_id') = '{effect_id}'"),
    };
    Expr::cust(sql)
}

/// Resolves an open case: the atomic claim that lets a case resolve once.
/// Returns the rows changed (0: it was not open).
async fn resolved<C: ConnectionTrait>(
    conn: &C,
    e: &CaseResolved,
    at: DateTime<Utc>,
) -> Result<u64, DbErr> {
    Ok(case::Entity::update_many()
        .col_expr(
            case::Column::Status,
            Expr::value(CaseStatus::Resolved.as_str()),
        )
        .col_expr(case::Column::ResolvedAt, Expr::value(at))
        .col_expr(case::Column::Resolution, Expr::value(e.resolution.as_str()))
        .col_expr(
            case::Column::ResolvedBy,
            Expr::value(e.resolved_by.as_str()),
        )
        .filter(case::Column::CaseId.eq(e.case_id.to_string()))
        .filter(case::Column::Status.eq(CaseStatus::Open.as_str()))
        .exec(conn)
        .await?
        .rows_affected)
}

/// A missing effect made by hand holds its look-alikes from now on.
pub(super) async fn held<C: ConnectionTrait>(
    conn: &C,
    e: &CaseResolved,
    at: DateTime<Utc>,
) -> Result<u64, DbErr> {
    use crate::store::entities::hand_made_hold;
    let Some(made) = &e.made_by_hand else {
        return Ok(0);
    };
    hand_made_hold::Entity::insert(hand_made_hold::ActiveModel {
        seal: Set(made.seal.clone()),
        case_id: Set(e.case_id.to_string()),
        provider: Set(made.provider.clone()),
        operation_id: Set(made.operation_id.clone()),
        held_at: Set(at),
    })
    .on_conflict_do_nothing()
    .exec_without_returning(conn)
    .await
    .map(super::rows)
}

/// Gives an open case to its assignee (or none); a resolved case keeps who
/// had it. Returns the rows changed (0: not open).
async fn assigned<C: ConnectionTrait>(conn: &C, e: &CaseAssigned) -> Result<u64, DbErr> {
    Ok(case::Entity::update_many()
        .col_expr(case::Column::Assignee, Expr::value(e.assignee.clone()))
        .filter(case::Column::CaseId.eq(e.case_id.to_string()))
        .filter(case::Column::Status.eq(CaseStatus::Open.as_str()))
        .exec(conn)
        .await?
        .rows_affected)
}

/// A look-up (of the provider's operations, or of an effect's status at
/// the downstream) was performed: counted, and its retry time (after a failure)
/// recorded for the sweeper.
async fn looked_up<C: ConnectionTrait>(
    conn: &C,
    case_id: Uuid,
    retry_at: Option<DateTime<Utc>>,
) -> Result<u64, DbErr> {
    Ok(case::Entity::update_many()
        .col_expr(
            case::Column::Lookups,
            Expr::col(case::Column::Lookups).add(1),
        )
        .col_expr(case::Column::NextLookupAt, Expr::value(retry_at))
        .filter(case::Column::CaseId.eq(case_id.to_string()))
        .exec(conn)
        .await?
        .rows_affected)
}
