//! Projections `migrated_keys` and `strategy_migrations`, and what the
//! decision reads of them.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveValue::Set, ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QuerySelect,
};

use super::rows;
use crate::domain::journal::{KeyMigrated, StrategyMigrated};
use crate::store::entities::{effect, migrated_key, strategy_migration};

pub(super) async fn key_migrated<C: ConnectionTrait>(
    conn: &C,
    e: &KeyMigrated,
    at: DateTime<Utc>,
) -> Result<u64, DbErr> {
    let Some(to_key) = &e.to_key else {
        return Ok(0);
    };
    let row = migrated_key::ActiveModel {
        key: Set(to_key.clone()),
        effect_key: Set(e.from_key.clone()),
        strategy: Set(e.strategy.clone()),
        discriminants: Set(serde_json::to_value(&e.discriminants).unwrap_or_default()),
        migrated_at: Set(at),
    };
    migrated_key::Entity::insert(row)
        .on_conflict_do_nothing()
        .exec_without_returning(conn)
        .await
        .map(rows)
}

pub(super) async fn strategy_migrated<C: ConnectionTrait>(
    conn: &C,
    e: &StrategyMigrated,
    at: DateTime<Utc>,
) -> Result<u64, DbErr> {
    let row = strategy_migration::ActiveModel {
        strategy: Set(e.strategy.clone()),
        migrated: Set(i64::try_from(e.migrated).unwrap_or(i64::MAX)),
        unmigrated: Set(i64::try_from(e.unmigrated).unwrap_or(i64::MAX)),
        migrated_at: Set(at),
    };
    strategy_migration::Entity::insert(row)
        .on_conflict_do_nothing()
        .exec_without_returning(conn)
        .await
        .map(rows)
}

/// The `name@version` of every strategy version whose keys were migrated.
pub async fn migrated_strategies<C: ConnectionTrait>(conn: &C) -> Result<HashSet<String>, DbErr> {
    Ok(strategy_migration::Entity::find()
        .select_only()
        .column(strategy_migration::Column::Strategy)
        .into_tuple::<String>()
        .all(conn)
        .await?
        .into_iter()
        .collect())
}

/// The effects that migrated keys among `keys` stand for, with the
/// migration's row (its discriminants under the newer version).
pub async fn migrated_effects<C: ConnectionTrait>(
    conn: &C,
    keys: &[String],
) -> Result<Vec<(migrated_key::Model, effect::Model)>, DbErr> {
    let aliases = migrated_key::Entity::find()
        .filter(migrated_key::Column::Key.is_in(keys.iter().map(String::as_str)))
        .all(conn)
        .await?;
    if aliases.is_empty() {
        return Ok(Vec::new());
    }
    let effects = effect::Entity::find()
        .filter(effect::Column::Key.is_in(aliases.iter().map(|a| a.effect_key.as_str())))
        .all(conn)
        .await?;
    Ok(aliases
        .into_iter()
        .filter_map(|alias| {
            let found = effects.iter().find(|e| e.key == alias.effect_key)?.clone();
            Some((alias, found))
        })
        .collect())
}
