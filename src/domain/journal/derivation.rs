//! What `KeyDerived` keeps of a derivation (version 2): the proof of the key,
//! not the identity engine's working state.
//!
//! Version 1 stored the live `Derivation` whole, so renaming a field of the
//! identity engine silently changed what was journaled, and every delivery
//! carried its chosen strategy twice and each older version's material again
//! (1.6–3 KiB). Version 2 keeps, in shapes of its own: where the transport id
//! came from, how the chosen strategy keyed (kind, definition fingerprint,
//! scope, and the named fields it read — a body-hashing strategy's material
//! is the body, kept apart under retention; its key is the proof), the
//! strategies skipped and why, and why no key could be derived. The keys in
//! force and what each discriminates on are in `KeySummary`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::domain::identity::{
    BusinessIdentity, SkipReason, Skipped, StrategyRef, TransportIdentity, Unresolved,
};

/// The proof of one derivation, as journaled.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DerivationProof {
    /// Where the transport id came from (`header:x-github-delivery`, a body
    /// path, or `raw_body_sha256`). Absent for an item of a batch, whose
    /// transport identity is its batch's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport_id_source: Option<String>,
    /// How the chosen strategy keyed the delivery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub business: Option<KeyingProof>,
    /// Strategies tried before the chosen one, in order, and why each did not key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<SkippedStrategy>,
    /// Why no business identity could be derived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unresolved: Option<UnresolvedDetail>,
}

/// How the chosen strategy keyed a delivery.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyingProof {
    /// `provider_event_id`, `business_reference`, `semantic`,
    /// `canonical_fingerprint` or `raw_hash`.
    pub kind: String,
    /// Fingerprint of the strategy definition that produced the key.
    pub definition_fingerprint: String,
    /// Scope additions bound into the key, sensitive values masked.
    #[serde(default, skip_serializing_if = "is_empty")]
    pub scope: Value,
    /// The named fields the key was computed from, sensitive values masked;
    /// absent for a strategy that hashes the body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub material: Option<Value>,
}

/// A strategy skipped, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedStrategy {
    pub strategy: StrategyName,
    pub reason: SkipDetail,
}

/// `name` and `version` of a strategy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StrategyName {
    pub name: String,
    pub version: u32,
}

/// Why a strategy did not key a delivery.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "code", rename_all = "snake_case")]
pub enum SkipDetail {
    MissingField {
        field: String,
        path: String,
    },
    /// Since 2026-12-07.
    InexactNumber {
        field: String,
        path: String,
    },
    /// Since 2026-12-07 (evening).
    BlankField {
        field: String,
        path: String,
    },
    NotApplicable {
        event_type: String,
    },
}

/// Why no business identity could be derived.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "code", rename_all = "snake_case")]
pub enum UnresolvedDetail {
    Unparseable,
    BodyTooDeep {
        limit: usize,
    },
    DuplicateMemberNames,
    UnknownProvider {
        provider: String,
    },
    UnknownEventType {
        event_type: Option<String>,
        missing: Vec<String>,
    },
    NoStrategyApplies {
        event_type: String,
    },
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(map) => map.is_empty(),
        _ => false,
    }
}

impl DerivationProof {
    /// The proof of a derivation's outcome.
    pub fn of(
        transport: Option<&TransportIdentity>,
        business: Option<&BusinessIdentity>,
        skipped: &[Skipped],
        unresolved: Option<&Unresolved>,
    ) -> Self {
        Self {
            transport_id_source: transport.map(|t| t.id_source.clone()),
            business: business.map(KeyingProof::of),
            skipped: skipped.iter().map(SkippedStrategy::of).collect(),
            unresolved: unresolved.map(UnresolvedDetail::of),
        }
    }

    /// Version 1's whole derivation (`Derivation` or `ItemDerivation` as
    /// they were serialised then), reduced to version 2's proof.
    pub(super) fn from_v1(derivation: &Value) -> Value {
        let mut proof = serde_json::Map::new();
        if let Some(source) = derivation.pointer("/transport/id_source") {
            proof.insert("transport_id_source".into(), source.clone());
        }
        if let Some(business) = derivation.get("business").filter(|b| b.is_object()) {
            let keep = ["kind", "definition_fingerprint", "scope", "material"];
            let kept: serde_json::Map<String, Value> = keep
                .iter()
                .filter_map(|field| Some(((*field).to_owned(), business.get(*field)?.clone())))
                .collect();
            proof.insert("business".into(), Value::Object(kept));
        }
        for field in ["skipped", "unresolved"] {
            if let Some(value) = derivation.get(field).filter(|v| !v.is_null()) {
                proof.insert(field.into(), value.clone());
            }
        }
        Value::Object(proof)
    }
}

impl KeyingProof {
    fn of(b: &BusinessIdentity) -> Self {
        Self {
            kind: b.kind.as_str().to_owned(),
            definition_fingerprint: b.definition_fingerprint.clone(),
            scope: b.scope.clone(),
            material: b.kind.reads_fields().then(|| b.material.clone()),
        }
    }
}

impl SkippedStrategy {
    fn of(skipped: &Skipped) -> Self {
        Self {
            strategy: StrategyName::of(&skipped.strategy),
            reason: match &skipped.reason {
                SkipReason::MissingField { field, path } => SkipDetail::MissingField {
                    field: field.clone(),
                    path: path.clone(),
                },
                SkipReason::InexactNumber { field, path } => SkipDetail::InexactNumber {
                    field: field.clone(),
                    path: path.clone(),
                },
                SkipReason::BlankField { field, path } => SkipDetail::BlankField {
                    field: field.clone(),
                    path: path.clone(),
                },
                SkipReason::NotApplicable { event_type } => SkipDetail::NotApplicable {
                    event_type: event_type.clone(),
                },
            },
        }
    }
}

impl StrategyName {
    fn of(strategy: &StrategyRef) -> Self {
        Self {
            name: strategy.name.clone(),
            version: strategy.version,
        }
    }
}

impl UnresolvedDetail {
    fn of(unresolved: &Unresolved) -> Self {
        match unresolved.clone() {
            Unresolved::Unparseable => Self::Unparseable,
            Unresolved::BodyTooDeep { limit } => Self::BodyTooDeep { limit },
            Unresolved::DuplicateMemberNames => Self::DuplicateMemberNames,
            Unresolved::UnknownProvider { provider } => Self::UnknownProvider { provider },
            Unresolved::UnknownEventType {
                event_type,
                missing,
            } => Self::UnknownEventType {
                event_type,
                missing,
            },
            Unresolved::NoStrategyApplies { event_type } => Self::NoStrategyApplies { event_type },
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::JournalEvent;

    /// A version 1 row: the live derivation whole, with the chosen
    /// strategy, an older version's material and a skipped strategy.
    fn stored_v1() -> serde_json::Value {
        let chosen = json!({
            "strategy": {"name": "p", "version": 2}, "kind": "business_reference",
            "strength": "strong", "key": "p@2:aa", "effect_type": "refund.create",
            "criticality": "critical", "horizon_secs": 60, "scope": {"resource_type": "payment"},
            "discriminants": {"amount": 1}, "missing_discriminants": [],
            "material": {"payment": "pay_1", "refund_reference": "rr_1"},
            "definition_fingerprint": "f2"
        });
        let mut older = chosen.clone();
        older["key"] = "p@1:bb".into();
        json!({
            "event_type": "refund.created", "transport_key": "t", "provider_event_id": "evt_1",
            "body_fingerprint": "b", "unresolved": null,
            "business": {
                "key": "p@2:aa", "strategy": "p@2", "strength": "strong",
                "effect_type": "refund.create", "criticality": "critical", "horizon_secs": 60,
                "discriminants": {"amount": 1}, "missing_discriminants": [],
                "older_keys": ["p@1:bb"]
            },
            "derivation": {
                "provider": "p",
                "event_type": "refund.created",
                "transport": {"key": "t", "id_source": "header:x-id", "id": "evt_1",
                              "raw_body_sha256": "r", "body_fingerprint": "b"},
                "business": chosen,
                "skipped": [{"strategy": {"name": "q", "version": 1},
                             "reason": {"code": "missing_field", "field": "ref", "path": "$.ref"}}],
                "older_versions": [older],
                "unresolved": null
            }
        })
    }

    #[test]
    fn a_version_1_derivation_reads_as_its_proof_and_is_stored_smaller() {
        let stored = stored_v1();
        let Ok(JournalEvent::KeyDerived(read)) =
            JournalEvent::from_stored("KeyDerived", 1, stored.clone())
        else {
            panic!("a version 1 KeyDerived must read");
        };
        let proof = &read.derivation;
        assert_eq!(proof.transport_id_source.as_deref(), Some("header:x-id"));
        let keyed = proof
            .business
            .as_ref()
            .expect("the chosen strategy's proof");
        assert_eq!(keyed.kind, "business_reference");
        assert_eq!(keyed.definition_fingerprint, "f2");
        assert_eq!(
            keyed.material,
            Some(json!({"payment": "pay_1", "refund_reference": "rr_1"}))
        );
        assert_eq!(keyed.scope, json!({"resource_type": "payment"}));
        assert_eq!(proof.skipped.len(), 1);
        assert_eq!(proof.skipped[0].strategy.name, "q");
        assert!(proof.unresolved.is_none());
        // Rewritten as version 2, the chosen strategy and the older
        // version's material are no longer repeated.
        let again = JournalEvent::KeyDerived(read).data_text();
        assert!(again.len() < stored.to_string().len());
        assert_eq!(again.matches("pay_1").count(), 1, "{again}");
    }
}
