//! Finding deliveries: by the resource they are about (a payment id, a new
//! column filled from `KeyDerived`), provider event or delivery id, business
//! key, newest first. Partial indexes skip the rows without a value (rejected
//! or unkeyed deliveries, providers without ids); `(received_at, delivery_id)`
//! replaces `(received_at)` so a page boundary is an index position, and the
//! key's index replaces the partial one over deferred deliveries by key (a
//! key has few deliveries), so a reception writes two more index entries.

use sea_orm_migration::prelude::*;

use crate::sql;

#[derive(DeriveMigrationName)]
pub struct Migration;

const BOTH: &[&str] = &[
    "ALTER TABLE deliveries ADD COLUMN resource TEXT NULL",
    "CREATE INDEX deliveries_resource ON deliveries (resource) WHERE resource IS NOT NULL",
    "CREATE INDEX deliveries_provider_event_id ON deliveries (provider_event_id) WHERE provider_event_id IS NOT NULL",
    "CREATE INDEX deliveries_business_key ON deliveries (business_key) WHERE business_key IS NOT NULL",
    "DROP INDEX deliveries_deferred_by_key",
    "CREATE INDEX deliveries_newest ON deliveries (received_at, delivery_id)",
    "DROP INDEX deliveries_received_at",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, BOTH, BOTH).await
    }
}
