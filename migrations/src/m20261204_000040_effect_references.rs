//! An effect names both references it can carry, under names that say
//! whose they are: `downstream_ref`, the id the downstream gave the effect
//! when it applied it (formerly `authoritative_ref`), and `provider_ref`,
//! the provider's operation that justified it (a look-up or a person that
//! resolved a case "process as distinct" citing it). Reconciliation pairs a
//! provider's operation with the effect that cites it.
//!
//! A provider operation justifies at most one effect of a type: a unique
//! index on `(effect_type, provider_ref)` makes "already consumed" part of
//! the claim itself, across writers and processes. Effects without a
//! provider reference (NULL) are not constrained.

use sea_orm_migration::prelude::*;

use crate::sql;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let script = [
            "ALTER TABLE effects RENAME COLUMN authoritative_ref TO downstream_ref",
            "ALTER TABLE effects ADD COLUMN provider_ref TEXT",
            "CREATE UNIQUE INDEX effects_provider_ref ON effects (effect_type, provider_ref) \
             WHERE provider_ref IS NOT NULL",
        ];
        sql::run(manager, &script, &script).await
    }
}
