//! No open case is due for a look-up that no look-up can settle.
//!
//! A deferred delivery decided again opened its case due at once for the
//! sweeper's look-up whatever its reason. The provider's list settles only a
//! look-alike or a purged evidence (`weak_match_critical`,
//! `medium_match_critical`, `evidence_purged`), the downstream's status URL
//! only an unknown outcome naming its effect. Any other such case was asked
//! nothing, stayed due, and twenty of them took every place in each batch of
//! the sweeper's look-ups. The projection no longer makes them due; those
//! left due are cleared, as a rebuild would leave them.

use sea_orm_migration::prelude::*;

use crate::sql;

#[derive(DeriveMigrationName)]
pub struct Migration;

const SQLITE: &[&str] = &["UPDATE cases SET next_lookup_at = NULL
    WHERE next_lookup_at IS NOT NULL AND status = 'open'
      AND (reason NOT IN ('weak_match_critical', 'medium_match_critical',
                          'evidence_purged', 'outcome_unknown')
           OR (reason = 'outcome_unknown' AND json_extract(details, '$.effect_id') IS NULL))"];

const POSTGRES: &[&str] = &["UPDATE cases SET next_lookup_at = NULL
    WHERE next_lookup_at IS NOT NULL AND status = 'open'
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
