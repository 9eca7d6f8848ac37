//! Operator access: accounts, API tokens, server-side sessions and the
//! one-time first-run setup link.
//!
//! `operators` and `api_tokens` are state tables written in the transaction
//! that journals the audit event (`OperatorCreated`, `TokenIssued`, ...): the
//! journal never holds a password or token hash, so they cannot be rebuilt
//! from it and are not projections. `sessions` and `setup_tokens` are
//! operational state. Secrets are stored only as hashes: argon2id for
//! passwords, SHA-256 for high-entropy tokens and session ids.

use sea_orm_migration::prelude::*;

use crate::sql;

#[derive(DeriveMigrationName)]
pub struct Migration;

fn tables(ts: &str, boolean: &str) -> Vec<String> {
    vec![
        format!(
            "CREATE TABLE operators (
                id            TEXT PRIMARY KEY NOT NULL,
                name          TEXT NOT NULL UNIQUE,
                role          TEXT NOT NULL,
                password_hash TEXT NOT NULL,
                enabled       {boolean} NOT NULL,
                created_at    {ts} NOT NULL,
                last_login_at {ts} NULL
            )"
        ),
        format!(
            "CREATE TABLE api_tokens (
                id         TEXT PRIMARY KEY NOT NULL,
                name       TEXT NOT NULL UNIQUE,
                role       TEXT NOT NULL,
                token_hash TEXT NOT NULL UNIQUE,
                created_at {ts} NOT NULL,
                expires_at {ts} NULL,
                revoked_at {ts} NULL
            )"
        ),
        format!(
            "CREATE TABLE sessions (
                id_hash     TEXT PRIMARY KEY NOT NULL,
                operator_id TEXT NULL,
                state       TEXT NOT NULL,
                created_at  {ts} NOT NULL,
                expires_at  {ts} NOT NULL
            )"
        ),
        "CREATE INDEX sessions_operator_id ON sessions (operator_id)".to_owned(),
        "CREATE INDEX sessions_expires_at ON sessions (expires_at)".to_owned(),
        format!(
            "CREATE TABLE setup_tokens (
                token_hash TEXT PRIMARY KEY NOT NULL,
                created_at {ts} NOT NULL,
                expires_at {ts} NOT NULL,
                used_at    {ts} NULL
            )"
        ),
    ]
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let sqlite = tables("TEXT", "INTEGER");
        let postgres = tables("TIMESTAMPTZ", "BOOLEAN");
        let sqlite: Vec<&str> = sqlite.iter().map(String::as_str).collect();
        let postgres: Vec<&str> = postgres.iter().map(String::as_str).collect();
        sql::run(manager, &sqlite, &postgres).await
    }
}
