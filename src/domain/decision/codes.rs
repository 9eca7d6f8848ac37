//! The stable codes a decision is stored, counted and searched by.
//!
//! `as_str()` and the serde name of every variant are the same string, and both are
//! stored in the journal and in fixtures: never rename a variant, add a new one.

use serde::{Deserialize, Serialize};

/// What happens to the delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Reserve the key atomically, then apply the effect.
    Process,
    /// Link to the first delivery and return its result; the effect is not repeated.
    Ignore,
    /// Keep the delivery aside (a collision or no identity); nothing is dropped.
    Quarantine,
    /// Verify with the provider's API, else a human, before any effect.
    Reconcile,
    /// Keep it; decide again when the reservation in progress settles.
    Defer,
}

impl Action {
    pub const ALL: [Action; 5] = [
        Action::Process,
        Action::Ignore,
        Action::Quarantine,
        Action::Reconcile,
        Action::Defer,
    ];

    /// Whether a delivery decided so opens a case: what is held aside or
    /// waits for the provider or a person is in the queue, every time.
    pub fn opens_case(self) -> bool {
        matches!(self, Action::Quarantine | Action::Reconcile)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Action::Process => "process",
            Action::Ignore => "ignore",
            Action::Quarantine => "quarantine",
            Action::Reconcile => "reconcile",
            Action::Defer => "defer",
        }
    }
}

/// Why: which row of the matrix decided. Each reason always comes with the same action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// Nothing exists for the key (nor in the ledger beyond the horizon).
    NewKey,
    /// Strong key (or medium on a reversible type) matches an applied result.
    DuplicateOfApplied,
    /// Beyond the horizon, the effects ledger still holds the applied effect.
    LateReplayFoundEffect,
    /// Same key, a discriminating field differs: a collision.
    DiscriminantsDiffer,
    /// A delivery id came back with a different body.
    TransportIdCollision,
    /// Weak key matches on a critical type: two legitimate operations can look alike.
    WeakMatchCritical,
    /// Weak key matches on a reversible type: processed, flagged for correction.
    WeakMatchReversibleFlagged,
    /// Medium key matches on a critical type: treated like a weak one.
    MediumMatchCritical,
    /// Another delivery holds a live reservation for the key.
    LeaseAlive,
    /// A reservation expired with an unknown outcome: never re-run blindly.
    OutcomeUnknown,
    /// Would have been ignored, but the strategy's collision breaker is tripped.
    BreakerTripped,
    /// Beyond the horizon and the evidence was purged: approval needed.
    EvidencePurged,
    /// Required or discriminating fields missing on a critical type.
    RequiredFieldsMissing,
    /// Required or discriminating fields missing on a reversible type: processed, flagged.
    RequiredFieldsMissingFlagged,
    /// The previous attempt failed definitively and is known to have had no effect.
    PreviousAttemptFailedWithoutEffect,
    /// The previous attempt failed after a partial effect.
    PreviousAttemptPartiallyApplied,
    UnparseableBody,
    UnknownEventType,
    NoStrategy,
    /// JSON nested deeper than the body limit: journaled raw, never keyed.
    BodyTooDeep,
    /// JSON with a member name twice in one object (RFC 7493): journaled raw,
    /// never keyed, since parsers disagree on which value counts.
    DuplicateMemberNames,
    /// Nothing was applied under the key, but a person recorded that an
    /// operation with the same resource, amount and currency was made by
    /// hand (a missing effect closed `made_by_hand`): this may be its late
    /// webhook, and applying it could pay twice.
    MadeByHand,
    /// Nothing was applied under the key, but an effect of the same type on
    /// the same resource, whose discriminating fields agree, was taken under
    /// the key of a strategy above, which a field this delivery lacks
    /// skipped (a reference sent on one attempt and not on another).
    LookAlikeKeyedOtherwise,
}

impl Reason {
    pub const ALL: [Reason; 23] = [
        Reason::NewKey,
        Reason::DuplicateOfApplied,
        Reason::LateReplayFoundEffect,
        Reason::DiscriminantsDiffer,
        Reason::TransportIdCollision,
        Reason::WeakMatchCritical,
        Reason::WeakMatchReversibleFlagged,
        Reason::MediumMatchCritical,
        Reason::LeaseAlive,
        Reason::OutcomeUnknown,
        Reason::BreakerTripped,
        Reason::EvidencePurged,
        Reason::RequiredFieldsMissing,
        Reason::RequiredFieldsMissingFlagged,
        Reason::PreviousAttemptFailedWithoutEffect,
        Reason::PreviousAttemptPartiallyApplied,
        Reason::UnparseableBody,
        Reason::UnknownEventType,
        Reason::NoStrategy,
        Reason::BodyTooDeep,
        Reason::DuplicateMemberNames,
        Reason::MadeByHand,
        Reason::LookAlikeKeyedOtherwise,
    ];

    /// Reasons the provider's list of operations can settle: a look-alike
    /// of an applied effect, or a late replay whose evidence was purged.
    pub const SETTLED_BY_THE_PROVIDER: [Reason; 3] = [
        Reason::WeakMatchCritical,
        Reason::MediumMatchCritical,
        Reason::EvidencePurged,
    ];

    /// Whether asking settles a case of this reason: the provider's list of
    /// operations, or the downstream's status URL for an unknown outcome.
    /// A case of any other reason waits for a person, never for a look-up.
    pub fn settled_by_asking(self) -> bool {
        self == Reason::OutcomeUnknown || Self::SETTLED_BY_THE_PROVIDER.contains(&self)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::NewKey => "new_key",
            Reason::DuplicateOfApplied => "duplicate_of_applied",
            Reason::LateReplayFoundEffect => "late_replay_found_effect",
            Reason::DiscriminantsDiffer => "discriminants_differ",
            Reason::TransportIdCollision => "transport_id_collision",
            Reason::WeakMatchCritical => "weak_match_critical",
            Reason::WeakMatchReversibleFlagged => "weak_match_reversible_flagged",
            Reason::MediumMatchCritical => "medium_match_critical",
            Reason::LeaseAlive => "lease_alive",
            Reason::OutcomeUnknown => "outcome_unknown",
            Reason::BreakerTripped => "breaker_tripped",
            Reason::EvidencePurged => "evidence_purged",
            Reason::RequiredFieldsMissing => "required_fields_missing",
            Reason::RequiredFieldsMissingFlagged => "required_fields_missing_flagged",
            Reason::PreviousAttemptFailedWithoutEffect => "previous_attempt_failed_without_effect",
            Reason::PreviousAttemptPartiallyApplied => "previous_attempt_partially_applied",
            Reason::UnparseableBody => "unparseable_body",
            Reason::UnknownEventType => "unknown_event_type",
            Reason::NoStrategy => "no_strategy",
            Reason::BodyTooDeep => "body_too_deep",
            Reason::DuplicateMemberNames => "duplicate_member_names",
            Reason::MadeByHand => "made_by_hand",
            Reason::LookAlikeKeyedOtherwise => "look_alike_keyed_otherwise",
        }
    }
}
