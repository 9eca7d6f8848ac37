//! The keys' horizons are found through a table the projector writes after
//! the commit, not through an index on `effects` written before every 2xx.
//!
//! `effects_horizon` (`expires_at` of every key in the fast index) served
//! the sweeper alone, which purges the keys whose horizon has passed: no
//! decision reads it, yet each new key wrote an entry in it before its
//! delivery's answer. `effect_horizons` holds the same, one row per effect
//! whose key is in the fast index, written by the deliveries projector from
//! the journal (`KeyReserved` inserts, `KeysPurged` deletes) in the
//! transaction that moves its checkpoint, and rebuilt with the read model. A
//! horizon is hours or days; the projector is a second behind at most, and
//! the sweeper catches it up before it reads.
//!
//! Keyed by the effect's id (a UUIDv7, so new rows land at the right edge)
//! and indexed by horizon. The upgrade copies the horizons of the keys not
//! yet purged; rows the projector has still to apply are inserted again by
//! it, which a taken id skips.

use sea_orm_migration::prelude::*;

use crate::sql;

#[derive(DeriveMigrationName)]
pub struct Migration;

const SQLITE: &[&str] = &[
    "CREATE TABLE effect_horizons (
        effect_id  TEXT PRIMARY KEY NOT NULL,
        expires_at TEXT NOT NULL
    ) WITHOUT ROWID",
    "INSERT INTO effect_horizons (effect_id, expires_at)
        SELECT effect_id, expires_at FROM effects WHERE expires_at IS NOT NULL",
    "CREATE INDEX effect_horizons_expiring ON effect_horizons (expires_at)",
    "DROP INDEX IF EXISTS effects_horizon",
];

const POSTGRES: &[&str] = &[
    "CREATE TABLE effect_horizons (
        effect_id  TEXT PRIMARY KEY NOT NULL,
        expires_at TIMESTAMPTZ NOT NULL
    )",
    "INSERT INTO effect_horizons (effect_id, expires_at)
        SELECT effect_id, expires_at FROM effects WHERE expires_at IS NOT NULL",
    "CREATE INDEX effect_horizons_expiring ON effect_horizons (expires_at)",
    "DROP INDEX IF EXISTS effects_horizon",
    "ANALYZE effect_horizons",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, SQLITE, POSTGRES).await
    }
}
