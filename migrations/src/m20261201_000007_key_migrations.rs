//! Retiring a strategy version migrates the identities it keyed (`unicity
//! strategies migrate`), projected from the journal:
//!
//! - `migrated_keys`: a key of the newer version that stands for an effect an
//!   older, retired version keyed (re-derived from the retained body), with
//!   that body's discriminants under the newer version;
//! - `strategy_migrations`: the retired versions whose migration ran; until it
//!   has, the server refuses to start with the version retired.

use sea_orm_migration::prelude::*;

use crate::sql;

#[derive(DeriveMigrationName)]
pub struct Migration;

fn tables(ts: &str, json: &str) -> Vec<String> {
    vec![
        format!(
            "CREATE TABLE migrated_keys (
                key           TEXT PRIMARY KEY NOT NULL,
                effect_key    TEXT NOT NULL,
                strategy      TEXT NOT NULL,
                discriminants {json} NOT NULL,
                migrated_at   {ts} NOT NULL
            )"
        ),
        format!(
            "CREATE TABLE strategy_migrations (
                strategy    TEXT PRIMARY KEY NOT NULL,
                migrated    BIGINT NOT NULL,
                unmigrated  BIGINT NOT NULL,
                migrated_at {ts} NOT NULL
            )"
        ),
    ]
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let sqlite = tables("TEXT", "TEXT");
        let postgres = tables("TIMESTAMPTZ", "JSONB");
        let sqlite: Vec<&str> = sqlite.iter().map(String::as_str).collect();
        let postgres: Vec<&str> = postgres.iter().map(String::as_str).collect();
        sql::run(manager, &sqlite, &postgres).await
    }
}
