//! PostgreSQL keeps each journal payload as the text Unicity wrote (`json`)
//! instead of taking it apart into `jsonb`. Nothing queries inside a payload
//! in the database: rows are appended as text and read back as text by the
//! read model's projector, the timelines and rebuilds, so `jsonb` parsed
//! every payload on insert and printed it again on every read. Measured on
//! the 20,000 `DeliveryDecided` rows of a benchmark run (2.5 KB each), in the
//! server: inserting them 1.07 s as `jsonb`, 0.66 s as `json`; reading them
//! as text 0.29 s against 0.09 s; 70 MB against 55 MB on disk. PostgreSQL
//! still checks that every payload is JSON.
//!
//! The change rewrites the journal once, under an exclusive lock: on a large
//! journal, plan the upgrade for a quiet moment. SQLite stores text already.

use sea_orm_migration::prelude::*;

use crate::sql;

#[derive(DeriveMigrationName)]
pub struct Migration;

const POSTGRES: &[&str] = &["ALTER TABLE journal ALTER COLUMN data TYPE json USING data::json"];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, &[], POSTGRES).await
    }
}
