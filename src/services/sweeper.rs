//! The periodic sweep: expired leases become `unknown` (reconciled, never
//! re-run), settled keys past their horizon leave the fast index (their row is
//! flagged purged and stays as the effects ledger's), and deferred deliveries whose key moved on are re-decided.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sea_orm::DbErr;
use uuid::Uuid;

use super::effects::{redecide, redecide_deferred};
use super::engine::{SharedEngine, WriteEvent};
use crate::domain::journal::{JournalEvent, KeysPurged, ReservationExpired};
use crate::domain::plan::base_key;
use crate::store::entities::deferred_delivery;
use crate::store::projections::deliveries;
use crate::store::{projector, reservations};

const BATCH: u64 = 200;

/// What one sweep did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Swept {
    pub expired: usize,
    pub purged: usize,
    pub redecided: usize,
    /// Failed look-ups asked again, unknown outcomes verified.
    pub lookups: usize,
}

/// Runs `sweep` forever at the configured interval.
pub fn spawn(engine: SharedEngine) {
    let interval = Duration::from_millis(engine.config.sweep_interval_ms.max(50));
    crate::tasks::supervise("sweeper", move || {
        let engine = engine.clone();
        async move {
            loop {
                if let Err(error) = sweep(&engine).await {
                    tracing::warn!(%error, "sweep failed; retrying at the next interval");
                }
                tokio::time::sleep(interval).await;
            }
        }
    });
}

pub async fn sweep(engine: &SharedEngine) -> Result<Swept, DbErr> {
    let mut swept = Swept {
        expired: expire_leases(engine).await?,
        purged: purge_horizon(engine, Utc::now()).await?,
        ..Swept::default()
    };
    for row in &stale_deferrals(engine).await? {
        redecide(engine, row).await?;
        swept.redecided += 1;
    }
    swept.lookups = super::lookups::retry_due(engine)
        .await
        .map_err(|error| DbErr::Custom(error.to_string()))?;
    Ok(swept)
}

/// Deferred deliveries whose key is no longer held by a live lease: normally
/// re-decided by the settlement itself, these were missed (a crash between
/// settlement and re-decision, or a settlement in another process).
async fn stale_deferrals(engine: &SharedEngine) -> Result<Vec<deferred_delivery::Model>, DbErr> {
    let deferred = deliveries::longest_deferred(&engine.db, BATCH).await?;
    if deferred.is_empty() {
        return Ok(deferred);
    }
    let keys: Vec<&str> = deferred
        .iter()
        .filter_map(|d| d.business_key.as_deref())
        .collect();
    let now = Utc::now();
    let held = reservations::held(&engine.db, &keys, now).await?;
    Ok(deferred
        .into_iter()
        .filter(|d| {
            d.business_key
                .as_ref()
                .is_none_or(|key| !held.contains(key))
        })
        .collect())
}

async fn expire_leases(engine: &SharedEngine) -> Result<usize, DbErr> {
    let now = Utc::now();
    let expired = reservations::lease_expired(&engine.db, now, BATCH).await?;
    let mut count = 0;
    for row in expired {
        let (Ok(effect_id), Ok(first), Some(fencing_token)) = (
            row.effect_id.parse(),
            row.first_delivery_id.parse(),
            row.fencing_token,
        ) else {
            continue;
        };
        let event = JournalEvent::ReservationExpired(ReservationExpired {
            key: row.key.clone(),
            effect_id,
            fencing_token,
            case_id: Uuid::now_v7(),
            first_delivery_id: first,
        });
        let took = engine
            .writer
            .submit(WriteEvent::claim(Some(first), event).at(now))
            .await?;
        if took {
            count += 1;
            engine.metrics.effect_settled(&row.effect_type, "unknown");
            tracing::warn!(delivery.id = %first, effect.id = %effect_id, "lease expired: outcome unknown, sent to reconciliation");
            redecide_deferred(engine, base_key(&row.key)).await?;
        }
    }
    Ok(count)
}

/// Purges from the fast index the applied keys whose horizon ended before
/// `now`: their row is flagged purged and stays as the effects ledger's.
/// The horizons are the projector's, written after the commit. When the
/// journal it has not applied goes back further before `now` than its own
/// pace and a sweep's interval (a projector held up), the sweeper applies
/// it first, for `READ_WAIT` at most; otherwise a key the projector has not
/// reached is purged on a later round, and the sweeper adds no rounds to a
/// projector on its schedule.
pub async fn purge_horizon(engine: &SharedEngine, now: DateTime<Utc>) -> Result<usize, DbErr> {
    let lag = projector::lag(&engine.db).await?;
    let patience =
        super::projector::pace(engine).max(Duration::from_millis(engine.config.sweep_interval_ms));
    let patience = chrono::Duration::from_std(patience).unwrap_or(chrono::Duration::MAX);
    if lag.since.is_some_and(|since| now - since > patience) {
        super::projector::caught_up(engine, super::projector::READ_WAIT).await?;
    }
    let keys = reservations::past_horizon(&engine.db, now, BATCH).await?;
    if keys.is_empty() {
        return Ok(0);
    }
    let count = keys.len();
    let event = JournalEvent::KeysPurged(KeysPurged { keys });
    engine
        .writer
        .submit(WriteEvent::record(None, event).at(now))
        .await?;
    tracing::info!(count, "keys past their horizon purged from the fast index");
    Ok(count)
}
