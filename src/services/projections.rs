//! `unicity projections rebuild`: clears every projection and replays the
//! journal through the same `apply` the live path uses.

use sea_orm::{DatabaseConnection, DbErr, TransactionTrait};

use crate::store::journal;
use crate::store::projections;

const PAGE: u64 = 2000;

/// Rebuilds all projections in one transaction; returns the events replayed.
pub async fn rebuild(db: &DatabaseConnection) -> Result<u64, DbErr> {
    let txn = db.begin().await?;
    projections::clear(&txn).await?;
    let mut replayed = 0;
    let mut after = i64::MIN;
    loop {
        let events = journal::page_after(&txn, after, PAGE)
            .await
            .map_err(|e| DbErr::Custom(e.to_string()))?;
        if events.is_empty() {
            break;
        }
        for stored in events {
            after = stored.position;
            projections::apply(&txn, stored.delivery_id, &stored.event, stored.recorded_at).await?;
            replayed += 1;
        }
    }
    txn.commit().await?;
    Ok(replayed)
}
