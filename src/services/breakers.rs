//! Collision breakers. A strategy whose keys collide (same key, discriminating
//! fields that differ) on more than `breaker_threshold` of its recent
//! deliveries is tripped: from then on, any delivery it keys that would have
//! been ignored goes to reconciliation instead, until an operator resets it.
//! Rates are computed periodically from the `deliveries` projection, never on
//! the hot path; every process refreshes the tripped set from the database.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sea_orm::{DatabaseConnection, DbErr};

use futures_util::future::BoxFuture;

use super::engine::SharedEngine;
use crate::auth::{Action, Principal};
use crate::domain::delivery::DeliveryId;
use crate::domain::journal::{CohortFlagged, JournalEvent, StrategyReset, StrategyTripped};
use crate::store::writer::WriteJob;
use crate::store::{self, Tx, entities::strategy_breaker};

/// Evaluates breakers forever at the configured interval.
pub fn spawn(engine: SharedEngine) {
    let interval = Duration::from_millis(engine.config.breaker_check_ms.max(50));
    crate::tasks::supervise("breakers", move || {
        let engine = engine.clone();
        async move {
            loop {
                if let Err(error) = evaluate(&engine).await {
                    tracing::warn!(%error, "breaker evaluation failed");
                }
                tokio::time::sleep(interval).await;
            }
        }
    });
}

/// Trips every strategy over the threshold, then refreshes the tripped set.
/// Returns the strategies tripped by this call.
pub async fn evaluate(engine: &SharedEngine) -> Result<Vec<String>, DbErr> {
    // Collisions are counted on the deliveries read model: on one behind the
    // journal the window would hold fewer of them than happened. The
    // evaluation waits for the next check rather than judge on it, and so
    // it does when how far behind it is cannot be read.
    // Every ignore journaled before this instant is read, once caught up.
    let looked = Utc::now();
    let freshness = super::projector::caught_up(engine, super::projector::READ_WAIT).await?;
    if freshness.behind > 0 {
        tracing::error!(
            behind = freshness.behind,
            "collision breakers not evaluated: the deliveries read model is behind the journal"
        );
        refresh(engine).await?;
        return Ok(Vec::new());
    }
    let config = &engine.config;
    let since = Utc::now()
        - chrono::Duration::seconds(
            i64::try_from(config.breaker_window_secs).unwrap_or(i64::MAX / 1000),
        );
    let counts = crate::store::dashboard::collisions(&engine.db, since).await?;
    let mut tripped = Vec::new();
    for count in counts {
        let crate::store::dashboard::CollisionCount {
            strategy,
            deliveries,
            collisions,
        } = count;
        let over = deliveries >= config.breaker_min_deliveries
            && (collisions as f64) > config.breaker_threshold * deliveries as f64;
        if !over || engine.is_tripped(&strategy) {
            continue;
        }
        let event = StrategyTripped {
            strategy: strategy.clone(),
            deliveries,
            collisions,
            threshold: config.breaker_threshold,
            window_secs: config.breaker_window_secs,
        };
        if trip(engine, event, Utc::now()).await? {
            tracing::warn!(
                strategy,
                deliveries,
                collisions,
                "collision breaker tripped: auto-ignore stops for this strategy"
            );
            tripped.push(strategy);
        }
    }
    refresh(engine).await?;
    let previous = engine.stragglers_read_at.lock().map_or(None, |at| *at);
    flag_stragglers(
        engine,
        &store::breakers::tripped(&engine.db).await?,
        previous,
    )
    .await?;
    if let Ok(mut at) = engine.stragglers_read_at.lock() {
        *at = Some(looked);
    }
    Ok(tripped)
}

/// Most deliveries one trip flags for reconciliation; beyond them, the trip's
/// figures and the strategy's deliveries say how many more there were.
pub const COHORT_MOST: u64 = 1_000;

/// Journals `tripped` as of `at`, with the cohort it flags: every delivery
/// its strategy ignored within the window that tripped it (`CohortFlagged`,
/// a case each, opened once whatever the number of trips). False when
/// another process tripped the strategy first. The tripped set is read again
/// by `refresh`.
pub async fn trip(
    engine: &SharedEngine,
    tripped: StrategyTripped,
    at: DateTime<Utc>,
) -> Result<bool, DbErr> {
    let since = at - crate::services::reconcile::seconds(tripped.window_secs);
    let cohort = cohort(engine, &tripped.strategy, since).await?;
    engine
        .writer
        .submit(Trip {
            tripped: Some(tripped),
            cohort,
            at,
        })
        .await
}

/// What `strategy` ignored since `since` that no case flags yet, each with
/// the `CohortFlagged` that flags it.
async fn cohort(
    engine: &SharedEngine,
    strategy: &str,
    since: DateTime<Utc>,
) -> Result<Vec<(DeliveryId, CohortFlagged)>, DbErr> {
    let ignored = store::breakers::ignored_since(&engine.db, strategy, since, COHORT_MOST).await?;
    Ok(ignored
        .into_iter()
        .filter_map(|row| {
            let delivery: DeliveryId = row.delivery_id.parse().ok()?;
            let flagged = CohortFlagged {
                case_id: crate::domain::reconcile::case_id("breaker_cohort", &row.delivery_id),
                strategy: strategy.to_owned(),
                business_key: row.business_key,
                reference_delivery_id: row.reference_delivery_id.and_then(|id| id.parse().ok()),
                effect_id: row.effect_id.and_then(|id| id.parse().ok()),
            };
            Some((delivery, flagged))
        })
        .collect())
}

/// How long after a trip deliveries may still be ignored under the tripped
/// strategy: by another process until its next evaluation reads the trip,
/// and the read model shows them a little later still.
fn stragglers_for(engine: &SharedEngine) -> chrono::Duration {
    let check = chrono::Duration::milliseconds(
        i64::try_from(engine.config.breaker_check_ms).unwrap_or(i64::MAX / 4),
    );
    check * 2 + chrono::Duration::seconds(60)
}

/// Whether a trip at `tripped_at` may still have unflagged stragglers,
/// given when the stragglers were last looked for on a read model holding
/// the whole journal (`previous`): every ignore decided within `period` of
/// the trip was journaled, so read, by a look after the period ended. A
/// read model behind for longer than the period leaves them to the first
/// look once it caught up; a restart looks once again.
fn stragglers_may_remain(
    tripped_at: DateTime<Utc>,
    previous: Option<DateTime<Utc>>,
    period: chrono::Duration,
) -> bool {
    previous.is_none_or(|looked| looked - tripped_at <= period)
}

/// Flags what each strategy tripped lately ignored that its trip could not
/// flag: ignores another process made before it read the trip, and ignores
/// the read model did not show yet when the trip was journaled. Each is
/// flagged once (a case each); a trip whose stragglers were all looked for
/// (`stragglers_may_remain`) has none.
async fn flag_stragglers(
    engine: &SharedEngine,
    tripped: &[strategy_breaker::Model],
    previous: Option<DateTime<Utc>>,
) -> Result<(), DbErr> {
    let now = Utc::now();
    for row in tripped {
        if !stragglers_may_remain(row.tripped_at, previous, stragglers_for(engine)) {
            continue;
        }
        let window = crate::services::reconcile::seconds(engine.config.breaker_window_secs);
        let cohort = cohort(engine, &row.strategy, row.tripped_at - window).await?;
        if cohort.is_empty() {
            continue;
        }
        let flagged = engine
            .writer
            .submit(Trip {
                tripped: None,
                cohort,
                at: now,
            })
            .await?;
        if flagged {
            tracing::warn!(
                strategy = row.strategy,
                "deliveries ignored as the breaker tripped flagged for reconciliation"
            );
        }
    }
    Ok(())
}

/// A trip and its cohort, in one transaction: a crash between them would
/// leave the strategy tripped and the deliveries it ignored unflagged. No
/// trip: the stragglers of one already journaled.
struct Trip {
    tripped: Option<StrategyTripped>,
    cohort: Vec<(DeliveryId, CohortFlagged)>,
    at: DateTime<Utc>,
}

impl WriteJob for Trip {
    type Output = bool;

    fn run<'a>(self, tx: &'a mut Tx<'_>) -> BoxFuture<'a, Result<bool, DbErr>> {
        Box::pin(async move {
            let tripped = self.tripped.is_some();
            if let Some(trip) = self.tripped {
                let event = JournalEvent::StrategyTripped(trip);
                if !tx.claim(None, &event, self.at).await? {
                    return Ok(false);
                }
            }
            let mut flagged = false;
            for (delivery, cohort) in self.cohort {
                let event = JournalEvent::CohortFlagged(cohort);
                flagged |= tx.claim(Some(delivery), &event, self.at).await?;
            }
            Ok(tripped || flagged)
        })
    }
}

/// Re-reads the tripped strategies from the database.
pub async fn refresh(engine: &SharedEngine) -> Result<(), DbErr> {
    let current = store::breakers::tripped(&engine.db).await?;
    engine.set_tripped(current.into_iter().map(|row| row.strategy).collect());
    Ok(())
}

/// An operator's reset of a tripped breaker, journaled with who reset it
/// and why; false when it was not tripped. Running servers pick it up at
/// their next evaluation.
pub async fn reset(
    db: &DatabaseConnection,
    strategy: &str,
    by: String,
    reason: String,
) -> Result<bool, DbErr> {
    reset_at(db, strategy, by, reason, Utc::now()).await
}

/// What a person's reset came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PersonsReset {
    Reset,
    NotTripped,
    /// The caller was disabled or lost the role since the request was let in.
    Forbidden,
}

/// `reset` asked by `caller`, whose role is read again in the transaction
/// that resets: an engineer demoted while the request waited for the
/// database's writer resets nothing.
pub async fn reset_by(
    db: &DatabaseConnection,
    strategy: &str,
    caller: &Principal,
    reason: String,
) -> Result<PersonsReset, DbErr> {
    let event = JournalEvent::StrategyReset(StrategyReset {
        strategy: strategy.to_owned(),
        reset_by: Some(caller.signature()),
        reason: Some(reason),
    });
    store::transaction(db, async |tx| {
        let now = super::access::still(tx.connection(), caller)
            .await
            .map_err(|error| DbErr::Custom(error.to_string()))?;
        if !now.is_some_and(|caller| caller.may(Action::ResetBreakers)) {
            return Ok(PersonsReset::Forbidden);
        }
        Ok(if tx.claim(None, &event, Utc::now()).await? {
            PersonsReset::Reset
        } else {
            PersonsReset::NotTripped
        })
    })
    .await
}

/// `reset`, journaled as of `at` (a fixture's replay resets a breaker at
/// the moment the fixture says).
pub async fn reset_at(
    db: &DatabaseConnection,
    strategy: &str,
    by: String,
    reason: String,
    at: DateTime<Utc>,
) -> Result<bool, DbErr> {
    let event = JournalEvent::StrategyReset(StrategyReset {
        strategy: strategy.to_owned(),
        reset_by: Some(by),
        reason: Some(reason),
    });
    store::transaction(db, async |tx| tx.claim(None, &event, at).await).await
}

/// The tripped strategies, with the figures that tripped them.
pub async fn tripped(db: &DatabaseConnection) -> Result<Vec<strategy_breaker::Model>, DbErr> {
    store::breakers::tripped(db).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trips_stragglers_are_looked_for_until_a_look_on_a_whole_read_model_follows_its_period() {
        let at = |secs: i64| DateTime::from_timestamp(1_800_000_000 + secs, 0).unwrap();
        let period = chrono::Duration::seconds(61);
        let tripped = at(0);
        // Never looked since this process started: look.
        assert!(stragglers_may_remain(tripped, None, period));
        // Last look within the period: ignores may have come since.
        assert!(stragglers_may_remain(tripped, Some(at(30)), period));
        // The read model was behind for an hour after the trip, so the last
        // look came before the period ended: the first look now must flag.
        assert!(stragglers_may_remain(tripped, Some(at(-5)), period));
        // A look after the period on a whole read model found them all.
        assert!(!stragglers_may_remain(tripped, Some(at(62)), period));
    }
}
