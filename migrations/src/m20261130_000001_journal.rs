//! The append-only journal and the raw-body store.
//!
//! `journal` rows can never be updated or deleted: a trigger refuses it on both
//! backends. Raw bodies live apart, addressed by SHA-256, so a retention policy
//! can redact the bytes (`body` set to NULL, `redacted_at` set) while every
//! journal event keeps the hash as proof.

use sea_orm_migration::prelude::*;

use crate::sql;

#[derive(DeriveMigrationName)]
pub struct Migration;

const SQLITE: &[&str] = &[
    "CREATE TABLE journal (
        position      INTEGER PRIMARY KEY AUTOINCREMENT,
        delivery_id   TEXT NULL,
        event_type    TEXT NOT NULL,
        event_version INTEGER NOT NULL,
        data          TEXT NOT NULL,
        recorded_at   TEXT NOT NULL
    )",
    "CREATE INDEX journal_delivery_id ON journal (delivery_id, position)",
    "CREATE TRIGGER journal_no_update BEFORE UPDATE ON journal
     BEGIN SELECT RAISE(ABORT, 'journal is append-only: UPDATE refused'); END",
    "CREATE TRIGGER journal_no_delete BEFORE DELETE ON journal
     BEGIN SELECT RAISE(ABORT, 'journal is append-only: DELETE refused'); END",
    "CREATE TABLE raw_bodies (
        sha256      TEXT PRIMARY KEY NOT NULL,
        body        BLOB NULL,
        size        INTEGER NOT NULL,
        stored_at   TEXT NOT NULL,
        redacted_at TEXT NULL
    )",
];

const POSTGRES: &[&str] = &[
    "CREATE TABLE journal (
        position      BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        delivery_id   TEXT NULL,
        event_type    TEXT NOT NULL,
        event_version INTEGER NOT NULL,
        data          JSONB NOT NULL,
        recorded_at   TIMESTAMPTZ NOT NULL
    )",
    "CREATE INDEX journal_delivery_id ON journal (delivery_id, position)",
    "CREATE FUNCTION unicity_journal_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN
         RAISE EXCEPTION 'journal is append-only: % refused', TG_OP;
     END
     $$",
    "CREATE TRIGGER journal_no_update_delete BEFORE UPDATE OR DELETE ON journal
     FOR EACH ROW EXECUTE FUNCTION unicity_journal_append_only()",
    "CREATE TRIGGER journal_no_truncate BEFORE TRUNCATE ON journal
     FOR EACH STATEMENT EXECUTE FUNCTION unicity_journal_append_only()",
    "CREATE TABLE raw_bodies (
        sha256      TEXT PRIMARY KEY NOT NULL,
        body        BYTEA NULL,
        size        BIGINT NOT NULL,
        stored_at   TIMESTAMPTZ NOT NULL,
        redacted_at TIMESTAMPTZ NULL
    )",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, SQLITE, POSTGRES).await
    }
}
