//! `unicity projections rebuild`: clears every projection and replays the
//! journal through the same `apply` the live path uses.

use sea_orm::{DatabaseConnection, DbErr, TransactionTrait};

use crate::store::journal;
use crate::store::projections;

const PAGE: u64 = 2000;

/// What a rebuild replayed: journal rows, and the events they hold (a
/// `DeliveryDecided` row holds a delivery's reception, key and decision).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Replayed {
    pub rows: u64,
    pub events: u64,
}

/// Rebuilds all projections in one transaction.
pub async fn rebuild(db: &DatabaseConnection) -> Result<Replayed, DbErr> {
    let txn = db.begin().await?;
    projections::clear(&txn).await?;
    let mut replayed = Replayed::default();
    let mut after = i64::MIN;
    loop {
        let events = journal::page_after(&txn, after, PAGE)
            .await
            .map_err(|e| DbErr::Custom(e.to_string()))?;
        if events.is_empty() {
            break;
        }
        for stored in events {
            if stored.position != after {
                replayed.rows += 1;
            }
            after = stored.position;
            projections::apply(&txn, stored.delivery_id, &stored.event, stored.recorded_at).await?;
            replayed.events += 1;
        }
    }
    txn.commit().await?;
    Ok(replayed)
}
