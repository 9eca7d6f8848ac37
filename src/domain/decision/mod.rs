//! The decision matrix: for one delivery, process, ignore, quarantine, reconcile or defer.
//!
//! [`decide`] is pure: look-ups, ledger answers and strategy state come in through
//! [`DecisionInput`]; it reads no clock, makes no id and cannot fail. A transport match
//! (same delivery id, same raw body) is evidence, never a verdict: it changes nothing
//! unless the delivery id came back with another body.
//!
//! # Precedence
//! When several rows of the matrix apply, the first rule below wins.
//! 1. **No identity** → quarantine: `unparseable_body`, `body_too_deep`,
//!    `duplicate_member_names`, `unknown_event_type`, `no_strategy`. Without a key nothing else can be judged; nothing is dropped.
//! 2. **Delivery id reused with another body** → quarantine `transport_id_collision`,
//!    whatever the business layer says: the packet is not what its id claims.
//! 3. **Discriminating fields differ** (from the existing delivery or the ledger's record)
//!    → quarantine `discriminants_differ`, even with a live lease, an unknown outcome or
//!    a tripped breaker: the key collides, and settling the first attempt won't fix that.
//! 4. **Nobody can say whether the effect happened** → reconcile, never process:
//!    lease expired with unknown outcome (`outcome_unknown`), previous attempt failed
//!    after a partial effect (`previous_attempt_partially_applied`), beyond the horizon
//!    with the evidence purged (`evidence_purged`, an approval).
//! 5. **Lease alive** → defer `lease_alive`; re-decided once the first attempt settles.
//! 6. **Required or discriminating fields missing** → critical: reconcile
//!    `required_fields_missing`; reversible: process, flagged for correction
//!    (`required_fields_missing_flagged`). A match that cannot be checked is weak.
//! 7. **Nothing exists** (index empty; ledger within horizon or absent) → process `new_key`.
//! 8. **Previous attempt failed definitively without effect** → process again,
//!    `previous_attempt_failed_without_effect`, whatever the key's strength: there is no
//!    effect to duplicate.
//! 9. **An applied result matches** (key index, or effects ledger beyond the horizon):
//!    1. weak key, critical type → reconcile `weak_match_critical`;
//!    2. medium key, critical type → reconcile `medium_match_critical`;
//!    3. weak key, reversible type → process, flagged, `weak_match_reversible_flagged`;
//!    4. strong key, or medium on a reversible type → a would-be ignore: reconcile
//!       `breaker_tripped` if the strategy's breaker is tripped, else ignore
//!       `duplicate_of_applied` (`late_replay_found_effect` when found in the ledger).
//!
//! Last, whichever row processes the delivery (`new_key`, `previous_attempt_failed_without_effect`,
//! a flagged reversible match or missing field): when a person recorded an operation with its
//! resource, amount and currency as made by hand, it is held instead → reconcile
//! `made_by_hand`, for a person (this may be that operation's late webhook).
//!
//! Rules 4 and 5 are exclusive by construction (one [`Existing`] state; the ledger is
//! read only when the key index is empty). Every reconcile sets `lookup_first` when an
//! authoritative look-up exists, except `made_by_hand`: the provider's list does not know
//! what a person made by hand. Each reason always comes with the same action.

mod codes;
mod input;
mod outcome;
mod plain;
mod prior;
mod summary;
#[cfg(test)]
mod tests;

pub use codes::{Action, Reason};
pub use input::{
    DecisionInput, Existing, FailureKind, FieldDifference, Horizon, Identity, LedgerEvidence,
    LookAlike, TransportMatch,
};
pub use outcome::Decision;
pub use plain::Part;

use crate::domain::confidence::{Criticality, Strength};
use prior::{Applied, Prior, Settled, Unsettled};

/// Decides what happens to one delivery; see the module docs for the precedence.
pub fn decide(input: &DecisionInput) -> Decision {
    let decision = matrix(input);
    // Whichever row would apply it, a person made its operation by hand.
    if input.made_by_hand && decision.action == Action::Process {
        return Decision::reconcile(Reason::MadeByHand, false)
            .about(decision.reference_delivery, decision.effect_id);
    }
    // A critical effect that may have been applied under another
    // strategy's key: the provider's list cannot tell which effect stands
    // for which of its operations, a person can.
    if let Some(look_alike) = input.look_alike
        && input.criticality == Criticality::Critical
        && decision.action == Action::Process
    {
        return Decision::reconcile(Reason::LookAlikeKeyedOtherwise, false)
            .about(look_alike.reference_delivery, look_alike.effect_id);
    }
    decision
}

/// The matrix's rows, before an operation made by hand holds what they apply.
fn matrix(input: &DecisionInput) -> Decision {
    let strength = match input.identity {
        Identity::Keyed { strength } => strength,
        Identity::UnparseableBody => return Decision::quarantine(Reason::UnparseableBody),
        Identity::BodyTooDeep => return Decision::quarantine(Reason::BodyTooDeep),
        Identity::DuplicateMemberNames => {
            return Decision::quarantine(Reason::DuplicateMemberNames);
        }
        Identity::UnknownEventType => return Decision::quarantine(Reason::UnknownEventType),
        Identity::NoStrategy => return Decision::quarantine(Reason::NoStrategy),
    };
    if let TransportMatch::DeliveryIdCollision {
        first_delivery,
        differences,
    } = &input.transport
    {
        return Decision::quarantine(Reason::TransportIdCollision)
            .about(Some(*first_delivery), None)
            .showing(differences);
    }
    let prior = Prior::of(input.existing, input.horizon);
    let (reference, effect) = (prior.reference_delivery(), prior.effect_id());
    if !input.differences.is_empty() {
        return Decision::quarantine(Reason::DiscriminantsDiffer)
            .about(reference, effect)
            .showing(&input.differences);
    }
    let settled = match prior {
        Prior::Unsettled(unsettled) => return undecided(unsettled, input.lookup_available),
        Prior::Settled(settled) => settled,
    };
    if !input.missing_fields.is_empty() {
        let decision = match input.criticality {
            Criticality::Critical => {
                Decision::reconcile(Reason::RequiredFieldsMissing, input.lookup_available)
            }
            Criticality::Reversible => {
                Decision::process_flagged(Reason::RequiredFieldsMissingFlagged)
            }
        };
        return decision
            .about(reference, effect)
            .missing(&input.missing_fields);
    }
    match settled {
        Settled::Nothing => Decision::process(Reason::NewKey),
        Settled::FailedWithoutEffect(failed) => {
            Decision::process(Reason::PreviousAttemptFailedWithoutEffect).about(Some(failed), None)
        }
        Settled::Applied(applied) => matched(input, strength, &applied),
    }
}

/// Rules 4 and 5: the first attempt is not over, or its traces are gone.
fn undecided(unsettled: Unsettled, lookup_available: bool) -> Decision {
    match unsettled {
        Unsettled::LeaseAlive(holder) => Decision::defer(Reason::LeaseAlive, holder),
        Unsettled::OutcomeUnknown(holder) => {
            Decision::reconcile(Reason::OutcomeUnknown, lookup_available).about(Some(holder), None)
        }
        Unsettled::PartiallyApplied(failed) => {
            Decision::reconcile(Reason::PreviousAttemptPartiallyApplied, lookup_available)
                .about(Some(failed), None)
        }
        Unsettled::EvidencePurged => Decision::reconcile(Reason::EvidencePurged, lookup_available),
    }
}

/// Rule 9: an applied result matches and the discriminating fields agree.
fn matched(input: &DecisionInput, strength: Strength, applied: &Applied) -> Decision {
    let lookup = input.lookup_available;
    let (delivery, effect) = (applied.reference_delivery, applied.effect_id);
    let would_ignore = if applied.late {
        Reason::LateReplayFoundEffect
    } else {
        Reason::DuplicateOfApplied
    };
    let decision = match (strength, input.criticality) {
        (Strength::Weak, Criticality::Critical) => {
            Decision::reconcile(Reason::WeakMatchCritical, lookup)
        }
        (Strength::Medium, Criticality::Critical) => {
            Decision::reconcile(Reason::MediumMatchCritical, lookup)
        }
        (Strength::Weak, Criticality::Reversible) => {
            Decision::process_flagged(Reason::WeakMatchReversibleFlagged)
        }
        (Strength::Strong, _) | (Strength::Medium, Criticality::Reversible) => {
            if input.breaker_tripped {
                Decision::reconcile(Reason::BreakerTripped, lookup)
            } else {
                return Decision::ignore(would_ignore, delivery, effect);
            }
        }
    };
    decision.about(Some(delivery), Some(effect))
}
