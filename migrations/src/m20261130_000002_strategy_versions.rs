//! The fingerprint of every strategy version ever used. A strategy whose
//! definition changes without a new version is refused at start: old keys are
//! never silently reinterpreted. Rows are also journaled (`StrategyVersionRecorded`).

use sea_orm_migration::prelude::*;

use crate::sql;

#[derive(DeriveMigrationName)]
pub struct Migration;

const SQLITE: &[&str] = &["CREATE TABLE strategy_versions (
        name        TEXT NOT NULL,
        version     INTEGER NOT NULL,
        fingerprint TEXT NOT NULL,
        definition  TEXT NOT NULL,
        recorded_at TEXT NOT NULL,
        PRIMARY KEY (name, version)
    )"];

const POSTGRES: &[&str] = &["CREATE TABLE strategy_versions (
        name        TEXT NOT NULL,
        version     INTEGER NOT NULL,
        fingerprint TEXT NOT NULL,
        definition  JSONB NOT NULL,
        recorded_at TIMESTAMPTZ NOT NULL,
        PRIMARY KEY (name, version)
    )"];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, SQLITE, POSTGRES).await
    }
}
