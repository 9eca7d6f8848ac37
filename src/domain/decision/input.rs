//! What the decision is made from: everything the services found out before deciding.
//!
//! Each field answers one question of the matrix; none of them is a verdict on its own.
//! Serialised names end up in regression fixtures: never rename.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use crate::domain::confidence::{Criticality, Strength};

/// Everything [`super::decide`] needs, gathered by the services (key index, effects
/// ledger, strategy state, provider capabilities) before the call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecisionInput {
    /// Whether a key could be derived, and how strong it is.
    pub identity: Identity,
    /// What the transport layer (delivery-id header, raw-body hash) recognised.
    pub transport: TransportMatch,
    /// What the fast key index holds for the key.
    pub existing: Existing,
    /// Whether the key's horizon has passed, and what the effects ledger still proves.
    pub horizon: Horizon,
    /// Discriminating fields that differ from the existing delivery (or the ledger's
    /// record). Empty when they agree or when there is nothing to compare with.
    pub differences: Vec<FieldDifference>,
    /// Required or discriminating fields absent from this delivery (JSONPath or names).
    pub missing_fields: Vec<String>,
    /// What a wrong decision on this effect type would cost.
    pub criticality: Criticality,
    /// Whether an authoritative provider look-up exists for this event type.
    pub lookup_available: bool,
    /// Whether the strategy that produced the key is tripped by its collision breaker.
    pub breaker_tripped: bool,
    /// Whether a person recorded that an operation with this delivery's
    /// resource, amount and currency was made by hand (a missing effect
    /// closed `made_by_hand`). Absent from fixtures exported before
    /// 2026-12-07: false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub made_by_hand: bool,
    /// An effect of the same type on the same resource, whose discriminating
    /// fields agree, taken under the key of a strategy above this delivery's
    /// in its hierarchy, which a field this delivery lacks skipped: it may be
    /// this operation, sent with the field on another attempt (the keys of
    /// two strategies never meet). Absent from fixtures exported before
    /// 2026-12-07 (late): none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub look_alike: Option<LookAlike>,
}

/// An effect that may be the same operation under another strategy's key
/// (`DecisionInput::look_alike`). Both ids are absent when the journal's
/// tail was too long to search: nothing proves there is none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LookAlike {
    pub reference_delivery: Option<Uuid>,
    pub effect_id: Option<Uuid>,
}

/// The identity layer's answer for this delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Identity {
    /// A strategy produced a key of this strength.
    Keyed { strength: Strength },
    /// The body is not valid JSON (or not the declared content type).
    UnparseableBody,
    /// The body is JSON nested deeper than the documented limit.
    BodyTooDeep,
    /// The body is JSON with a member name twice in one object.
    DuplicateMemberNames,
    /// The provider sent an event type no configuration knows.
    UnknownEventType,
    /// The type is known but no strategy in its hierarchy found its fields.
    NoStrategy,
}

/// Transport-level evidence. A transport match is evidence, never a verdict: only a
/// delivery id reused with another body changes the decision (it is a collision).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TransportMatch {
    /// Neither the delivery id nor the raw body was seen before.
    FirstSeen,
    /// Same delivery-id header, same body apart from declared volatile fields.
    DeliveryIdRetry,
    /// Same raw-body hash: identical bytes, which two legitimate operations can share.
    RawBodyMatch,
    /// Delivery id already seen with a different body beyond the volatile fields.
    DeliveryIdCollision {
        first_delivery: Uuid,
        differences: Vec<FieldDifference>,
    },
}

/// What the key index holds for the key (within any strategy version still in horizon).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Existing {
    /// No reservation, result or failure for the key.
    Nothing,
    /// Another delivery holds the reservation and its lease is alive.
    LeaseAlive { reference_delivery: Uuid },
    /// The reservation's lease expired and nobody recorded how the effect ended.
    OutcomeUnknown { reference_delivery: Uuid },
    /// The effect was applied by the reference delivery.
    Applied {
        reference_delivery: Uuid,
        effect_id: Uuid,
    },
    /// The reference delivery's attempt ended in a definitive failure.
    Failed {
        reference_delivery: Uuid,
        failure: FailureKind,
    },
}

/// How a definitive failure ended. Only a failure proven to have had no effect lets a
/// later delivery process again; an attempt that might still be running is not a failure
/// but [`Existing::OutcomeUnknown`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// Refused or rolled back before anything irreversible happened.
    NoEffect,
    /// Failed after part of the effect was applied (some lines, some movements).
    PartialEffect,
}

/// Where the key stands against its horizon.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Horizon {
    /// Within the horizon: the key index's answer is complete.
    Within,
    /// Beyond it: the key index may have been purged; the effects ledger answers.
    Passed { ledger: LedgerEvidence },
}

/// What the effects ledger (durable identity of effects) says beyond the horizon.
/// Consulted only when the key index holds [`Existing::Nothing`]: the index's own
/// answer, when it still has one, is fresher.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LedgerEvidence {
    /// The ledger holds the effect: a late replay of something already applied.
    Found {
        reference_delivery: Uuid,
        effect_id: Uuid,
    },
    /// The ledger still covers the period and holds no such effect.
    Absent,
    /// The evidence needed to answer was purged by retention.
    Purged,
}

/// One discriminating field that disagrees, with both canonical values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FieldDifference {
    pub field: String,
    pub existing: Value,
    pub new: Value,
}
