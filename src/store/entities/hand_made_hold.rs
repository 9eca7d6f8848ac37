//! An operation a person made by hand (a missing effect closed
//! `made_by_hand`): the seal of its resource, amount and currency, under
//! which a delivery that would be applied is held for a person instead.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "hand_made_holds")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub seal: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub case_id: String,
    pub provider: String,
    /// The provider's id of the operation made by hand.
    pub operation_id: String,
    pub held_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
