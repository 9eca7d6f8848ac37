//! Cases are found by their delivery through an index.
//!
//! Two reads now look cases up by delivery: a late call whose lease ran out
//! finds the case its expiry opened (in the writer's transaction), and a
//! breaker's evaluations after a trip skip the ignored deliveries a case
//! flags already (one probe per delivery ignored). Without an index each
//! read the whole table; cases are few beside deliveries, so the index
//! costs little to keep.

use sea_orm_migration::prelude::*;

use crate::sql;

#[derive(DeriveMigrationName)]
pub struct Migration;

const SQLITE: &[&str] = &["CREATE INDEX cases_delivery ON cases (delivery_id)"];

const POSTGRES: &[&str] = &[
    "CREATE INDEX cases_delivery ON cases (delivery_id)",
    "ANALYZE cases",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, SQLITE, POSTGRES).await
    }
}
