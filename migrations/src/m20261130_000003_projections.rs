//! Projections derived from the journal, written in the same transaction as the
//! append and rebuildable from it (`unicity projections rebuild`):
//!
//! - `deliveries`: one row per delivery with its latest decision;
//! - `transport_links`: the first reception of each transport identity;
//! - `reservations`: the fast key index: one row per business key, the atomic
//!   barrier (primary key) with lease and fencing token; purged after the horizon;
//! - `effects` and `effect_deliveries`: the effects ledger: durable identity of
//!   every effect and every delivery that asked for it;
//! - `cases`: what waits for reconciliation or review.

use sea_orm_migration::prelude::*;

use crate::sql;

#[derive(DeriveMigrationName)]
pub struct Migration;

/// Column types differ per backend: (SQLite, PostgreSQL).
const TS: (&str, &str) = ("TEXT", "TIMESTAMPTZ");
const JSON: (&str, &str) = ("TEXT", "JSONB");

fn tables(ts: &str, json: &str, big: &str) -> Vec<String> {
    vec![
        format!(
            "CREATE TABLE deliveries (
                delivery_id           TEXT PRIMARY KEY NOT NULL,
                source                TEXT NOT NULL,
                tenant                TEXT NOT NULL,
                provider              TEXT NOT NULL,
                environment           TEXT NOT NULL,
                received_at           {ts} NOT NULL,
                status                TEXT NOT NULL,
                event_type            TEXT NULL,
                provider_event_id     TEXT NULL,
                transport_key         TEXT NULL,
                business_key          TEXT NULL,
                strategy              TEXT NULL,
                strength              TEXT NULL,
                decision              TEXT NULL,
                reason                TEXT NULL,
                layer                 TEXT NULL,
                reference_delivery_id TEXT NULL,
                effect_id             TEXT NULL,
                case_id               TEXT NULL,
                decided_at            {ts} NULL
            )"
        ),
        "CREATE INDEX deliveries_business_key ON deliveries (business_key, decision)".into(),
        "CREATE INDEX deliveries_received_at ON deliveries (received_at)".into(),
        "CREATE INDEX deliveries_decision ON deliveries (decision)".into(),
        format!(
            "CREATE TABLE transport_links (
                transport_key     TEXT PRIMARY KEY NOT NULL,
                first_delivery_id TEXT NOT NULL,
                body_fingerprint  TEXT NOT NULL,
                business_key      TEXT NULL,
                created_at        {ts} NOT NULL
            )"
        ),
        format!(
            "CREATE TABLE reservations (
                key               TEXT PRIMARY KEY NOT NULL,
                strategy          TEXT NOT NULL,
                strength          TEXT NOT NULL,
                effect_type       TEXT NOT NULL,
                criticality       TEXT NOT NULL,
                state             TEXT NOT NULL,
                fencing_token     {big} NOT NULL,
                lease_until       {ts} NULL,
                first_delivery_id TEXT NOT NULL,
                effect_id         TEXT NOT NULL,
                discriminants     {json} NOT NULL,
                expires_at        {ts} NOT NULL,
                updated_at        {ts} NOT NULL
            )"
        ),
        "CREATE INDEX reservations_expires_at ON reservations (expires_at)".into(),
        "CREATE INDEX reservations_lease ON reservations (state, lease_until)".into(),
        format!(
            "CREATE TABLE effects (
                effect_id         TEXT PRIMARY KEY NOT NULL,
                key               TEXT NOT NULL UNIQUE,
                effect_type       TEXT NOT NULL,
                criticality       TEXT NOT NULL,
                status            TEXT NOT NULL,
                sink              TEXT NOT NULL,
                result            {json} NULL,
                authoritative_ref TEXT NULL,
                first_delivery_id TEXT NOT NULL,
                discriminants     {json} NOT NULL,
                created_at        {ts} NOT NULL,
                settled_at        {ts} NULL,
                evidence_purged_at {ts} NULL
            )"
        ),
        format!(
            "CREATE TABLE effect_deliveries (
                effect_id   TEXT NOT NULL,
                delivery_id TEXT NOT NULL,
                linked_at   {ts} NOT NULL,
                PRIMARY KEY (effect_id, delivery_id)
            )"
        ),
        format!(
            "CREATE TABLE cases (
                case_id       TEXT PRIMARY KEY NOT NULL,
                delivery_id   TEXT NOT NULL,
                business_key  TEXT NULL,
                action        TEXT NOT NULL,
                reason        TEXT NOT NULL,
                status        TEXT NOT NULL,
                lookup_first  BOOLEAN NOT NULL,
                details       {json} NOT NULL,
                opened_at     {ts} NOT NULL,
                resolved_at   {ts} NULL
            )"
        ),
        "CREATE INDEX cases_status ON cases (status, opened_at)".into(),
    ]
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let sqlite = tables(TS.0, JSON.0, "INTEGER");
        let postgres = tables(TS.1, JSON.1, "BIGINT");
        let sqlite: Vec<&str> = sqlite.iter().map(String::as_str).collect();
        let postgres: Vec<&str> = postgres.iter().map(String::as_str).collect();
        sql::run(manager, &sqlite, &postgres).await
    }
}
