//! The raw-body store: bytes addressed by their SHA-256, written once.

use chrono::{DateTime, Utc};
use sea_orm::{ActiveValue::Set, ConnectionTrait, DbErr, EntityTrait};
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

/// Stores `raw` under its hash. Storing the same bytes twice is a no-op.
pub async fn put<C: ConnectionTrait>(
    conn: &C,
    body: &BodyRef,
    raw: &[u8],
    at: DateTime<Utc>,
) -> Result<(), DbErr> {
    let row = raw_body::ActiveModel {
        sha256: Set(body.sha256.clone()),
        body: Set(Some(raw.to_vec())),
        size: Set(i64::try_from(body.size).unwrap_or(i64::MAX)),
        stored_at: Set(at),
        redacted_at: Set(None),
    };
    raw_body::Entity::insert(row)
        .on_conflict_do_nothing()
        .exec_without_returning(conn)
        .await?;
    Ok(())
}

/// The stored bytes, or `None` when unknown or redacted.
pub async fn get<C: ConnectionTrait>(conn: &C, sha256: &str) -> Result<Option<Vec<u8>>, DbErr> {
    Ok(raw_body::Entity::find_by_id(sha256.to_owned())
        .one(conn)
        .await?
        .and_then(|row| row.body))
}
