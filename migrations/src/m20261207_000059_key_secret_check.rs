//! The key secret's check: a keyed digest of a fixed text under the secret
//! the database's keys were first sealed with. Sensitive values enter keys
//! sealed under that secret, so another secret derives other keys for the
//! same deliveries, without a version: a retry after the change finds
//! nothing and its effect runs again. An engine opened with another secret
//! compares the check and refuses to start. One row; not a projection.

use sea_orm_migration::prelude::*;

use crate::sql;

#[derive(DeriveMigrationName)]
pub struct Migration;

fn tables(ts: &str) -> Vec<String> {
    vec![format!(
        "CREATE TABLE key_secret_checks (
            id          INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
            digest      TEXT NOT NULL,
            recorded_at {ts} NOT NULL
        )"
    )]
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run_with_timestamps(manager, tables).await
    }
}
