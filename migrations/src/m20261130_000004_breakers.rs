//! Projection `strategy_breakers`: strategies whose collision rate tripped
//! their breaker. While a strategy is tripped, no delivery it keys is ignored
//! automatically: a would-be ignore goes to reconciliation.

use sea_orm_migration::prelude::*;

use crate::sql;

#[derive(DeriveMigrationName)]
pub struct Migration;

const SQLITE: &[&str] = &["CREATE TABLE strategy_breakers (
        strategy    TEXT PRIMARY KEY NOT NULL,
        deliveries  INTEGER NOT NULL,
        collisions  INTEGER NOT NULL,
        tripped_at  TEXT NOT NULL
    )"];

const POSTGRES: &[&str] = &["CREATE TABLE strategy_breakers (
        strategy    TEXT PRIMARY KEY NOT NULL,
        deliveries  BIGINT NOT NULL,
        collisions  BIGINT NOT NULL,
        tripped_at  TIMESTAMPTZ NOT NULL
    )"];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, SQLITE, POSTGRES).await
    }
}
