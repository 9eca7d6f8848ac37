//! Projection `deliveries`: one row per delivery with its latest decision.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "deliveries")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub delivery_id: String,
    pub source: String,
    pub tenant: String,
    pub provider: String,
    pub environment: String,
    pub received_at: DateTimeUtc,
    pub status: String,
    pub event_type: Option<String>,
    pub provider_event_id: Option<String>,
    pub transport_key: Option<String>,
    pub business_key: Option<String>,
    pub strategy: Option<String>,
    pub strength: Option<String>,
    pub decision: Option<String>,
    pub reason: Option<String>,
    pub layer: Option<String>,
    pub reference_delivery_id: Option<String>,
    pub effect_id: Option<String>,
    pub case_id: Option<String>,
    pub decided_at: Option<DateTimeUtc>,
    /// The resource the delivery is about (a payment id), `hmac:…` when sensitive.
    pub resource: Option<String>,
    /// The position of the journal row that holds the delivery's reception
    /// (`DeliveryDecided`, `DeliveryReceived` or `DeliveryRejected`): how its
    /// events are found, that row having no entry in the journal's index by
    /// delivery (`store::journal::for_delivery`).
    pub received_position: Option<i64>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
