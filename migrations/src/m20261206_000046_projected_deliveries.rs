//! The deliveries read model follows the journal instead of being written
//! before each 2xx. A projector task applies the journal to `deliveries`
//! after the commit, from a checkpoint stored with its rows
//! (`projector_checkpoints`); it starts where the table already is, the
//! journal's current head.
//!
//! What a decision still needs before the 2xx moves out of `deliveries`: the
//! deliveries waiting for their key (`deferred_deliveries`, one row while a
//! delivery is deferred), copied from the deferred rows of `deliveries`,
//! whose partial index goes.

use sea_orm_migration::prelude::*;

use crate::sql;

#[derive(DeriveMigrationName)]
pub struct Migration;

const SQLITE: &[&str] = &[
    "CREATE TABLE projector_checkpoints (
        name      TEXT PRIMARY KEY NOT NULL,
        position  INTEGER NOT NULL
    )",
    "INSERT INTO projector_checkpoints (name, position)
        SELECT 'deliveries', COALESCE(MAX(position), 0) FROM journal",
    "CREATE TABLE deferred_deliveries (
        delivery_id   TEXT PRIMARY KEY NOT NULL,
        source        TEXT NOT NULL,
        business_key  TEXT NULL,
        received_at   TEXT NOT NULL
    )",
    "CREATE INDEX deferred_deliveries_by_key ON deferred_deliveries (business_key)",
    "CREATE INDEX deferred_deliveries_oldest ON deferred_deliveries (received_at)",
    "INSERT INTO deferred_deliveries (delivery_id, source, business_key, received_at)
        SELECT delivery_id, source, business_key, received_at FROM deliveries
        WHERE decision = 'defer'",
    "DROP INDEX IF EXISTS deliveries_deferred",
];

const POSTGRES: &[&str] = &[
    "CREATE TABLE projector_checkpoints (
        name      TEXT PRIMARY KEY,
        position  BIGINT NOT NULL
    )",
    "INSERT INTO projector_checkpoints (name, position)
        SELECT 'deliveries', COALESCE(MAX(position), 0) FROM journal",
    "CREATE TABLE deferred_deliveries (
        delivery_id   TEXT PRIMARY KEY,
        source        TEXT NOT NULL,
        business_key  TEXT NULL,
        received_at   TIMESTAMPTZ NOT NULL
    )",
    "CREATE INDEX deferred_deliveries_by_key ON deferred_deliveries (business_key)",
    "CREATE INDEX deferred_deliveries_oldest ON deferred_deliveries (received_at)",
    "INSERT INTO deferred_deliveries (delivery_id, source, business_key, received_at)
        SELECT delivery_id, source, business_key, received_at FROM deliveries
        WHERE decision = 'defer'",
    "DROP INDEX IF EXISTS deliveries_deferred",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, SQLITE, POSTGRES).await
    }
}
