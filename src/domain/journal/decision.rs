//! Events of the decision: the identity derived for a delivery, then what was
//! decided and why.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::domain::confidence::{Criticality, Strength};
use uuid::Uuid;

use crate::domain::decision::{Action, Decision, FieldDifference, Reason};
use crate::domain::delivery::DeliveryId;

use super::derivation::DerivationProof;

/// The business identity, as much of it as later decisions need.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeySummary {
    /// Printable full key, `name@version:hex`.
    pub key: String,
    /// `name@version`.
    pub strategy: String,
    pub strength: Strength,
    pub effect_type: String,
    pub criticality: Criticality,
    pub horizon_secs: u64,
    pub discriminants: BTreeMap<String, serde_json::Value>,
    pub missing_discriminants: Vec<String>,
    /// Other keys in force for the delivery, searched after its own: those of
    /// older, non-retired versions of the same strategy (newest first), then
    /// (since 2026-12-07) of the older versions of the strategies above it in
    /// its hierarchy, then of the strong strategies below it (a strategy
    /// added above one, or a version that no longer keys the delivery, never
    /// turns a retry of what was keyed before into a second effect).
    pub older_keys: Vec<String>,
    /// The delivery as the version behind each of `older_keys` sees it: a
    /// match through that key is judged on these. Absent from events
    /// journaled before 2026-12-01.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub older: BTreeMap<String, OlderKey>,
    /// Keys of retired versions (the strategy's own, and since 2026-12-07
    /// the strong ones of the other strategies of its hierarchy): they open
    /// the search for the effects a migration carried over to a key in
    /// force, and are searched in the ledger for those it could not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retired_keys: Vec<String>,
    /// The delivery's resource, amount and currency as its provider's
    /// listing reads them, sealed under the key secret
    /// (`domain::reconcile::hand_made_seal`): what an operation a person
    /// made by hand is recognised by. Only for effect types a listing
    /// compares. Never journaled: sealed from the body when the delivery
    /// arrives and when it is decided again.
    #[serde(skip)]
    pub held_as: Option<String>,
    /// A critical delivery keyed below a strategy of its hierarchy that a
    /// field it lacks skipped: what an effect taken under that strategy's
    /// key for the same operation is looked for by (`Lacking`). Absent
    /// otherwise, and from events journaled before 2026-12-07 (late).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lacking: Option<Lacking>,
}

/// What a delivery that lacks a field a strategy above its own requires
/// is compared by with the effects that strategy's keys took: a refund
/// whose reference came on another attempt was keyed by payment +
/// reference there and by its fingerprint here, and the two keys never
/// meet. Compared: the effect type, the resource, the discriminating
/// fields the two name alike.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lacking {
    /// The names of the strategies above that a missing or blank field
    /// skipped.
    pub strategies: Vec<String>,
    /// The delivery's resource, as the read model keeps it
    /// (`KeyDerived::resource`).
    pub resource: String,
}

impl KeySummary {
    /// The keys a decision on this key reads, in the order it reads them:
    /// its own, then `older_keys`.
    pub fn in_force(&self) -> Vec<String> {
        std::iter::once(&self.key)
            .chain(&self.older_keys)
            .cloned()
            .collect()
    }
}

/// What an older strategy version discriminates on, for one delivery.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OlderKey {
    pub discriminants: BTreeMap<String, serde_json::Value>,
    pub missing_discriminants: Vec<String>,
    /// The strength of the version behind the key: a match through it is
    /// judged as that version would judge it. Absent from events journaled
    /// before 2026-12-07: the delivery's own key's strength.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strength: Option<Strength>,
}

/// The identity engine's answer for one delivery.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyDerived {
    pub event_type: Option<String>,
    pub transport_key: String,
    /// The provider's own event or delivery id when the transport identity came
    /// from one (a header, or a body field such as Stripe's `evt_` id).
    pub provider_event_id: Option<String>,
    pub body_fingerprint: Option<String>,
    pub business: Option<KeySummary>,
    /// Stable code when no business identity could be derived.
    pub unresolved: Option<String>,
    /// How the key was derived: the chosen strategy's kind, fingerprint,
    /// scope and masked named fields, the strategies skipped and why, or why
    /// no key could be derived (version 1: the live derivation, whole).
    pub derivation: Box<DerivationProof>,
    /// A batch of several events: the delivery each item became, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<DeliveryId>,
    /// The resource the delivery is about (a payment id), as search finds
    /// it: `hmac:…` when sensitive. Never part of any key. Absent from
    /// events journaled before 2026-12-02.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
}

/// Which identity layer the decision rests on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    Transport,
    Business,
}

impl Layer {
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Transport => "transport",
            Layer::Business => "business",
        }
    }
}

/// What was decided for a delivery, with the reasoning. A deferred delivery
/// gets a second `DecisionMade` (with `redecided`) once the key settles.
///
/// Stored as `StoredDecisionMade`, a shape of the journal's own: the domain's
/// `Decision` may change without changing what is journaled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "StoredDecisionMade", from = "StoredDecisionMade")]
pub struct DecisionMade {
    pub decision: Decision,
    pub layer: Layer,
    pub business_key: Option<String>,
    /// The older strategy version whose key matched, when it was not the current one.
    pub matched_key: Option<String>,
    pub case_id: Option<uuid::Uuid>,
    pub first_delivery_id: Option<DeliveryId>,
    pub summary: String,
    pub redecided: bool,
}

impl DecisionMade {
    /// A decision as journaled, its summary naming the older strategy version
    /// a match was made through, with a new case when its action opens one
    /// (`Action::opens_case`: the one rule, for ingest and re-decision
    /// alike). First delivery and re-decision are set by the caller.
    pub fn new(
        decision: Decision,
        layer: Layer,
        business_key: Option<String>,
        matched_key: Option<String>,
    ) -> Self {
        let mut summary = decision.summary();
        if let Some(strategy) = matched_key.as_deref().and_then(strategy_of_key) {
            summary.push_str(&format!(" (matched through the key of {strategy})"));
        }
        Self {
            summary,
            case_id: decision.action.opens_case().then(Uuid::now_v7),
            layer,
            business_key,
            matched_key,
            first_delivery_id: None,
            redecided: false,
            decision,
        }
    }

    /// `name@version` of the strategy whose key matched, when it was not the
    /// delivery's own (an older version, or a strategy lower in its hierarchy).
    pub fn matched_strategy(&self) -> Option<&str> {
        self.matched_key.as_deref().and_then(strategy_of_key)
    }
}

/// `DecisionMade` as journaled (version 1): the decision's fields at the top
/// level, then how it was reached. Action and reason are the stable codes of
/// `decision::codes`.
#[derive(Serialize, Deserialize)]
struct StoredDecisionMade {
    action: Action,
    reason: Reason,
    reference_delivery: Option<Uuid>,
    effect_id: Option<Uuid>,
    differences: Vec<StoredDifference>,
    missing_fields: Vec<String>,
    flagged_for_correction: bool,
    lookup_first: bool,
    layer: Layer,
    business_key: Option<String>,
    matched_key: Option<String>,
    case_id: Option<Uuid>,
    first_delivery_id: Option<DeliveryId>,
    summary: String,
    redecided: bool,
}

/// One discriminating field that disagreed, with both canonical values.
#[derive(Serialize, Deserialize)]
struct StoredDifference {
    field: String,
    existing: serde_json::Value,
    new: serde_json::Value,
}

impl From<DecisionMade> for StoredDecisionMade {
    fn from(made: DecisionMade) -> Self {
        let d = made.decision;
        Self {
            action: d.action,
            reason: d.reason,
            reference_delivery: d.reference_delivery,
            effect_id: d.effect_id,
            differences: d
                .differences
                .into_iter()
                .map(|f| StoredDifference {
                    field: f.field,
                    existing: f.existing,
                    new: f.new,
                })
                .collect(),
            missing_fields: d.missing_fields,
            flagged_for_correction: d.flagged_for_correction,
            lookup_first: d.lookup_first,
            layer: made.layer,
            business_key: made.business_key,
            matched_key: made.matched_key,
            case_id: made.case_id,
            first_delivery_id: made.first_delivery_id,
            summary: made.summary,
            redecided: made.redecided,
        }
    }
}

impl From<StoredDecisionMade> for DecisionMade {
    fn from(s: StoredDecisionMade) -> Self {
        Self {
            decision: Decision {
                action: s.action,
                reason: s.reason,
                reference_delivery: s.reference_delivery,
                effect_id: s.effect_id,
                differences: s
                    .differences
                    .into_iter()
                    .map(|f| FieldDifference {
                        field: f.field,
                        existing: f.existing,
                        new: f.new,
                    })
                    .collect(),
                missing_fields: s.missing_fields,
                flagged_for_correction: s.flagged_for_correction,
                lookup_first: s.lookup_first,
            },
            layer: s.layer,
            business_key: s.business_key,
            matched_key: s.matched_key,
            case_id: s.case_id,
            first_delivery_id: s.first_delivery_id,
            summary: s.summary,
            redecided: s.redecided,
        }
    }
}

/// The `name@version` part of a stored key (`name@version:hex`).
fn strategy_of_key(key: &str) -> Option<&str> {
    key.split_once(':').map(|(strategy, _)| strategy)
}
