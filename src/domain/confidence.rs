//! How much an identity can be trusted, and how much a mistake would cost.
//!
//! These two enums are shared by the identity engine (which derives a key of a
//! given strength) and the decision matrix (which weighs strength against
//! criticality). Their serialised names are stored in the journal: never rename.

use serde::{Deserialize, Serialize};

/// Strength of an identity key: how sure we are that two deliveries sharing it
/// ask for the same business effect.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Strength {
    /// Nothing in the key separates two legitimate repeats (fingerprints, raw hashes).
    Weak,
    /// A combination of business fields that usually, but not provably, separates repeats.
    Medium,
    /// A provider event id with a uniqueness contract, or a functional reference.
    Strong,
}

impl Strength {
    pub fn as_str(self) -> &'static str {
        match self {
            Strength::Weak => "weak",
            Strength::Medium => "medium",
            Strength::Strong => "strong",
        }
    }
}

/// What a wrong decision on an effect type would cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Criticality {
    /// Money, rights, stock: a duplicate or a loss is hard to undo.
    Critical,
    /// Notifications and the like: a duplicate can be corrected afterwards.
    Reversible,
}

impl Criticality {
    pub fn as_str(self) -> &'static str {
        match self {
            Criticality::Critical => "critical",
            Criticality::Reversible => "reversible",
        }
    }
}
