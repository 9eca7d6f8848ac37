//! When a case's look-up failed, when it is tried again (`LookupPerformed`
//! carries the retry time), and how many times it was asked.

use sea_orm_migration::prelude::*;

use crate::sql;

#[derive(DeriveMigrationName)]
pub struct Migration;

const SQLITE: &[&str] = &[
    "ALTER TABLE cases ADD COLUMN lookups BIGINT NOT NULL DEFAULT 0",
    "ALTER TABLE cases ADD COLUMN next_lookup_at TEXT NULL",
    "CREATE INDEX cases_next_lookup ON cases (next_lookup_at) WHERE next_lookup_at IS NOT NULL",
];
const POSTGRES: &[&str] = &[
    "ALTER TABLE cases ADD COLUMN lookups BIGINT NOT NULL DEFAULT 0",
    "ALTER TABLE cases ADD COLUMN next_lookup_at TIMESTAMPTZ NULL",
    "CREATE INDEX cases_next_lookup ON cases (next_lookup_at) WHERE next_lookup_at IS NOT NULL",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, SQLITE, POSTGRES).await
    }
}
