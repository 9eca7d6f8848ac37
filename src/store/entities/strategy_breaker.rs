//! Projection `strategy_breakers`: a tripped strategy and the figures that tripped it.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "strategy_breakers")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub strategy: String,
    pub deliveries: i64,
    pub collisions: i64,
    pub tripped_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
