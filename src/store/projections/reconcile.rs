//! Projection `reconciliation_runs`: a run is a row (its discrepancies open
//! their cases in the cases projection).

use chrono::{DateTime, Utc};
use sea_orm::{ActiveValue::Set, ConnectionTrait, DbErr, EntityTrait};

use crate::domain::journal::ReconciliationRan;
use crate::store::entities::reconciliation_run;

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
