//! `unicity projections rebuild`: clears every projection and replays the
//! journal through the same `apply` the live path uses
//! (`store::projections::rebuild`).

use sea_orm::{DatabaseConnection, DbErr};

pub use crate::store::projections::Replayed;

/// Rebuilds all projections in one transaction.
pub async fn rebuild(db: &DatabaseConnection) -> Result<Replayed, DbErr> {
    crate::store::projections::rebuild(db).await
}
