//! Schema of Unicity, one migration per file. A merged migration is never edited:
//! sea-orm names migrations after their file names and records them as applied.

pub use sea_orm_migration::prelude::*;

mod m20261130_000001_journal;
mod m20261130_000002_strategy_versions;
mod m20261130_000003_projections;
mod m20261130_000004_breakers;
mod m20261130_000005_deferred_indexes;
mod m20261201_000006_writer_probes;
mod m20261201_000007_key_migrations;
mod m20261201_000008_operator_access;
mod m20261201_000020_case_resolutions;
mod m20261201_000021_case_lookups;
mod m20261202_000022_delivery_search;
mod m20261202_000030_reconciliation_runs;
mod m20261202_000031_case_form_tokens;
mod m20261203_000032_effects_by_id_range;
mod m20261203_000033_running_leases;
mod m20261203_000034_journal_rows_inline;
mod m20261204_000040_effect_references;
mod m20261204_000041_password_links;
mod m20261204_000042_journal_audited;
mod m20261204_000043_case_assignees;
mod m20261204_000044_password_links_audited;
mod m20261205_000045_one_row_per_key;
mod m20261206_000046_projected_deliveries;
mod m20261206_000047_clustered_keys;
mod m20261206_000048_newest_by_id;
mod m20261206_000049_journal_payload_as_written;
mod m20261206_000050_keys_owned_then_read;
pub mod m20261206_000051_receptions_found_by_read_model;
mod m20261206_000052_horizons_after_the_commit;
mod m20261207_000053_batches_wait_on_nothing;
mod m20261207_000054_no_case_due_that_no_look_up_settles;
mod m20261207_000055_cases_by_delivery;
mod m20261207_000056_look_ups_audited;
mod m20261207_000057_no_resolved_case_due;
mod m20261207_000058_hand_made_holds;
mod m20261207_000059_key_secret_check;
mod m20261208_000060_access_issued_by;
mod sql;

pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(m20261130_000001_journal::Migration),
            Box::new(m20261130_000002_strategy_versions::Migration),
            Box::new(m20261130_000003_projections::Migration),
            Box::new(m20261130_000004_breakers::Migration),
            Box::new(m20261130_000005_deferred_indexes::Migration),
            Box::new(m20261201_000006_writer_probes::Migration),
            Box::new(m20261201_000007_key_migrations::Migration),
            Box::new(m20261201_000008_operator_access::Migration),
            Box::new(m20261201_000020_case_resolutions::Migration),
            Box::new(m20261201_000021_case_lookups::Migration),
            Box::new(m20261202_000022_delivery_search::Migration),
            Box::new(m20261202_000030_reconciliation_runs::Migration),
            Box::new(m20261202_000031_case_form_tokens::Migration),
            Box::new(m20261203_000032_effects_by_id_range::Migration),
            Box::new(m20261203_000033_running_leases::Migration),
            Box::new(m20261203_000034_journal_rows_inline::Migration),
            Box::new(m20261204_000040_effect_references::Migration),
            Box::new(m20261204_000041_password_links::Migration),
            Box::new(m20261204_000042_journal_audited::Migration),
            Box::new(m20261204_000043_case_assignees::Migration),
            Box::new(m20261204_000044_password_links_audited::Migration),
            Box::new(m20261205_000045_one_row_per_key::Migration),
            Box::new(m20261206_000046_projected_deliveries::Migration),
            Box::new(m20261206_000047_clustered_keys::Migration),
            Box::new(m20261206_000048_newest_by_id::Migration),
            Box::new(m20261206_000049_journal_payload_as_written::Migration),
            Box::new(m20261206_000050_keys_owned_then_read::Migration),
            Box::new(m20261206_000051_receptions_found_by_read_model::Migration),
            Box::new(m20261206_000052_horizons_after_the_commit::Migration),
            Box::new(m20261207_000053_batches_wait_on_nothing::Migration),
            Box::new(m20261207_000054_no_case_due_that_no_look_up_settles::Migration),
            Box::new(m20261207_000055_cases_by_delivery::Migration),
            Box::new(m20261207_000056_look_ups_audited::Migration),
            Box::new(m20261207_000057_no_resolved_case_due::Migration),
            Box::new(m20261207_000058_hand_made_holds::Migration),
            Box::new(m20261207_000059_key_secret_check::Migration),
            Box::new(m20261208_000060_access_issued_by::Migration),
        ]
    }
}
