//! A server-side session, addressed by the SHA-256 of the id its cookie holds.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "sessions")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id_hash: String,
    pub operator_id: Option<String>,
    /// The session's key/value state as a JSON object.
    pub state: String,
    pub created_at: DateTimeUtc,
    /// End of the idle timeout, pushed back on every request.
    pub expires_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
