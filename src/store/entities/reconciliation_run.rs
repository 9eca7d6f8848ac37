//! Projection `reconciliation_runs`: one row per run of periodic reconciliation.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "reconciliation_runs")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub run_id: String,
    pub provider: String,
    pub source: Option<String>,
    pub window_from: DateTimeUtc,
    pub window_to: DateTimeUtc,
    pub expected: i64,
    pub applied: i64,
    pub matched: i64,
    pub missing: i64,
    pub unexpected: i64,
    pub opened: i64,
    pub error: Option<String>,
    pub ran_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
