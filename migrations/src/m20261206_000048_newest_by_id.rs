//! Newest first is the primary key's order: delivery ids are UUIDv7 made at
//! reception, so the deliveries read model is paged, and its time windows
//! read, as ranges of its primary key, and `(received_at, delivery_id)`
//! stops being written for every delivery.

use sea_orm_migration::prelude::*;

use crate::sql;

#[derive(DeriveMigrationName)]
pub struct Migration;

const BOTH: &[&str] = &["DROP INDEX IF EXISTS deliveries_newest"];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, BOTH, BOTH).await
    }
}
