//! Projection `transport_links`: the first reception of a transport identity.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, serde::Deserialize)]
#[sea_orm(table_name = "transport_links")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub transport_key: String,
    pub first_delivery_id: String,
    /// Canonical body without volatile fields, else the raw-body hash.
    pub body_fingerprint: String,
    pub business_key: Option<String>,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
