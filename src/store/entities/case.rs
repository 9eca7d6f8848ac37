//! Projection `cases`: deliveries waiting for reconciliation or review.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "cases")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub case_id: String,
    pub delivery_id: String,
    pub business_key: Option<String>,
    pub action: String,
    pub reason: String,
    pub status: String,
    pub lookup_first: bool,
    #[sea_orm(column_type = "JsonBinary")]
    pub details: Json,
    pub opened_at: DateTimeUtc,
    pub resolved_at: Option<DateTimeUtc>,
    pub resolution: Option<String>,
    pub resolved_by: Option<String>,
    pub lookups: i64,
    pub next_lookup_at: Option<DateTimeUtc>,
    /// The operator the case was given to, by name.
    pub assignee: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
