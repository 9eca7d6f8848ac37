//! Projection `cases`: deliveries waiting for reconciliation or review. The
//! only code that writes the `cases` table: the projections of decisions,
//! effects and reconciliation open cases through `open` (or defer `row`).

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{ActiveValue::Set, ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter};

use crate::domain::cases::CaseStatus;
use crate::domain::decision::Reason;
use crate::domain::journal::CaseResolved;
use crate::store::entities::case;

/// A case to open.
pub(super) struct NewCase<'a> {
    pub case_id: uuid::Uuid,
    pub delivery_id: &'a str,
    pub business_key: Option<&'a str>,
    pub action: &'a str,
    pub reason: &'a str,
    pub lookup_first: bool,
    /// Asked about at once by the sweeper (an unknown outcome, verified
    /// through the sink's status URL).
    pub due: bool,
    pub details: serde_json::Value,
}

/// Opens a case, once: 1, or 0 when its id was opened before.
pub(super) async fn open<C: ConnectionTrait>(
    conn: &C,
    new: NewCase<'_>,
    at: DateTime<Utc>,
) -> Result<u64, DbErr> {
    case::Entity::insert(row(new, at))
        .on_conflict_do_nothing()
        .exec_without_returning(conn)
        .await
        .map(super::rows)
}

/// The row of a newly opened case.
pub(super) fn row(new: NewCase<'_>, at: DateTime<Utc>) -> case::ActiveModel {
    case::ActiveModel {
        case_id: Set(new.case_id.to_string()),
        delivery_id: Set(new.delivery_id.to_owned()),
        business_key: Set(new.business_key.map(str::to_owned)),
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
        next_lookup_at: Set(new.due.then_some(at)),
    }
}

/// Closes the open "outcome unknown" cases of a key once its effect is known
/// to have been applied.
pub(super) async fn resolve_outcome_unknown<C: ConnectionTrait>(
    conn: &C,
    key: &str,
    at: DateTime<Utc>,
) -> Result<u64, DbErr> {
    Ok(case::Entity::update_many()
        .col_expr(
            case::Column::Status,
            Expr::value(CaseStatus::Resolved.as_str()),
        )
        .col_expr(case::Column::ResolvedAt, Expr::value(at))
        .filter(case::Column::BusinessKey.eq(key))
        .filter(case::Column::Reason.eq(Reason::OutcomeUnknown.as_str()))
        .filter(case::Column::Status.eq(CaseStatus::Open.as_str()))
        .exec(conn)
        .await?
        .rows_affected)
}

/// Resolves an open case: the atomic claim that lets a case resolve once.
/// Returns the rows changed (0: it was not open).
pub(super) async fn resolved<C: ConnectionTrait>(
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

/// A look-up (of the provider's operations, or of an effect's status at
/// the downstream) was performed: counted, and its retry time (after a failure)
/// recorded for the sweeper.
pub(super) async fn looked_up<C: ConnectionTrait>(
    conn: &C,
    case_id: uuid::Uuid,
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
