//! Migration 054 cleared the look-up dates an earlier version set on open
//! cases no look-up settles; a resolved one kept its date, which resolving
//! never clears, while a rebuild of the cases leaves it empty. The same
//! rule, whatever the case's status, so that the table is what a rebuild
//! makes of the journal.

use sea_orm_migration::prelude::*;

use crate::sql;

#[derive(DeriveMigrationName)]
pub struct Migration;

const SQLITE: &[&str] = &["UPDATE cases SET next_lookup_at = NULL
    WHERE next_lookup_at IS NOT NULL
      AND (reason NOT IN ('weak_match_critical', 'medium_match_critical',
                          'evidence_purged', 'outcome_unknown')
           OR (reason = 'outcome_unknown' AND json_extract(details, '$.effect_id') IS NULL))"];

const POSTGRES: &[&str] = &["UPDATE cases SET next_lookup_at = NULL
    WHERE next_lookup_at IS NOT NULL
      AND (reason NOT IN ('weak_match_critical', 'medium_match_critical',
                          'evidence_purged', 'outcome_unknown')
           OR (reason = 'outcome_unknown' AND details->>'effect_id' IS NULL))"];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, SQLITE, POSTGRES).await
    }
}
