//! Projections: how each journal event changes the derived tables.
//!
//! `apply` is the single place that writes the projections a decision reads.
//! The live path calls it in the transaction that appends the event; `rebuild`
//! replays the journal through it. The deliveries read model, which no
//! decision reads, follows the journal after the commit (`projector`, through
//! `deliveries::Fold`); `rebuild` replays it too. Where an event is an atomic claim (a reservation, a settlement,
//! an expiry), `apply` returns the rows it changed and the caller appends the
//! event only if the claim succeeded, so replaying the journal reaches the same
//! state as the live run.

mod breakers;
mod cases;
pub mod deliveries;
mod effects;
mod horizons;
pub mod migrations;
mod reconcile;

pub use effects::reserve;
pub(crate) use effects::retake;

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DbErr};

use crate::domain::delivery::DeliveryId;
use crate::domain::journal::{EffectSettled, JournalEvent};

/// Stable names of the projection tables, in the order `rebuild` clears them.
pub const TABLES: [&str; 12] = [
    "deliveries",
    "effect_horizons",
    "deferred_deliveries",
    "transport_links",
    "effects",
    "effect_deliveries",
    "cases",
    "hand_made_holds",
    "strategy_breakers",
    "migrated_keys",
    "strategy_migrations",
    "reconciliation_runs",
];

/// Empties every projection table, for a rebuild in the same transaction.
pub async fn clear<C: ConnectionTrait>(conn: &C) -> Result<(), DbErr> {
    for table in TABLES {
        conn.execute_unprepared(&format!("DELETE FROM {table}"))
            .await?;
    }
    Ok(())
}

/// Applies one event; returns the rows its main statement changed.
pub async fn apply<C: ConnectionTrait>(
    conn: &C,
    delivery_id: Option<DeliveryId>,
    event: &JournalEvent,
    at: DateTime<Utc>,
) -> Result<u64, DbErr> {
    let id = delivery_id.map(|d| d.to_string()).unwrap_or_default();
    match event {
        // The deliveries read model follows the journal (`projector`).
        JournalEvent::DeliveryReceived(_) | JournalEvent::DeliveryRejected(_) => Ok(0),
        JournalEvent::KeyDerived(e) => deliveries::insert_transport_link(conn, &id, e, at).await,
        JournalEvent::DecisionMade(e) => {
            let changed = deliveries::decision_made(conn, &id, e, at).await?;
            cases::apply(conn, &id, event, at).await?;
            Ok(changed)
        }
        // Readers get its parts (`JournalEvent::into_parts`), never this.
        JournalEvent::DeliveryDecided(_) => Err(DbErr::Custom(
            "a folded DeliveryDecided row is applied through its parts".to_owned(),
        )),
        JournalEvent::KeyReserved(e) => effects::reserved(conn, e, at).await,
        JournalEvent::EffectApplied(e)
        | JournalEvent::EffectFailed(e)
        | JournalEvent::EffectOutcomeUnknown(e) => settle(conn, e, at).await,
        JournalEvent::ReservationExpired(e) => {
            let claimed = effects::expired(conn, e, at).await?;
            if claimed == 1 {
                cases::apply(conn, &id, event, at).await?;
            }
            Ok(claimed)
        }
        JournalEvent::KeysPurged(e) => effects::keys_purged(conn, e).await,
        JournalEvent::EvidencePurged(e) => effects::evidence_purged(conn, e, at).await,
        JournalEvent::StrategyTripped(e) => breakers::tripped(conn, e, at).await,
        JournalEvent::StrategyReset(e) => breakers::reset(conn, e).await,
        JournalEvent::KeyMigrated(e) => migrations::key_migrated(conn, e, at).await,
        JournalEvent::StrategyMigrated(e) => migrations::strategy_migrated(conn, e, at).await,
        // Counts only: read from the journal, no projection.
        JournalEvent::RejectionsAggregated(_) => Ok(0),
        // Recorded in its own table by the strategy registry, not a projection.
        JournalEvent::StrategyVersionRecorded(_) => Ok(0),
        // An audit record only: no projection counts reads.
        JournalEvent::RawBodyRead(_) => Ok(0),
        // An audit record only.
        JournalEvent::FixtureExported(_) => Ok(0),
        // Observe mode reads these from the journal: no projection.
        JournalEvent::SourceModeSet(_) | JournalEvent::LegacyEffectsImported(_) => Ok(0),
        JournalEvent::CaseResolved(e) => {
            let claimed = cases::apply(conn, &id, event, at).await?;
            if claimed == 1 {
                effects::resolved_as_duplicate(conn, &id, e, at).await?;
                cases::held(conn, e, at).await?;
            }
            Ok(claimed)
        }
        // A case's comments are read from the journal (its history).
        JournalEvent::CaseCommented(_) => Ok(0),
        JournalEvent::CaseAssigned(_) => cases::apply(conn, &id, event, at).await,
        JournalEvent::LookupPerformed(_)
        | JournalEvent::StatusLookupPerformed(_)
        | JournalEvent::DiscrepancyFound(_)
        | JournalEvent::CohortFlagged(_) => cases::apply(conn, &id, event, at).await,
        JournalEvent::ReconciliationRan(e) => reconcile::ran(conn, e, at).await,
        JournalEvent::EffectPaired(e) => effects::paired(conn, e).await,
        // Audit of operator access: operators and tokens are state tables
        // written beside these events (their hashes are never journaled).
        JournalEvent::OperatorLoggedIn(_)
        | JournalEvent::LoginFailed(_)
        | JournalEvent::OperatorLoggedOut(_)
        | JournalEvent::OperatorCreated(_)
        | JournalEvent::OperatorDisabled(_)
        | JournalEvent::OperatorRoleChanged(_)
        | JournalEvent::OperatorPasswordChanged(_)
        | JournalEvent::PasswordLinkIssued(_)
        | JournalEvent::TokenIssued(_)
        | JournalEvent::TokenRevoked(_)
        | JournalEvent::SetupCompleted(_) => Ok(0),
    }
}

/// Settles an effect by compare-and-set on its fencing token (the ledger and
/// the key index), then, if that took, the cases it opens or answers.
pub(crate) async fn settle<C: ConnectionTrait>(
    conn: &C,
    e: &EffectSettled,
    at: DateTime<Utc>,
) -> Result<u64, DbErr> {
    let claimed = effects::settled(conn, e, at).await?;
    if claimed == 1 {
        cases::settled(conn, e, at).await?;
    }
    Ok(claimed)
}

const PAGE: u64 = 2000;

/// What a rebuild replayed: journal rows, and the events they hold (a
/// `DeliveryDecided` row holds a delivery's reception, key and decision).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Replayed {
    pub rows: u64,
    pub events: u64,
}

/// Clears every projection and replays the journal through `apply` (and the
/// deliveries read model through its fold, page by page), in `txn`, which
/// the caller commits: readers see the old state or the rebuilt one. The
/// read model's checkpoint is then the fence it was replayed to.
///
/// `txn` owns every reservation (`store::begin_owning_reservations`), so no
/// batch of any process reserves, settles or journals beside it: servers
/// may run meanwhile. Without that, a settlement's update found its row
/// deleted under it and was refused. The read model is replayed up to
/// `fence` (`checkpoint::fence`, read before `txn` began), as its projector
/// would be: on PostgreSQL a row with a lower position may commit after a
/// page was read. The projector applies what follows from the fence, and
/// waits on its checkpoint's row until the rebuild ends.
pub async fn rebuild_in(txn: &sea_orm::DatabaseTransaction, fence: i64) -> Result<Replayed, DbErr> {
    super::checkpoint::hold(txn).await?;
    clear(txn).await?;
    // A stretch the projector committed after the fence was read is kept
    // (its end was a fence too): the checkpoint never moves back, which
    // `journal::for_delivery` relies on (a reception at or before it is in
    // the read model). Read once the projector can no longer move it: held
    // on PostgreSQL, and on SQLite behind the write `clear` made.
    let fence = fence.max(super::checkpoint::checkpoint(txn, super::checkpoint::DELIVERIES).await?);
    let mut replayed = Replayed::default();
    let mut after = i64::MIN;
    loop {
        let events = super::journal::page_after(txn, after, PAGE)
            .await
            .map_err(|e| DbErr::Custom(e.to_string()))?;
        if events.is_empty() {
            break;
        }
        // The page's read-model rows go first: replaying a deferral reads
        // its delivery's reception, found through them
        // (`journal::for_delivery`).
        let mut read_model = deliveries::Fold::default();
        for stored in events.iter().filter(|s| s.position <= fence) {
            let id = stored.delivery_id.map(|d| d.to_string());
            let id = id.unwrap_or_default();
            read_model.add(&id, &stored.event, (stored.recorded_at, stored.position));
        }
        read_model.write(txn).await?;
        for stored in events {
            if stored.position != after {
                replayed.rows += 1;
            }
            after = stored.position;
            apply(txn, stored.delivery_id, &stored.event, stored.recorded_at).await?;
            replayed.events += 1;
        }
    }
    super::checkpoint::reset(txn, super::checkpoint::DELIVERIES, fence).await?;
    Ok(replayed)
}

/// The text a key column of a row to insert holds (empty when not set),
/// to insert rows in key order.
fn text_of(value: &sea_orm::ActiveValue<String>) -> &str {
    match value {
        sea_orm::ActiveValue::Set(text) | sea_orm::ActiveValue::Unchanged(text) => text,
        sea_orm::ActiveValue::NotSet => "",
    }
}

/// Rows written by an insert that may have done nothing.
pub(super) fn rows(result: sea_orm::TryInsertResult<u64>) -> u64 {
    match result {
        sea_orm::TryInsertResult::Inserted(n) => n,
        _ => 0,
    }
}
