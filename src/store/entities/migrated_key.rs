//! Projection `migrated_keys`: a newer version's key standing for an effect a
//! retired version keyed.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "migrated_keys")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub key: String,
    pub effect_key: String,
    /// The retired `name@version` that keyed the effect.
    pub strategy: String,
    #[sea_orm(column_type = "JsonBinary")]
    pub discriminants: Json,
    pub migrated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
