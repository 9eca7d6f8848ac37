//! Periodic reconciliation finds a window's effects by the primary key's
//! range (effect ids are UUIDv7, made with the effect), not by an index on
//! `created_at`: one index entry fewer for every effect written.

use sea_orm_migration::prelude::*;

use crate::sql;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let drop = ["DROP INDEX IF EXISTS effects_created_at"];
        sql::run(manager, &drop, &drop).await
    }
}
