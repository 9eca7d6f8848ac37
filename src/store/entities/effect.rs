//! Projection `effects`: one row per taken business key. `key` (UNIQUE) is
//! the atomic barrier; `state`, `fencing_token` and `lease_until` are the
//! claim, settled by compare-and-set on the token; `expires_at` is the key's
//! horizon while it is in the fast index. Past the horizon the key is purged
//! (`key_purged`, the claim and horizon cleared) and the row stays as the
//! effects ledger, durable beyond it.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel, serde::Deserialize)]
#[sea_orm(table_name = "effects")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub effect_id: String,
    #[sea_orm(unique)]
    pub key: String,
    pub effect_type: String,
    pub criticality: String,
    /// `reserved` | `applied` | `failed` | `unknown` (`ReservationState`).
    pub state: String,
    /// The compare-and-set token; `None` once the key is purged.
    pub fencing_token: Option<i64>,
    pub lease_until: Option<DateTimeUtc>,
    /// The key's horizon; `None` once the key is purged.
    pub expires_at: Option<DateTimeUtc>,
    /// The key left the fast index at its horizon; the row is the ledger's.
    pub key_purged: bool,
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
