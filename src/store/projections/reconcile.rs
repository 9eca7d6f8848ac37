//! Projections of periodic reconciliation: a discrepancy opens its case in
//! `cases` (once: its case id is derived from the operation or effect), a
//! run is a row of `reconciliation_runs`.

use chrono::{DateTime, Utc};
use sea_orm::{ActiveValue::Set, ConnectionTrait, DbErr, EntityTrait};

use super::cases::{self, NewCase};
use crate::domain::decision::Action;
use crate::domain::journal::{DiscrepancyFound, ReconciliationRan};
use crate::store::entities::reconciliation_run;

/// Opens the discrepancy's case; returns 1, or 0 when it was opened before
/// (the event is then not journaled again).
pub(super) async fn discrepancy<C: ConnectionTrait>(
    conn: &C,
    delivery_id: &str,
    e: &DiscrepancyFound,
    at: DateTime<Utc>,
) -> Result<u64, DbErr> {
    let details = serde_json::json!({
        "provider": e.provider,
        "window_from": e.window_from,
        "window_to": e.window_to,
        "operation": e.operation,
        "effect_id": e.effect_id,
    });
    let new = NewCase {
        case_id: e.case_id,
        delivery_id,
        business_key: e.key.as_deref(),
        action: Action::Reconcile.as_str(),
        reason: e.kind.as_str(),
        lookup_first: false,
        due: false,
        details,
    };
    cases::open(conn, new, at).await
}

pub(super) async fn ran<C: ConnectionTrait>(
    conn: &C,
    e: &ReconciliationRan,
    at: DateTime<Utc>,
) -> Result<u64, DbErr> {
    let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let run = reconciliation_run::ActiveModel {
        run_id: Set(e.run_id.to_string()),
        provider: Set(e.provider.clone()),
        source: Set(e.source.clone()),
        window_from: Set(e.window_from),
        window_to: Set(e.window_to),
        expected: Set(count(e.expected)),
        applied: Set(count(e.applied)),
        matched: Set(count(e.matched)),
        missing: Set(count(e.missing)),
        unexpected: Set(count(e.unexpected)),
        opened: Set(count(e.opened)),
        error: Set(e.error.clone()),
        ran_at: Set(at),
    };
    reconciliation_run::Entity::insert(run)
        .on_conflict_do_nothing()
        .exec_without_returning(conn)
        .await
        .map(super::rows)
}
