//! `unicity projections rebuild`: clears every projection and replays the
//! journal through the same `apply` the live path uses
//! (`store::projections::rebuild_in`), in one transaction that owns every
//! reservation, so that servers may run meanwhile.

use sea_orm::{DatabaseConnection, DbErr};

pub use crate::store::projections::Replayed;

/// Rebuilds all projections in one transaction: their batches wait on
/// PostgreSQL, and find the database busy on SQLite (a 503: providers
/// retry), until it commits.
pub async fn rebuild(db: &DatabaseConnection) -> Result<Replayed, DbErr> {
    // A batch's slow commit holds the journal longer than one try waits.
    let fence = crate::store::projector::fence_retried(db).await?;
    let txn = crate::store::begin_owning_reservations(db).await?;
    let replayed = crate::store::projections::rebuild_in(&txn, fence).await?;
    txn.commit().await?;
    Ok(replayed)
}
