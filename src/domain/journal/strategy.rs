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

/// An operator reset a tripped breaker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StrategyReset {
    pub strategy: String,
}
