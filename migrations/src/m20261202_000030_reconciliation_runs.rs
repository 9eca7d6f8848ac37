//! Projection `reconciliation_runs`: each run of periodic reconciliation
//! (`ReconciliationRan`), its window and figures — what the dashboard's
//! "expected vs applied" reads. Effects are found by creation time for a
//! window.

use sea_orm_migration::prelude::*;

use crate::sql;

#[derive(DeriveMigrationName)]
pub struct Migration;

fn script(ts: &str) -> Vec<String> {
    vec![
        format!(
            "CREATE TABLE reconciliation_runs (
                run_id       TEXT PRIMARY KEY NOT NULL,
                provider     TEXT NOT NULL,
                source       TEXT NULL,
                window_from  {ts} NOT NULL,
                window_to    {ts} NOT NULL,
                expected     BIGINT NOT NULL,
                applied      BIGINT NOT NULL,
                matched      BIGINT NOT NULL,
                missing      BIGINT NOT NULL,
                unexpected   BIGINT NOT NULL,
                opened       BIGINT NOT NULL,
                error        TEXT NULL,
                ran_at       {ts} NOT NULL
            )"
        ),
        "CREATE INDEX reconciliation_runs_ran_at ON reconciliation_runs (ran_at)".into(),
        "CREATE INDEX effects_created_at ON effects (created_at)".into(),
    ]
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let sqlite = script("TEXT");
        let postgres = script("TIMESTAMPTZ");
        let sqlite: Vec<&str> = sqlite.iter().map(String::as_str).collect();
        let postgres: Vec<&str> = postgres.iter().map(String::as_str).collect();
        sql::run(manager, &sqlite, &postgres).await
    }
}
