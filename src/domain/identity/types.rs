//! What goes into a derivation and what comes out: the identity engine's
//! working state. The journal keeps its own shape of the outcome
//! (`journal::DerivationProof`), so these may change freely as long as the
//! keys they produce do not (`tests/frozen_derivation`).

use super::key::IdentityKey;
use super::strategy::{Kind, StrategyRef};
use crate::domain::confidence::{Criticality, Strength};
use crate::domain::delivery::BodyParse;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// The id source of a transport key derived from the raw body's hash (no
/// delivery-id header).
pub(super) const RAW_BODY_SOURCE: &str = "raw_body_sha256";

/// One delivery as the identity engine sees it. Headers have lower-case
/// names; `body` is `None` unless `parse` is `Json`.
#[derive(Debug, Clone, Copy)]
pub struct DeliveryFacts<'a> {
    pub tenant: &'a str,
    pub source: &'a str,
    pub provider: &'a str,
    pub environment: &'a str,
    pub headers: &'a [(String, String)],
    pub parse: BodyParse,
    pub body: Option<&'a Value>,
    pub raw_body: &'a [u8],
}

/// The packet layer: delivery id when the provider sends one, else the
/// raw-body hash. Evidence, not a verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TransportIdentity {
    /// SHA-256 (hex) binding tenant, source, provider, environment and the id.
    pub key: String,
    /// `header:x-github-delivery`, or `raw_body_sha256` when no id was found.
    pub id_source: String,
    pub id: String,
    pub raw_body_sha256: String,
    /// SHA-256 of the canonical body without the provider's volatile fields:
    /// the same delivery id with another fingerprint is a collision, not a retry.
    pub body_fingerprint: Option<String>,
}

/// The business layer: the identity of the effect that must happen once.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BusinessIdentity {
    pub strategy: StrategyRef,
    pub kind: Kind,
    pub strength: Strength,
    pub key: IdentityKey,
    pub effect_type: String,
    pub criticality: Criticality,
    pub horizon_secs: u64,
    /// Scope additions bound into the key (sensitive values masked).
    pub scope: Value,
    /// Values that must agree when two deliveries share the key (sensitive
    /// ones as full `hmac:` digests, comparable but not readable).
    pub discriminants: BTreeMap<String, Value>,
    /// Declared discriminants absent from this delivery.
    pub missing_discriminants: Vec<String>,
    /// The canonical material the key was computed from, masked for humans.
    pub material: Value,
    /// Fingerprint of the strategy definition that produced the key.
    pub definition_fingerprint: String,
}

impl TransportIdentity {
    /// Whether the id is one the provider gave the event or delivery (a header,
    /// or a body field such as Stripe's `evt_` id), not the raw-body hash.
    pub fn is_provider_id(&self) -> bool {
        self.id_source != RAW_BODY_SOURCE
    }
}

/// A strategy tried before the one that keyed the delivery, and why it did not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    pub strategy: StrategyRef,
    pub reason: SkipReason,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "code", rename_all = "snake_case")]
pub enum SkipReason {
    /// A required field (or scope value) is absent or null.
    MissingField { field: String, path: String },
    /// A field (or scope value) holds a whole number too large for the
    /// exact digits to have been read (`jcs::holds_rounded_integer`).
    InexactNumber { field: String, path: String },
    /// A required field (or scope value) holds only blank text (`""`,
    /// spaces), or is an empty array or object: it tells no two operations
    /// apart, so two refunds both without a reference would share a key.
    BlankField { field: String, path: String },
    /// The strategy's event types do not cover this event type.
    NotApplicable { event_type: String },
}

/// Why no business identity could be derived. The delivery is kept and
/// quarantined, never dropped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "code", rename_all = "snake_case")]
pub enum Unresolved {
    /// Not UTF-8, not JSON, or JSON holding U+0000.
    Unparseable,
    /// JSON nested deeper than the body limit.
    BodyTooDeep {
        limit: usize,
    },
    /// JSON with a member name twice in one object.
    DuplicateMemberNames,
    UnknownProvider {
        provider: String,
    },
    /// No event type could be read (`missing` lists what was absent), or no
    /// hierarchy covers the one read.
    UnknownEventType {
        event_type: Option<String>,
        missing: Vec<String>,
    },
    NoStrategyApplies {
        event_type: String,
    },
}

impl Unresolved {
    /// Why a body that gave no document cannot be keyed.
    pub fn of_unparsed(parse: BodyParse) -> Self {
        match parse {
            BodyParse::TooDeep => Unresolved::BodyTooDeep {
                limit: crate::domain::strict_json::MAX_BODY_DEPTH,
            },
            BodyParse::DuplicateMemberNames => Unresolved::DuplicateMemberNames,
            BodyParse::Json | BodyParse::NotUtf8 | BodyParse::NotJson | BodyParse::NulCharacter => {
                Unresolved::Unparseable
            }
        }
    }

    /// Stable snake_case code, as stored and as answered by the API.
    pub fn code(&self) -> &'static str {
        match self {
            Unresolved::Unparseable => "unparseable",
            Unresolved::BodyTooDeep { .. } => "body_too_deep",
            Unresolved::DuplicateMemberNames => "duplicate_member_names",
            Unresolved::UnknownProvider { .. } => "unknown_provider",
            Unresolved::UnknownEventType { .. } => "unknown_event_type",
            Unresolved::NoStrategyApplies { .. } => "no_strategy_applies",
        }
    }
}

/// The derivation of one event: a whole delivery, or one item of a batch.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ItemDerivation {
    pub index: usize,
    /// The item itself, for a batch item: it is decided, stored and sent
    /// downstream on its own. Never serialised (the body is stored apart).
    #[serde(skip)]
    pub event: Option<Value>,
    pub event_type: Option<String>,
    pub business: Option<BusinessIdentity>,
    pub skipped: Vec<Skipped>,
    /// Keys of the chosen strategy's older, non-retired versions.
    pub older_versions: Vec<BusinessIdentity>,
    /// Keys of its retired versions (see `Catalog::retired`), then of the
    /// strong retired versions of the other strategies of its hierarchy.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub retired_versions: Vec<BusinessIdentity>,
    /// Other keys in force from the hierarchy: the older versions of the
    /// strategies above the chosen one, and every strong version of the
    /// strong strategies below it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub also_keyed: Vec<BusinessIdentity>,
    pub unresolved: Option<Unresolved>,
}

/// Everything the engine found about one delivery.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Derivation {
    pub provider: String,
    pub event_type: Option<String>,
    pub transport: TransportIdentity,
    pub business: Option<BusinessIdentity>,
    pub skipped: Vec<Skipped>,
    pub older_versions: Vec<BusinessIdentity>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub retired_versions: Vec<BusinessIdentity>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub also_keyed: Vec<BusinessIdentity>,
    pub unresolved: Option<Unresolved>,
    /// Batch deliveries only: one derivation per item, in delivery order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<ItemDerivation>,
}

impl Derivation {
    pub(super) fn empty(provider: &str, transport: TransportIdentity) -> Self {
        Self {
            provider: provider.to_owned(),
            event_type: None,
            transport,
            business: None,
            skipped: Vec::new(),
            older_versions: Vec::new(),
            retired_versions: Vec::new(),
            also_keyed: Vec::new(),
            unresolved: None,
            items: Vec::new(),
        }
    }

    pub(super) fn absorb(&mut self, item: ItemDerivation) {
        self.event_type = item.event_type;
        self.business = item.business;
        self.skipped = item.skipped;
        self.older_versions = item.older_versions;
        self.retired_versions = item.retired_versions;
        self.also_keyed = item.also_keyed;
        self.unresolved = item.unresolved;
    }
}
