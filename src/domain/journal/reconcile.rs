//! Events of periodic reconciliation: what a run over a window found, and
//! each discrepancy it opened a case for.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::ProviderOperation;

/// What a discrepancy is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DiscrepancyKind {
    /// The provider lists an operation no effect stands for: a delivery
    /// never arrived, or was lost.
    MissingEffect,
    /// An effect was applied that the provider does not list.
    UnexpectedEffect,
}

impl DiscrepancyKind {
    /// The stored name, also the case's reason (frozen).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MissingEffect => "missing_effect",
            Self::UnexpectedEffect => "unexpected_effect",
        }
    }
}

/// A reconciliation found a discrepancy and opened a case for it. Journaled
/// once per operation or effect: the case id is derived from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiscrepancyFound {
    pub case_id: Uuid,
    pub kind: DiscrepancyKind,
    pub provider: String,
    pub window_from: DateTime<Utc>,
    pub window_to: DateTime<Utc>,
    /// The provider's operation (missing effect).
    pub operation: Option<ProviderOperation>,
    /// The effect and its key (unexpected effect).
    pub effect_id: Option<Uuid>,
    pub key: Option<String>,
}

/// A reconciliation paired an operation with an effect by their fields
/// (resource, amount, currency): the effect stands for that operation from
/// now on, as if it had been cited (its provider reference), and answers no
/// other in a later run. Claimed only while the effect cites nothing and no
/// other effect cites the operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EffectPaired {
    pub effect_id: Uuid,
    pub key: String,
    /// The provider's operation id.
    pub operation: String,
    pub run_id: Uuid,
}

/// One reconciliation run over a window for a provider: the provider's
/// operations ("expected") against the effects applied, and what it opened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReconciliationRan {
    pub run_id: Uuid,
    pub provider: String,
    /// Only the effects of deliveries to this source, when one was named.
    pub source: Option<String>,
    pub window_from: DateTime<Utc>,
    pub window_to: DateTime<Utc>,
    pub expected: u64,
    pub applied: u64,
    pub matched: u64,
    pub missing: u64,
    pub unexpected: u64,
    /// Cases opened by this run (a discrepancy already in a case is not
    /// opened again).
    pub opened: u64,
    /// The provider could not be listed: nothing was compared.
    pub error: Option<String>,
}
