//! `deliveries` is looked up by decision only for deliveries still deferred (a
//! few at any time): partial indexes over those rows replace the full ones,
//! which every delivery wrote to — one of them keyed by a random hash, a page
//! written per delivery. Queries must name the predicate literally
//! (`decision = 'defer'`, not a bound parameter) for either planner to use them.

use sea_orm_migration::prelude::*;

use crate::sql;

#[derive(DeriveMigrationName)]
pub struct Migration;

const BOTH: &[&str] = &[
    "DROP INDEX deliveries_business_key",
    "DROP INDEX deliveries_decision",
    "CREATE INDEX deliveries_deferred_by_key ON deliveries (business_key) WHERE decision = 'defer'",
    "CREATE INDEX deliveries_deferred ON deliveries (received_at) WHERE decision = 'defer'",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, BOTH, BOTH).await
    }
}
