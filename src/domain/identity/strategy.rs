//! A key strategy as declared in TOML: which fields it reads, how it
//! normalises them, its scope, horizon, strength and the effect it identifies.
//!
//! A definition is data. Its fingerprint (SHA-256 of the RFC 8785 form of the
//! definition, `description` and `retired` left out because they change no
//! key) is what pins a `name@version`: a definition that changes must change
//! version.

use super::field::FieldRef;
use super::horizon::Horizon;
use super::jcs;
use super::normalize::NormalizeRules;
use crate::domain::confidence::{Criticality, Strength};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;
use std::fmt;

/// The family of evidence a strategy relies on (the design's hierarchy levels).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    ProviderEventId,
    BusinessReference,
    Semantic,
    CanonicalFingerprint,
    RawHash,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::ProviderEventId => "provider_event_id",
            Kind::BusinessReference => "business_reference",
            Kind::Semantic => "semantic",
            Kind::CanonicalFingerprint => "canonical_fingerprint",
            Kind::RawHash => "raw_hash",
        }
    }

    /// Kinds whose material is a list of named fields (the others hash a body).
    pub fn reads_fields(self) -> bool {
        matches!(
            self,
            Kind::ProviderEventId | Kind::BusinessReference | Kind::Semantic
        )
    }
}

/// A named value read from the delivery.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamedField {
    pub name: String,
    pub path: FieldRef,
    /// An optional field enters the material as `null` when absent instead of
    /// making the strategy skip.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
}

/// One scope addition: a literal (`resource_type = "refund"`) or a value read
/// from the delivery (the account a Connect event belongs to).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScopeItem {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<FieldRef>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
}

/// `name@version`, the identity of one strategy definition.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct StrategyRef {
    pub name: String,
    pub version: u32,
}

impl fmt::Display for StrategyRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.name, self.version)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StrategyDef {
    pub name: String,
    pub version: u32,
    pub provider: String,
    /// Event-type patterns this strategy applies to (`*` is a wildcard).
    pub event_types: Vec<String>,
    pub kind: Kind,
    #[serde(default)]
    pub fields: Vec<NamedField>,
    #[serde(default)]
    pub normalize: NormalizeRules,
    #[serde(default)]
    pub scope: Vec<ScopeItem>,
    pub horizon: Horizon,
    pub strength: Strength,
    #[serde(default)]
    pub discriminants: Vec<NamedField>,
    /// Body paths whose values enter keys only through HMAC-SHA256.
    #[serde(default)]
    pub sensitive: Vec<FieldRef>,
    pub effect_type: String,
    pub criticality: Criticality,
    /// When false, two event types of one fact (`effect_type` shared) share a key.
    #[serde(default = "default_true")]
    pub key_includes_event_type: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// A retired version is kept for the record but keys nothing any more.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retired: bool,
    /// `fingerprint()`, computed once: every keyed delivery names it.
    #[serde(skip)]
    fingerprint: Memo,
}

/// A value computed once and then read; no part of what it memoises.
#[derive(Debug, Clone, Default)]
struct Memo(std::sync::OnceLock<String>);

impl PartialEq for Memo {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

fn default_true() -> bool {
    true
}

/// Top-level definition fields that change no key and stay out of the fingerprint.
pub const UNFINGERPRINTED: [&str; 2] = ["description", "retired"];

impl StrategyDef {
    pub fn strategy_ref(&self) -> StrategyRef {
        StrategyRef {
            name: self.name.clone(),
            version: self.version,
        }
    }

    /// The definition as JSON, as journaled.
    pub fn definition(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// SHA-256 (hex) of the RFC 8785 form of the key-relevant definition.
    pub fn fingerprint(&self) -> String {
        self.fingerprint
            .0
            .get_or_init(|| fingerprint_of(&self.definition()))
            .clone()
    }

    pub fn applies_to(&self, event_type: &str) -> bool {
        self.event_types
            .iter()
            .any(|p| super::pattern::matches(p, event_type))
    }

    /// Checks what serde cannot: names, kinds against fields, reasons.
    pub fn validate(&self) -> Result<(), String> {
        let here = self.strategy_ref();
        let fail = |m: String| Err(format!("strategy {here}: {m}"));
        if !valid_name(&self.name) {
            return fail("name must be non-empty [a-z0-9_.-]".into());
        }
        if self.version == 0 {
            return fail("version starts at 1".into());
        }
        if self.event_types.is_empty() || self.effect_type.trim().is_empty() {
            return fail("event_types and effect_type are required".into());
        }
        if self.kind.reads_fields() && !self.fields.iter().any(|f| !f.optional) {
            return fail(format!(
                "kind {} needs a required field",
                self.kind.as_str()
            ));
        }
        if !self.kind.reads_fields() && !self.fields.is_empty() {
            return fail(format!("kind {} reads no fields", self.kind.as_str()));
        }
        if matches!(self.kind, Kind::CanonicalFingerprint | Kind::RawHash)
            && self.strength != Strength::Weak
        {
            return fail("fingerprints and raw hashes are weak".into());
        }
        let mut names = BTreeSet::new();
        for n in self.fields.iter().chain(&self.discriminants) {
            if !names.insert(n.name.as_str()) {
                return fail(format!("field name `{}` used twice", n.name));
            }
        }
        for s in &self.scope {
            if s.value.is_some() == s.path.is_some() {
                return fail(format!(
                    "scope `{}` needs exactly one of value, path",
                    s.name
                ));
            }
        }
        if let Some(s) = self.sensitive.iter().find(|s| s.is_header()) {
            return fail(format!("sensitive `{s}` must be a body path"));
        }
        self.normalize.validate().or_else(fail)
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_.-".contains(c))
}

/// Fingerprint of a definition JSON (the unfingerprinted fields removed).
pub fn fingerprint_of(definition: &Value) -> String {
    let mut d = definition.clone();
    if let Value::Object(map) = &mut d {
        for k in UNFINGERPRINTED {
            map.remove(k);
        }
    }
    hex::encode(Sha256::digest(jcs::key_string(&d).as_bytes()))
}
