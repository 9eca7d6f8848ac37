//! Events of observe mode: a source's mode as the server started with it,
//! and the legacy handler's effects imported to be compared with what
//! Unicity decided.

use serde::{Deserialize, Serialize};

/// A source started in another mode than the one last recorded: `observe`
/// (decided and journaled, no effect sent; a legacy handler applies them)
/// or `enforce`. Journaled at start, so the switch is on the record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceModeSet {
    pub source: String,
    pub mode: String,
    /// The mode last recorded (`enforce` when none was).
    pub previous: String,
}

/// The effects a legacy handler applied for a source, imported from its
/// log (`unicity observe import`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LegacyEffectsImported {
    pub source: String,
    /// SHA-256 of the file imported, hex.
    pub file_sha256: String,
    pub effects: Vec<LegacyEffect>,
}

/// One effect the legacy handler applied.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LegacyEffect {
    /// The provider operation it was applied for, when the log names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// The resource (a payment id).
    pub resource: String,
    /// The amount, as the log writes it (compared with the effect's
    /// `amount` discriminant).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amount: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_at: Option<String>,
}
