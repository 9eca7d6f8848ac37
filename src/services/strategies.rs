//! Strategy versions: recorded (and journaled) on first use; a definition that
//! changed without a version bump stops the server with what changed.

use anyhow::bail;
use chrono::Utc;
use sea_orm::{ActiveValue::Set, DatabaseConnection, EntityTrait, TransactionTrait};

use super::engine::record;
use crate::domain::identity::{Catalog, StrategyVersionRecord, check_versions};
use crate::domain::journal::{JournalEvent, StrategyVersionRecorded};
use crate::store::entities::strategy_version;

/// Refuses to start on a changed-but-not-bumped strategy; records new versions.
pub async fn check_and_record(db: &DatabaseConnection, catalog: &Catalog) -> anyhow::Result<usize> {
    let recorded: Vec<StrategyVersionRecord> = strategy_version::Entity::find()
        .all(db)
        .await?
        .into_iter()
        .map(|row| StrategyVersionRecord {
            name: row.name,
            version: u32::try_from(row.version).unwrap_or_default(),
            fingerprint: row.fingerprint,
            definition: row.definition,
        })
        .collect();
    let conflicts = check_versions(&recorded, catalog);
    if !conflicts.is_empty() {
        let lines: Vec<String> = conflicts.iter().map(ToString::to_string).collect();
        bail!(
            "refusing to start: {}. Give the changed strategy a new version; old keys are never reinterpreted.",
            lines.join("; ")
        );
    }
    let now = Utc::now();
    let txn = db.begin().await?;
    let mut added = 0;
    for version in catalog.versions() {
        let known = recorded
            .iter()
            .any(|r| r.name == version.name && r.version == version.version);
        if known {
            continue;
        }
        let row = strategy_version::ActiveModel {
            name: Set(version.name.clone()),
            version: Set(i32::try_from(version.version).unwrap_or(i32::MAX)),
            fingerprint: Set(version.fingerprint.clone()),
            definition: Set(version.definition.clone()),
            recorded_at: Set(now),
        };
        let inserted = strategy_version::Entity::insert(row)
            .on_conflict_do_nothing()
            .exec_without_returning(&txn)
            .await?;
        if matches!(inserted, sea_orm::TryInsertResult::Inserted(1)) {
            let event = JournalEvent::StrategyVersionRecorded(StrategyVersionRecorded {
                name: version.name,
                version: version.version,
                fingerprint: version.fingerprint,
                definition: version.definition,
            });
            record(&txn, None, event, now).await?;
            added += 1;
        }
    }
    txn.commit().await?;
    Ok(added)
}
