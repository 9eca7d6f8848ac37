//! Projection `reservations`: the fast key index. The primary key is the atomic
//! barrier; settling is compare-and-set on `fencing_token`.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "reservations")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub key: String,
    pub strategy: String,
    pub strength: String,
    pub effect_type: String,
    pub criticality: String,
    pub state: String,
    pub fencing_token: i64,
    pub lease_until: Option<DateTimeUtc>,
    pub first_delivery_id: String,
    pub effect_id: String,
    #[sea_orm(column_type = "JsonBinary")]
    pub discriminants: Json,
    pub expires_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
