//! Reads for periodic reconciliation: the effects of a provider in a window,
//! and the runs' figures (`reconciliation_runs`).

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder, QuerySelect,
};

use super::entities::{delivery, effect, reconciliation_run};
use super::id_range;
use crate::domain::reconcile::{Compared, Window, reconciled_until};
use crate::domain::reservation::ReservationState;

/// The delivery that first caused an effect, when it came from `provider`
/// (and `source`, when given): a subquery for `Expr::exists`.
fn first_delivery_from(
    provider: &str,
    source: Option<&str>,
) -> sea_orm::sea_query::SelectStatement {
    let mut deliveries =
        super::delivery_named_by((effect::Entity, effect::Column::FirstDeliveryId));
    deliveries.and_where(Expr::col((delivery::Entity, delivery::Column::Provider)).eq(provider));
    if let Some(source) = source {
        deliveries.and_where(Expr::col((delivery::Entity, delivery::Column::Source)).eq(source));
    }
    deliveries
}

/// Effects created in `[from, to)` whose first delivery came from `provider`
/// (and `source`, when given): applied ones, and those still pending or of
/// unknown outcome (see `domain::reconcile`).
pub async fn effects_in_window<C: ConnectionTrait>(
    conn: &C,
    provider: &str,
    source: Option<&str>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<effect::Model>, DbErr> {
    in_window(provider, source, (from, to)).all(conn).await
}

/// The query of `effects_in_window`, earliest first.
fn in_window(
    provider: &str,
    source: Option<&str>,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
) -> sea_orm::Select<effect::Entity> {
    effect::Entity::find()
        .filter(effect::Column::EffectId.gte(id_range::made_since(from)))
        .filter(effect::Column::EffectId.lt(id_range::made_before(to)))
        .filter(effect::Column::CreatedAt.gte(from))
        .filter(effect::Column::CreatedAt.lt(to))
        .filter(effect::Column::State.is_in(COMPARED))
        .filter(Expr::exists(first_delivery_from(provider, source)))
        .order_by_asc(effect::Column::CreatedAt)
}

/// `effects_in_window` of `provider`, only those that cite no operation
/// and whose type matches one of `types` (`*` patterns), the earliest
/// `limit`.
pub async fn uncited_in_window<C: ConnectionTrait>(
    conn: &C,
    provider: &str,
    types: &[&str],
    (from, to): (DateTime<Utc>, DateTime<Utc>),
    limit: u64,
) -> Result<Vec<effect::Model>, DbErr> {
    if types.is_empty() {
        return Ok(Vec::new());
    }
    let mut typed = sea_orm::Condition::any();
    for glob in types {
        typed = typed.add(effect::Column::EffectType.like(super::ledger::like(glob)));
    }
    in_window(provider, None, (from, to))
        .filter(effect::Column::ProviderRef.is_null())
        .filter(typed)
        .limit(limit)
        .all(conn)
        .await
}

/// Effects of `provider` (and `source`, when given) of one of
/// `effect_types` that stand for one of `operations` (their provider
/// reference), wherever they lie in time: an operation near a window's edge,
/// or carried from an earlier run, may be answered by an effect outside the
/// window compared. Applied ones, and those still pending or of unknown
/// outcome, as `effects_in_window`.
pub async fn effects_citing<C: ConnectionTrait>(
    conn: &C,
    provider: &str,
    source: Option<&str>,
    effect_types: &[String],
    operations: &[&str],
) -> Result<Vec<effect::Model>, DbErr> {
    let mut found = Vec::new();
    if effect_types.is_empty() {
        return Ok(found);
    }
    for chunk in operations.chunks(500) {
        let deliveries = first_delivery_from(provider, source);
        found.extend(
            effect::Entity::find()
                .filter(effect::Column::EffectType.is_in(effect_types.iter().map(String::as_str)))
                .filter(effect::Column::ProviderRef.is_in(chunk.iter().copied()))
                .filter(effect::Column::State.is_in(COMPARED))
                .filter(Expr::exists(deliveries))
                .all(conn)
                .await?,
        );
    }
    Ok(found)
}

/// Effects of `provider` (and `source`, when given) of one of
/// `effect_types` that cite a provider operation and failed, the latest
/// failures first, at most `limit`: the operation they stood for is owed
/// (`services::reconcile`). Each run reads the latest, so a new failure is
/// read by the next run whatever failed before it.
pub async fn failed_citing<C: ConnectionTrait>(
    conn: &C,
    (provider, source): (&str, Option<&str>),
    effect_types: &[String],
    limit: u64,
) -> Result<Vec<effect::Model>, DbErr> {
    if effect_types.is_empty() {
        return Ok(Vec::new());
    }
    effect::Entity::find()
        .filter(effect::Column::EffectType.is_in(effect_types.iter().map(String::as_str)))
        .filter(effect::Column::ProviderRef.is_not_null())
        .filter(effect::Column::State.eq(ReservationState::Failed.as_str()))
        .filter(Expr::exists(first_delivery_from(provider, source)))
        .order_by_desc(effect::Column::SettledAt)
        .limit(limit)
        .all(conn)
        .await
}

/// The states of the effects a run compares.
const COMPARED: [&str; 3] = [
    ReservationState::Applied.as_str(),
    ReservationState::Reserved.as_str(),
    ReservationState::Unknown.as_str(),
];

/// Most failed runs, and most latest runs without error, read to find where
/// the reconciled time ends; and most runs without error after the earliest
/// failed one.
const FAILED_RUNS: u64 = 200;
const COVERING_RUNS: u64 = 5_000;

/// Where the reconciled time of `provider` ends (`reconciled_until`), from
/// its runs over every source: the latest failed ones, the runs without
/// error from the earliest of those on (oldest first: the catch-up runs
/// that compared a failed stretch), the latest runs without error, and when
/// the reconciled time began (its first run without error: what a failed
/// run asked for before it, a month by hand or a year the provider no
/// longer lists, holds nothing back). A run compares what the provider
/// listed when it ran: one given a window that ends tomorrow (`unicity
/// reconcile --to`) has not compared the hours after it.
pub async fn covered_until<C: ConnectionTrait>(
    conn: &C,
    provider: &str,
) -> Result<Option<DateTime<Utc>>, DbErr> {
    use reconciliation_run::Column;
    let runs = || {
        reconciliation_run::Entity::find()
            .filter(Column::Provider.eq(provider))
            .filter(Column::Source.is_null())
    };
    let ok = || runs().filter(Column::Error.is_null());
    let mut found = runs()
        .filter(Column::Error.is_not_null())
        .order_by_desc(Column::WindowTo)
        .limit(FAILED_RUNS)
        .all(conn)
        .await?;
    let began = ok()
        .order_by_asc(Column::WindowFrom)
        .one(conn)
        .await?
        .map(|first| first.window_from);
    if let Some(earliest) = found.iter().map(|run| run.window_from).min() {
        let from = began.map_or(earliest, |began| Ord::max(earliest, began));
        found.extend(
            ok().filter(Column::WindowTo.gt(from))
                .order_by_asc(Column::WindowTo)
                .limit(COVERING_RUNS)
                .all(conn)
                .await?,
        );
    }
    // The latest end: among the runs whose windows end last, since a run
    // ends no later than when it ran.
    found.extend(
        ok().order_by_desc(Column::WindowTo)
            .limit(FAILED_RUNS)
            .all(conn)
            .await?,
    );
    let runs: Vec<Compared> = found
        .into_iter()
        .map(|run| Compared {
            window: Window {
                from: run.window_from,
                to: Ord::min(run.window_to, run.ran_at),
            },
            failed: run.error.is_some(),
        })
        .collect();
    Ok(reconciled_until(
        &runs,
        began.unwrap_or(DateTime::<Utc>::MIN_UTC),
    ))
}

/// The latest runs, newest first.
pub async fn latest_runs<C: ConnectionTrait>(
    conn: &C,
    limit: u64,
) -> Result<Vec<reconciliation_run::Model>, DbErr> {
    reconciliation_run::Entity::find()
        .order_by_desc(reconciliation_run::Column::RanAt)
        .limit(limit)
        .all(conn)
        .await
}

/// The latest decision of each delivery to `source` received at or after
/// `at`, counted per decision (a simulation's report: a deferred delivery
/// counts as what it was re-decided to).
pub async fn decisions_since<C: ConnectionTrait>(
    conn: &C,
    source: &str,
    at: DateTime<Utc>,
) -> Result<Vec<(Option<String>, i64)>, DbErr> {
    delivery::Entity::find()
        .select_only()
        .column(delivery::Column::Decision)
        .column_as(delivery::Column::DeliveryId.count(), "n")
        .filter(delivery::Column::Source.eq(source))
        .filter(delivery::Column::DeliveryId.gte(id_range::made_since(at)))
        .filter(delivery::Column::ReceivedAt.gte(at))
        .group_by(delivery::Column::Decision)
        .into_tuple()
        .all(conn)
        .await
}
