//! A raw body, addressed by the SHA-256 of its bytes. `body` becomes NULL when
//! a retention policy redacts it; the hash stays as proof.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "raw_bodies")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub sha256: String,
    pub body: Option<Vec<u8>>,
    pub size: i64,
    pub stored_at: DateTimeUtc,
    pub redacted_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
