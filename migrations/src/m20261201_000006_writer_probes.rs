//! One row per group-commit writer, rewritten by the probe a writer commits
//! after a failed batch: the probe's commit is what tells `/readyz` the writer
//! can commit again (a disk with room again, a database back up) while no
//! delivery arrives to try it.

use sea_orm_migration::prelude::*;

use crate::sql;

#[derive(DeriveMigrationName)]
pub struct Migration;

const BOTH: &[&str] =
    &["CREATE TABLE writer_probes (writer TEXT PRIMARY KEY, probes BIGINT NOT NULL)"];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, BOTH, BOTH).await
    }
}
