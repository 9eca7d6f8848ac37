//! One-time tokens of the case resolution form: each form shown carries one;
//! submitting it deletes the row, so the same form posted twice (a double
//! click, a reload, two tabs) resolves at most once and the second post says
//! so. Operational state, like `sessions`: not a projection.

use sea_orm_migration::prelude::*;

use crate::sql;

#[derive(DeriveMigrationName)]
pub struct Migration;

fn tables(ts: &str) -> Vec<String> {
    vec![
        format!(
            "CREATE TABLE case_form_tokens (
                token_hash  TEXT PRIMARY KEY NOT NULL,
                case_id     TEXT NOT NULL,
                operator_id TEXT NOT NULL,
                expires_at  {ts} NOT NULL
            )"
        ),
        "CREATE INDEX case_form_tokens_expires_at ON case_form_tokens (expires_at)".to_owned(),
    ]
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let sqlite = tables("TEXT");
        let postgres = tables("TIMESTAMPTZ");
        let sqlite: Vec<&str> = sqlite.iter().map(String::as_str).collect();
        let postgres: Vec<&str> = postgres.iter().map(String::as_str).collect();
        sql::run(manager, &sqlite, &postgres).await
    }
}
