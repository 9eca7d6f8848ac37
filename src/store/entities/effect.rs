//! Projection `effects`: the effects ledger, durable beyond the key horizon.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "effects")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub effect_id: String,
    #[sea_orm(unique)]
    pub key: String,
    pub effect_type: String,
    pub criticality: String,
    pub status: String,
    pub sink: String,
    #[sea_orm(column_type = "JsonBinary", nullable)]
    pub result: Option<Json>,
    /// The id the downstream gave the effect when it applied it.
    pub downstream_ref: Option<String>,
    /// The provider's operation that justified the effect (cited by the
    /// look-up or the person that resolved its case); unique per effect type.
    pub provider_ref: Option<String>,
    pub first_delivery_id: String,
    #[sea_orm(column_type = "JsonBinary")]
    pub discriminants: Json,
    pub created_at: DateTimeUtc,
    pub settled_at: Option<DateTimeUtc>,
    pub evidence_purged_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
