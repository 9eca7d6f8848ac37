//! Projection `strategy_migrations`: retired versions whose keys were migrated.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "strategy_migrations")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub strategy: String,
    pub migrated: i64,
    pub unmigrated: i64,
    pub migrated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
