//! One-time set-password links: an admin adds an operator (or resets one's
//! password) from the back-office and hands them a link instead of typing a
//! password for them. Like `setup_tokens`, operational state: only the
//! token's SHA-256 is stored, the link works once and expires.

use sea_orm_migration::prelude::*;

use crate::sql;

#[derive(DeriveMigrationName)]
pub struct Migration;

fn tables(ts: &str) -> Vec<String> {
    vec![
        format!(
            "CREATE TABLE password_links (
                token_hash  TEXT PRIMARY KEY NOT NULL,
                operator_id TEXT NOT NULL,
                created_at  {ts} NOT NULL,
                expires_at  {ts} NOT NULL,
                used_at     {ts} NULL
            )"
        ),
        "CREATE INDEX password_links_operator_id ON password_links (operator_id)".to_owned(),
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
