//! A case can be given to an operator (`CaseAssigned`): its assignee, and an
//! index over the assigned cases only, for "my cases".

use sea_orm_migration::prelude::*;

use crate::sql;

#[derive(DeriveMigrationName)]
pub struct Migration;

const BOTH: &[&str] = &[
    "ALTER TABLE cases ADD COLUMN assignee TEXT NULL",
    "CREATE INDEX cases_assignee ON cases (assignee) WHERE assignee IS NOT NULL",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, BOTH, BOTH).await
    }
}
