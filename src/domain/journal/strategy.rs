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
