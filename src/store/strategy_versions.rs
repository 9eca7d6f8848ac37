//! The strategy registry (`strategy_versions`): each version as first used.
//! A state table written beside `StrategyVersionRecorded`, not a projection.

use chrono::{DateTime, Utc};
use sea_orm::{ActiveValue::Set, ConnectionTrait, DbErr, EntityTrait, TryInsertResult};

use super::entities::strategy_version;
use crate::domain::identity::StrategyVersionRecord;

/// Every recorded version.
pub async fn all<C: ConnectionTrait>(conn: &C) -> Result<Vec<StrategyVersionRecord>, DbErr> {
    Ok(strategy_version::Entity::find()
        .all(conn)
        .await?
        .into_iter()
        .map(|row| StrategyVersionRecord {
            name: row.name,
            version: u32::try_from(row.version).unwrap_or_default(),
            fingerprint: row.fingerprint,
            definition: row.definition,
        })
        .collect())
}

/// Records `version` unless it is there already; true when this call did.
pub async fn insert<C: ConnectionTrait>(
    conn: &C,
    version: &StrategyVersionRecord,
    at: DateTime<Utc>,
) -> Result<bool, DbErr> {
    let row = strategy_version::ActiveModel {
        name: Set(version.name.clone()),
        version: Set(i32::try_from(version.version).unwrap_or(i32::MAX)),
        fingerprint: Set(version.fingerprint.clone()),
        definition: Set(version.definition.clone()),
        recorded_at: Set(at),
    };
    let inserted = strategy_version::Entity::insert(row)
        .on_conflict_do_nothing()
        .exec_without_returning(conn)
        .await?;
    Ok(matches!(inserted, TryInsertResult::Inserted(1)))
}
