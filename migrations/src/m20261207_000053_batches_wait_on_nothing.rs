//! A batch answered "defer" no longer has a deferral row of its own.
//!
//! A batch's decision is its most telling item's: "defer" when one of its
//! items waits for a key another delivery holds. The item waits in its own
//! row, under that key; the batch has no key, so its row was woken by no
//! settlement, found nothing to decide when the sweeper took it, and stayed,
//! the oldest of the sweeper's batch of stale deferrals, for good. Deferral
//! rows without a key are dropped: a rebuild, which no longer writes them,
//! would leave the same table.

use sea_orm_migration::prelude::*;

use crate::sql;

#[derive(DeriveMigrationName)]
pub struct Migration;

const BOTH: &[&str] = &["DELETE FROM deferred_deliveries WHERE business_key IS NULL"];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, BOTH, BOTH).await
    }
}
