//! Which key secret the database's keys are sealed with: its check is
//! recorded by the first engine to open the database and compared by every
//! later one (`services::engine`).

use chrono::Utc;
use sea_orm::{ActiveValue::Set, ConnectionTrait, DbErr, EntityTrait};

use super::entities::key_secret_check;

/// The check recorded for the database, if one is.
pub async fn recorded<C: ConnectionTrait>(conn: &C) -> Result<Option<String>, DbErr> {
    Ok(key_secret_check::Entity::find_by_id(1)
        .one(conn)
        .await?
        .map(|row| row.digest))
}

/// Records `check` unless a check is recorded already, then returns the
/// one recorded: `check` itself, or the one an earlier engine (or a
/// concurrent first one) recorded.
pub async fn record_or_read<C: ConnectionTrait>(conn: &C, check: &str) -> Result<String, DbErr> {
    let row = key_secret_check::ActiveModel {
        id: Set(1),
        digest: Set(check.to_owned()),
        recorded_at: Set(Utc::now()),
    };
    key_secret_check::Entity::insert(row)
        .on_conflict_do_nothing()
        .exec_without_returning(conn)
        .await?;
    key_secret_check::Entity::find_by_id(1)
        .one(conn)
        .await?
        .map(|row| row.digest)
        .ok_or_else(|| DbErr::RecordNotFound("key_secret_checks".to_owned()))
}
