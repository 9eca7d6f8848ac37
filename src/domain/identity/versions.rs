//! Strategy versions as recorded, and the check that a definition never
//! changes under the same `name@version`.
//!
//! The integrator persists [`Catalog::versions`] and, at start-up, refuses to
//! run while [`check_versions`] reports a conflict: old keys must never be
//! silently reinterpreted.

use super::catalog::Catalog;
use super::strategy::{StrategyRef, UNFINGERPRINTED, fingerprint_of};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeSet;
use std::fmt;

/// One strategy version as journaled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StrategyVersionRecord {
    pub name: String,
    pub version: u32,
    pub fingerprint: String,
    pub definition: Value,
}

/// A recorded `name@version` whose current definition differs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VersionConflict {
    pub strategy: StrategyRef,
    pub recorded_fingerprint: String,
    pub current_fingerprint: String,
    /// Top-level definition fields that differ, sorted.
    pub changed_fields: Vec<String>,
}

impl fmt::Display for VersionConflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "strategy {} changed without a version bump (fields changed: {}); \
             give the new definition version {} and keep {} until it is retired",
            self.strategy,
            self.changed_fields.join(", "),
            self.strategy.version + 1,
            self.strategy,
        )
    }
}

impl Catalog {
    /// Every definition in the catalog, retired ones included.
    pub fn versions(&self) -> Vec<StrategyVersionRecord> {
        self.strategies()
            .map(|s| StrategyVersionRecord {
                name: s.name.clone(),
                version: s.version,
                fingerprint: s.fingerprint(),
                definition: s.definition(),
            })
            .collect()
    }
}

/// Conflicts between what was recorded and the catalog now. A recorded
/// version missing from the catalog is not a conflict here (it may have been
/// migrated away); a new version is not either.
pub fn check_versions(
    recorded: &[StrategyVersionRecord],
    catalog: &Catalog,
) -> Vec<VersionConflict> {
    recorded
        .iter()
        .filter_map(|r| {
            let current = catalog.strategy(&r.name, r.version)?;
            let now = current.fingerprint();
            // Compare against the recorded definition itself, so a record whose
            // stored fingerprint was computed differently still reports fields.
            if now == r.fingerprint && now == fingerprint_of(&r.definition) {
                return None;
            }
            Some(VersionConflict {
                strategy: current.strategy_ref(),
                recorded_fingerprint: r.fingerprint.clone(),
                current_fingerprint: now,
                changed_fields: changed_fields(&r.definition, &current.definition()),
            })
        })
        .collect()
}

fn changed_fields(old: &Value, new: &Value) -> Vec<String> {
    let empty = serde_json::Map::new();
    let old = old.as_object().unwrap_or(&empty);
    let new = new.as_object().unwrap_or(&empty);
    let names: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    names
        .into_iter()
        .filter(|k| !UNFINGERPRINTED.contains(&k.as_str()))
        .filter(|k| old.get(*k) != new.get(*k))
        .cloned()
        .collect()
}
