//! The sweeper looks for expired leases among running ones only: index
//! `reservations_leased` holds reservations still `reserved`, instead of
//! `(state, lease_until)` over every reservation. A reservation settled in
//! the batch that took it (every `record` effect, any effect answered
//! before the batch committed) writes no entry; one settled later loses its
//! entry instead of gaining a second.

use sea_orm_migration::prelude::*;

use crate::sql;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let script = [
            "CREATE INDEX reservations_leased ON reservations (lease_until) WHERE state = 'reserved'",
            "DROP INDEX IF EXISTS reservations_lease",
        ];
        sql::run(manager, &script, &script).await
    }
}
