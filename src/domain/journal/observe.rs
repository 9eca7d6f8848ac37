//! Events of observe mode: a source's mode as the server started with it,
//! and the legacy handler's effects imported to be compared with what
//! Unicity decided.

use serde::{Deserialize, Serialize};

/// A source, or some of its effect types, started in another mode than the
/// one last recorded: `observe` (decided and journaled, no effect sent; a
/// legacy handler applies them) or `enforce`. Journaled at start, so the
/// switch is on the record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceModeSet {
    pub source: String,
    pub mode: String,
    /// The mode last recorded (`enforce` when none was).
    pub previous: String,
    /// The effect types (a pattern, as `[[sinks]]` writes them) this mode is
    /// for; none for the source as a whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect_type: Option<String>,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mode_for_some_effect_types_reads_back_and_one_for_the_source_stays_as_stored() {
        let typed = serde_json::json!({
            "source": "refunds", "mode": "observe", "previous": "enforce",
            "effect_type": "refund.*",
        });
        let set: SourceModeSet = serde_json::from_value(typed.clone()).unwrap();
        assert_eq!(set.effect_type.as_deref(), Some("refund.*"));
        assert_eq!(serde_json::to_value(&set).unwrap(), typed);
        let whole =
            serde_json::json!({"source": "refunds", "mode": "observe", "previous": "enforce"});
        let set: SourceModeSet = serde_json::from_value(whole.clone()).unwrap();
        assert_eq!(set.effect_type, None);
        assert_eq!(serde_json::to_value(&set).unwrap(), whole);
    }
}
