//! The raw-body store: bytes addressed by their SHA-256, written once.

use sea_orm::{ConnectionTrait, DbErr, EntityTrait};
use sha2::{Digest, Sha256};

use super::entities::raw_body;
use crate::domain::delivery::BodyRef;

/// Hashes raw bytes into the reference the journal keeps.
pub fn body_ref(raw: &[u8]) -> BodyRef {
    BodyRef {
        sha256: hex::encode(Sha256::digest(raw)),
        size: raw.len() as u64,
    }
}

/// The stored bytes, or `None` when unknown or redacted.
pub async fn get<C: ConnectionTrait>(conn: &C, sha256: &str) -> Result<Option<Vec<u8>>, DbErr> {
    Ok(raw_body::Entity::find_by_id(sha256.to_owned())
        .one(conn)
        .await?
        .and_then(|row| row.body))
}
