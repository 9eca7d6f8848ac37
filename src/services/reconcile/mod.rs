//! Periodic reconciliation: for each provider whose look-up can list a time
//! window (`list_url`), the operations it made against the effects ledger
//! (`domain::reconcile` has the matching rule). An operation no effect
//! stands for opens a **missing effect** case; an applied effect the
//! provider does not list opens an **unexpected effect** case. Each case is
//! opened once, whatever the number of runs over its window; each run is
//! journaled with its figures ("expected vs applied", `figures`).
//!
//! An operation a run found missing is carried into the later runs while
//! its finding is open: a late webhook's effect, in a later window, closes it
//! (`effect_found`) instead of reading as unexpected there.
//!
//! An operation an effect cited (a look-up, a person, or a run that paired
//! them while the effect was in flight) whose effect then failed is owed:
//! every run opens its missing-effect finding, once, whatever window it lay
//! in (`findings::owed`).
//!
//! The provider is asked outside any transaction; what the run found is
//! written in one.

mod findings;

pub(crate) use findings::paid_alike;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::effects::Journaled;
use super::engine::SharedEngine;
use crate::config::{ReconciliationConfig, Source};
use crate::domain::cases::CaseStatus;
use crate::domain::delivery::DeliveryId;
use crate::domain::identity::pattern;
use crate::domain::journal::{DiscrepancyKind, ProviderOperation, ReconciliationRan};
use crate::domain::reconcile::{self, Effect, Operation, Window};
use crate::domain::reservation::ReservationState;
use crate::providers::lookup::Lookup;
use crate::store::entities::effect;

/// What one run found for one provider, as journaled.
pub type Run = ReconciliationRan;

/// Reconciles every provider with a listing over `window` (only the
/// deliveries of `source`, and its provider, when given). One run per
/// look-up that can list.
pub async fn run_all(
    engine: &SharedEngine,
    window: Window,
    slack: chrono::Duration,
    source: Option<&Source>,
) -> anyhow::Result<Vec<Run>> {
    let mut runs = Vec::new();
    for lookup in engine.lookups.iter().filter(|l| l.listing.is_some()) {
        if source.is_some_and(|s| s.origin.provider != lookup.provider) {
            continue;
        }
        runs.push(run(engine, lookup, source.map(Source::slug), window, slack).await?);
    }
    Ok(runs)
}

/// Lists `lookup`'s provider over `window` widened by `slack`, compares it
/// with the ledger and journals what it found.
/// How long a run waits for the deliveries read model to hold every effect's
/// delivery.
const READ_MODEL_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Most open missing-effect findings of its provider a run carries.
const CARRIED_MOST: usize = 5_000;

pub async fn run(
    engine: &SharedEngine,
    lookup: &Lookup,
    source: Option<&str>,
    window: Window,
    slack: chrono::Duration,
) -> anyhow::Result<Run> {
    let (from, to) = (window.from - slack, window.to + slack);
    let mut ran = ReconciliationRan {
        run_id: Uuid::now_v7(),
        provider: lookup.provider.clone(),
        source: source.map(str::to_owned),
        window_from: window.from,
        window_to: window.to,
        expected: 0,
        applied: 0,
        matched: 0,
        missing: 0,
        unexpected: 0,
        opened: 0,
        error: None,
    };
    // Effects are found through the deliveries read model: one it does not
    // show yet would read as an operation Unicity never applied. A run that
    // cannot wait for it is journaled as failed, never skipped unseen.
    let freshness = super::projector::caught_up(engine, READ_MODEL_WAIT).await?;
    if freshness.behind > 0 {
        ran.error = Some(format!(
            "the deliveries read model was {} journal rows behind after {} s: nothing compared",
            freshness.behind,
            READ_MODEL_WAIT.as_secs()
        ));
        return journal(engine, ran, findings::Findings::default()).await;
    }
    let listed = lookup.list(&engine.http, from, to).await;
    let mut operations = match listed.map(|(_, operations)| operations) {
        Some(Ok(operations)) => crate::domain::lookup::once_each(&operations),
        Some(Err(error)) => {
            ran.error = Some(error);
            return journal(engine, ran, findings::Findings::default()).await;
        }
        None => return Ok(ran),
    };
    // Operations earlier runs found missing, still open: their webhook may
    // have come late, its effect in this window (`domain::reconcile`).
    let listed = operations.len();
    let open =
        crate::store::cases::open_missing(&engine.db, &lookup.provider, CARRIED_MOST).await?;
    let open_findings: Vec<(String, Uuid)> = open
        .iter()
        .map(|f| (f.operation.id.clone(), f.case_id))
        .collect();
    // Raised for an effect that cited it and failed: its fields are that
    // effect's, and only a citing effect answers it.
    let mut cited_only = std::collections::HashSet::new();
    for finding in open {
        if finding.failed_effect.is_some() {
            cited_only.insert(finding.operation.id.clone());
        }
        if operations
            .iter()
            .all(|other| other.id != finding.operation.id)
        {
            operations.push(finding.operation);
        }
    }
    // The provider's list does not say which source an operation came
    // through: every source's effects answer it, so that a refund whose
    // webhook came through another source is not missing; only the
    // source's own effects can be unexpected.
    let rows = compared_effects(engine, lookup, None, (from, to), &operations).await?;
    let own: Option<std::collections::HashSet<String>> = match source {
        Some(source) => crate::store::reconcile::effects_in_window(
            &engine.db,
            &lookup.provider,
            Some(source),
            from,
            to,
        )
        .await
        .map(|own| Some(own.into_iter().map(|e| e.effect_id).collect()))?,
        None => None,
    };
    let mut effects = Vec::with_capacity(rows.len());
    for row in &rows {
        effects.push(ledger_effect(engine, lookup, row).await?);
    }
    let ids: Vec<String> = operations.iter().map(|op| op.id.clone()).collect();
    let by_hand =
        crate::store::ledger::made_by_hand_among(&engine.db, &lookup.provider, &ids).await?;
    let ops: Vec<Operation> = operations
        .iter()
        .enumerate()
        .map(|(i, op)| Operation {
            id: op.id.clone(),
            resource: op.resource.clone(),
            amount: op.amount.clone(),
            currency: op.currency.clone(),
            status: op.status.clone(),
            created_at: op.created_at,
            carried: i >= listed,
            by_hand: by_hand.contains(&op.id),
            cited_only: i >= listed && cited_only.contains(&op.id),
        })
        .collect();
    let mut found = reconcile::compare(&ops, &effects, window);
    if let Some(own) = &own {
        found
            .unexpected
            .retain(|&e| own.contains(&rows[e].effect_id));
    }
    ran.expected = found.expected as u64;
    ran.applied = found.applied as u64;
    ran.matched = found.matched.len() as u64;
    ran.missing = found.missing.len() as u64;
    ran.unexpected = found.unexpected.len() as u64;
    let compared = findings::Compared {
        listed: &operations,
        ops: &ops,
        rows: &rows,
        effects: &effects,
        open_findings: &open_findings,
    };
    let mut findings = findings::Findings::of(
        engine,
        &lookup.provider,
        window,
        compared,
        &found,
        ran.run_id,
    )
    .await?;
    let owed = findings::owed(engine, lookup, source, window, &operations).await?;
    ran.missing += owed.len() as u64;
    findings.found.extend(owed);
    journal(engine, ran, findings).await
}

/// The effect types of `lookup`'s provider that a run compares.
fn effect_types(engine: &SharedEngine, lookup: &Lookup) -> Vec<String> {
    let mut types: Vec<String> = engine
        .catalog
        .strategies()
        .map(|s| s.effect_type.clone())
        .filter(|t| pattern::matches(&lookup.effect_type, t))
        .collect();
    types.sort();
    types.dedup();
    types
}

/// The effects a run compares: those made within the window widened by the
/// slack, and, wherever they lie, those that stand for one of `operations`
/// already (cited, or paired by an earlier run). An operation near the
/// window's edge is then paired with its own effect, not with a later equal
/// one; a carried operation whose effect was paired while in flight is
/// found applied in a later run, which closes its finding.
async fn compared_effects(
    engine: &SharedEngine,
    lookup: &Lookup,
    source: Option<&str>,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
    operations: &[ProviderOperation],
) -> anyhow::Result<Vec<effect::Model>> {
    let store = &engine.db;
    let mut rows =
        crate::store::reconcile::effects_in_window(store, &lookup.provider, source, from, to)
            .await?;
    let types = effect_types(engine, lookup);
    let ids: Vec<&str> = operations.iter().map(|op| op.id.as_str()).collect();
    let citing =
        crate::store::reconcile::effects_citing(store, &lookup.provider, source, &types, &ids)
            .await?;
    for row in citing {
        if rows.iter().all(|r| r.effect_id != row.effect_id) {
            rows.push(row);
        }
    }
    rows.retain(|e| pattern::matches(&lookup.effect_type, &e.effect_type));
    Ok(rows)
}

/// An effect of the ledger with its resource, amount and currency, read
/// from its delivery's body as the look-up says.
pub(super) async fn ledger_effect(
    engine: &SharedEngine,
    lookup: &Lookup,
    row: &effect::Model,
) -> anyhow::Result<Effect> {
    let body = match row.first_delivery_id.parse::<DeliveryId>() {
        Ok(id) => Journaled::read(&engine.db, id).await?.event(engine).await?,
        Err(_) => None,
    };
    let (resource, amount, currency) = body
        .as_ref()
        .map(|b| lookup.effect_fields.read(b))
        .unwrap_or_default();
    Ok(Effect {
        effect_id: row.effect_id.parse().unwrap_or_default(),
        applied: row.state == ReservationState::Applied.as_str(),
        provider_ref: row.provider_ref.clone(),
        resource,
        amount,
        currency,
        created_at: row.created_at,
    })
}

/// Journals the run with what it found, in one transaction
/// (`findings::Findings`).
async fn journal(
    engine: &SharedEngine,
    ran: ReconciliationRan,
    findings: findings::Findings,
) -> anyhow::Result<Run> {
    let written = engine.writer.submit(findings.journaled(ran)).await?;
    tracing::info!(
        provider = %written.provider,
        expected = written.expected,
        applied = written.applied,
        missing = written.missing,
        unexpected = written.unexpected,
        opened = written.opened,
        error = written.error.as_deref().unwrap_or(""),
        "reconciliation ran"
    );
    Ok(written)
}

/// Runs reconciliation every `interval_secs` over what is due
/// (`run_due`), while some look-up can list; the first run at start.
pub fn spawn(engine: SharedEngine, config: ReconciliationConfig) {
    if config.interval_secs == 0 || !engine.lookups.iter().any(|l| l.listing.is_some()) {
        return;
    }
    let every = std::time::Duration::from_secs(config.interval_secs);
    crate::tasks::supervise("reconciliation", move || {
        let (engine, config) = (engine.clone(), config.clone());
        async move {
            loop {
                if let Err(error) = run_due(&engine, &config, Utc::now()).await {
                    tracing::warn!(%error, "reconciliation failed; retried at the next interval");
                }
                tokio::time::sleep(every).await;
            }
        }
    });
}

/// Most windows one periodic run compares per provider: a long outage is
/// caught up over several intervals.
const MOST_WINDOWS: usize = 24;

/// For each provider that can list, the windows due at `now`
/// (`due_windows`) from where its reconciled time ends, oldest first; a
/// window that fails stops that provider's until the next interval, which
/// starts again from it.
pub async fn run_due(
    engine: &SharedEngine,
    config: &ReconciliationConfig,
    now: DateTime<Utc>,
) -> anyhow::Result<Vec<Run>> {
    let slack = seconds(config.slack_secs);
    let mut runs = Vec::new();
    for lookup in engine.lookups.iter().filter(|l| l.listing.is_some()) {
        let covered = crate::store::reconcile::covered_until(&engine.db, &lookup.provider).await?;
        for window in due_windows(config, covered, now) {
            let ran = run(engine, lookup, None, window, slack).await?;
            let failed = ran.error.is_some();
            runs.push(ran);
            if failed {
                break;
            }
        }
    }
    Ok(runs)
}

/// The windows a periodic run covers at `now`, oldest first: the window of
/// `window_secs` that ended `delay_secs` ago, starting earlier when the
/// reconciled time (`covered`: `covered_until`, held back by a failed
/// window no run compared since) ends before it — a stopped server or a
/// failed run leaves no stretch unreconciled — cut in windows of
/// `window_secs`, at most `MOST_WINDOWS`.
pub fn due_windows(
    config: &ReconciliationConfig,
    covered: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Vec<Window> {
    let to = now - seconds(config.delay_secs);
    let length = seconds(config.window_secs.max(1));
    let mut from = covered.map_or(to - length, |covered| covered.min(to - length));
    let mut windows = Vec::new();
    while from < to && windows.len() < MOST_WINDOWS {
        let end = (from + length).min(to);
        windows.push(Window { from, to: end });
        from = end;
    }
    windows
}

pub fn seconds(secs: u64) -> chrono::Duration {
    chrono::Duration::seconds(i64::try_from(secs).unwrap_or(i64::MAX / 1000))
}

/// "Expected vs applied" for the dashboard: the latest run of each provider
/// (a window's operations against its applied effects, what was found), and
/// how many discrepancy cases are open.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Figures {
    pub runs: Vec<RunFigures>,
    pub open_missing: i64,
    pub open_unexpected: i64,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct RunFigures {
    pub provider: String,
    pub window_from: DateTime<Utc>,
    pub window_to: DateTime<Utc>,
    pub ran_at: DateTime<Utc>,
    pub expected: i64,
    pub applied: i64,
    pub missing: i64,
    pub unexpected: i64,
    pub error: Option<String>,
}

pub async fn figures(engine: &SharedEngine) -> Result<Figures, sea_orm::DbErr> {
    let mut runs: Vec<RunFigures> = Vec::new();
    for run in crate::store::reconcile::latest_runs(&engine.db, 200).await? {
        // A run over one source compared only that source's effects.
        if run.source.is_some() || runs.iter().any(|r| r.provider == run.provider) {
            continue;
        }
        runs.push(RunFigures {
            provider: run.provider,
            window_from: run.window_from,
            window_to: run.window_to,
            ran_at: run.ran_at,
            expected: run.expected,
            applied: run.applied,
            missing: run.missing,
            unexpected: run.unexpected,
            error: run.error,
        });
    }
    let open = crate::store::cases::counts_by_reason(&engine.db, CaseStatus::Open.as_str()).await?;
    let count = |reason: DiscrepancyKind| {
        open.iter()
            .find(|(r, _)| r == reason.as_str())
            .map_or(0, |(_, n)| *n)
    };
    Ok(Figures {
        runs,
        open_missing: count(DiscrepancyKind::MissingEffect),
        open_unexpected: count(DiscrepancyKind::UnexpectedEffect),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> ReconciliationConfig {
        ReconciliationConfig {
            interval_secs: 3600,
            window_secs: 3600,
            delay_secs: 600,
            slack_secs: 300,
        }
    }

    #[test]
    fn windows_start_where_the_reconciled_time_ends_and_leave_no_stretch_out() {
        let now = Utc::now();
        let due = now - seconds(600);
        let hour = seconds(3600);
        // Nothing reconciled yet, or up to date: the hour before the delay.
        for covered in [None, Some(due - seconds(60)), Some(due + hour)] {
            let windows = due_windows(&config(), covered, now);
            assert_eq!(windows.len(), 1, "{covered:?}");
            assert_eq!((windows[0].from, windows[0].to), (due - hour, due));
        }
        // Down for two and a half hours: every hour since, the last one short.
        let covered = due - seconds(9000);
        let windows = due_windows(&config(), Some(covered), now);
        let ends: Vec<_> = windows.iter().map(|w| (w.from, w.to)).collect();
        assert_eq!(
            ends,
            [
                (covered, covered + hour),
                (covered + hour, covered + hour * 2),
                (covered + hour * 2, due)
            ]
        );
        // Down for a month: caught up a day per interval.
        let windows = due_windows(&config(), Some(due - chrono::Duration::days(30)), now);
        assert_eq!(windows.len(), MOST_WINDOWS);
        assert!(windows.windows(2).all(|w| w[0].to == w[1].from));
    }
}
