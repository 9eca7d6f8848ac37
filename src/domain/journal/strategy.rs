//! A strategy version seen for the first time: its fingerprint and definition,
//! so that a later change without a version bump is caught at start.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StrategyVersionRecorded {
    pub name: String,
    pub version: u32,
    pub fingerprint: String,
    pub definition: serde_json::Value,
}

/// A delivery its strategy ignored as a duplicate within the window whose
/// collisions tripped the strategy's breaker, flagged for reconciliation
/// with the trip (journaled under the delivery's id): the same fault that
/// made keys collide may have merged distinct operations. It opens a
/// `breaker_tripped` case, as a would-be ignore after the trip does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CohortFlagged {
    pub case_id: uuid::Uuid,
    /// `name@version`.
    pub strategy: String,
    pub business_key: Option<String>,
    /// The delivery it was taken for a duplicate of, and that one's effect.
    pub reference_delivery_id: Option<uuid::Uuid>,
    pub effect_id: Option<uuid::Uuid>,
}

/// A strategy's collision rate crossed the threshold: auto-ignore stops for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StrategyTripped {
    /// `name@version`.
    pub strategy: String,
    pub deliveries: i64,
    pub collisions: i64,
    pub threshold: f64,
    pub window_secs: u64,
}

/// An operator reset a tripped breaker. Version 2 adds who and why
/// (absent from version 1 events).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StrategyReset {
    pub strategy: String,
    /// The operator (or `cli`) who reset it.
    #[serde(default)]
    pub reset_by: Option<String>,
    /// Why it was safe to resume auto-ignore.
    #[serde(default)]
    pub reason: Option<String>,
}

/// One effect a retiring strategy version keyed, re-derived under the newer
/// version from its retained body (`to_key`), or left for reconciliation
/// (`to_key` absent, `reason` says why).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyMigrated {
    /// The retiring `name@version`.
    pub strategy: String,
    pub from_key: String,
    pub effect_id: uuid::Uuid,
    pub to_key: Option<String>,
    /// The body's discriminants under the version of `to_key`.
    pub discriminants: std::collections::BTreeMap<String, serde_json::Value>,
    pub reason: Option<String>,
}

/// A strategy version's keys were migrated: it may be retired.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StrategyMigrated {
    pub strategy: String,
    pub migrated: u64,
    pub unmigrated: u64,
}
