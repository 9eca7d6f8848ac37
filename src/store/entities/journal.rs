//! One row of the append-only journal.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "journal")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub position: i64,
    pub delivery_id: Option<String>,
    pub event_type: String,
    pub event_version: i32,
    #[sea_orm(column_type = "Json")]
    pub data: Json,
    pub recorded_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
