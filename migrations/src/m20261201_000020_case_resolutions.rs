//! A case records how it was resolved and by whom (`CaseResolved`); its note
//! stays in the journal.

use sea_orm_migration::prelude::*;

use crate::sql;

#[derive(DeriveMigrationName)]
pub struct Migration;

const BOTH: &[&str] = &[
    "ALTER TABLE cases ADD COLUMN resolution TEXT NULL",
    "ALTER TABLE cases ADD COLUMN resolved_by TEXT NULL",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, BOTH, BOTH).await
    }
}
