//! Deciding one keyed delivery inside its write transaction: read what
//! exists for its key (`Tx::evidence`), plan the decision on it
//! (`domain::plan`, pure) and, when the plan takes the key, claim it
//! atomically (`Tx::reserve`).
//!
//! There is no check-then-insert: the reservation is an insert that does
//! nothing on conflict (or a compare-and-set on the fencing token), and a
//! delivery that loses the race plans again against the winner's row.

use chrono::{DateTime, Utc};
use sea_orm::DbErr;
use uuid::Uuid;

use super::engine::Engine;
use crate::domain::decision::{Identity, TransportMatch};
use crate::domain::delivery::DeliveryId;
use crate::domain::journal::{KeyDerived, KeySummary};
use crate::domain::plan::{self, Given, Plan};
use crate::store::Tx;

/// Plans `delivery_id`'s decision on `key` and takes the key the plan names
/// (its effect going to `sink`). The plan comes back for the caller to
/// record in the same transaction.
pub async fn keyed(
    tx: &mut Tx<'_>,
    engine: &Engine,
    sink: &str,
    delivery_id: DeliveryId,
    key: &KeySummary,
    transport: TransportMatch,
    at: DateTime<Utc>,
) -> Result<Plan, DbErr> {
    // On PostgreSQL a loser of the insert race waits for the winner's commit,
    // then sees its row: two passes always suffice; the third is a safety net.
    for _ in 0..3 {
        // `None`: a reservation committed between two reads; look again.
        let Some(evidence) = tx.evidence(key, at).await? else {
            continue;
        };
        let plan = plan::keyed(Given {
            key,
            transport: transport.clone(),
            evidence,
            // A held delivery's case is put to the provider's API at once.
            lookup_available: engine.lookup_for(key).is_some(),
            breaker_tripped: engine.is_tripped(&key.strategy),
            delivery_id,
            sink,
            lease: engine.lease(),
            at,
            new_effect: Uuid::now_v7(),
        });
        // Lost: another delivery took the key meanwhile; plan again against
        // its row.
        if let Some(take) = &plan.take
            && !tx.reserve(take, at).await?
        {
            continue;
        }
        return Ok(plan);
    }
    // Never reached in practice; holding the delivery is the safe answer.
    Err(DbErr::Custom(
        "reservation contended three times".to_owned(),
    ))
}

/// One event to decide: a whole delivery, or one item of a batch.
pub struct Event<'a> {
    pub id: DeliveryId,
    pub derived: &'a KeyDerived,
    pub identity: Identity,
    /// Where its effect goes; `None`: it has no business key.
    pub sink: Option<&'static str>,
}

/// Plans an event's decision: against its key (taking it on `process`,
/// see `keyed`), or, when it has none, on its transport identity alone.
pub async fn event(
    tx: &mut Tx<'_>,
    engine: &Engine,
    event: &Event<'_>,
    transport: TransportMatch,
    at: DateTime<Utc>,
) -> Result<Plan, DbErr> {
    let business = event.derived.business.as_ref();
    match (business, event.sink) {
        (Some(key), Some(sink)) => keyed(tx, engine, sink, event.id, key, transport, at).await,
        _ => Ok(plan::unkeyed(
            event.identity,
            transport,
            business.map(|key| key.key.clone()),
        )),
    }
}
