//! One test per row of the matrix in DESIGN.md "The decision", plus its edges.

use super::support::{EFFECT, FIRST, amount_difference, given};
use crate::domain::decision::{Action, Identity, Reason};

#[test]
fn given_nothing_exists_and_required_fields_present_when_decided_then_process_new_key() {
    let decision = given().when_decided();
    assert_eq!(
        (decision.action, decision.reason),
        (Action::Process, Reason::NewKey)
    );
    assert_eq!(decision.reference_delivery, None);
    assert!(!decision.flagged_for_correction);
}

#[test]
fn given_weak_key_and_nothing_exists_when_decided_then_process_new_key() {
    let decision = given().weak_key().when_decided();
    assert_eq!(
        (decision.action, decision.reason),
        (Action::Process, Reason::NewKey)
    );
}

#[test]
fn given_critical_type_with_missing_fields_when_decided_then_reconcile_listing_them() {
    let decision = given()
        .missing("$.refund_id")
        .lookup_available()
        .when_decided();
    assert_eq!(
        (decision.action, decision.reason),
        (Action::Reconcile, Reason::RequiredFieldsMissing)
    );
    assert_eq!(decision.missing_fields, vec!["$.refund_id".to_owned()]);
    assert!(decision.lookup_first);
}

#[test]
fn given_reversible_type_with_missing_fields_when_decided_then_process_flagged() {
    let decision = given().reversible().missing("$.template").when_decided();
    assert_eq!(
        (decision.action, decision.reason),
        (Action::Process, Reason::RequiredFieldsMissingFlagged)
    );
    assert!(decision.flagged_for_correction);
}

#[test]
fn given_same_key_with_differing_discriminants_when_decided_then_quarantine_with_differences() {
    let decision = given().applied().discriminants_differ().when_decided();
    assert_eq!(
        (decision.action, decision.reason),
        (Action::Quarantine, Reason::DiscriminantsDiffer)
    );
    assert_eq!(decision.differences, vec![amount_difference()]);
    assert_eq!(decision.reference_delivery, Some(FIRST));
}

#[test]
fn given_strong_key_with_applied_result_and_agreeing_discriminants_when_decided_then_ignore_with_reference()
 {
    let decision = given().applied().when_decided();
    assert_eq!(
        (decision.action, decision.reason),
        (Action::Ignore, Reason::DuplicateOfApplied)
    );
    assert_eq!(decision.reference_delivery, Some(FIRST));
    assert_eq!(decision.effect_id, Some(EFFECT));
}

#[test]
fn given_strong_key_with_applied_result_on_reversible_type_when_decided_then_ignore() {
    let decision = given().reversible().applied().when_decided();
    assert_eq!(decision.action, Action::Ignore);
}

#[test]
fn given_weak_key_matching_on_critical_type_with_lookup_when_decided_then_reconcile_via_api() {
    let decision = given()
        .weak_key()
        .applied()
        .lookup_available()
        .when_decided();
    assert_eq!(
        (decision.action, decision.reason),
        (Action::Reconcile, Reason::WeakMatchCritical)
    );
    assert!(decision.lookup_first);
    assert_eq!(
        (decision.reference_delivery, decision.effect_id),
        (Some(FIRST), Some(EFFECT))
    );
}

#[test]
fn given_weak_key_matching_on_critical_type_without_lookup_when_decided_then_reconcile_by_human() {
    let decision = given().weak_key().applied().when_decided();
    assert_eq!(decision.action, Action::Reconcile);
    assert!(!decision.lookup_first);
    assert!(
        decision.summary().contains("human"),
        "{}",
        decision.summary()
    );
}

#[test]
fn given_weak_key_matching_on_reversible_type_when_decided_then_process_flagged_with_reference() {
    let decision = given().weak_key().reversible().applied().when_decided();
    assert_eq!(
        (decision.action, decision.reason),
        (Action::Process, Reason::WeakMatchReversibleFlagged)
    );
    assert!(decision.flagged_for_correction);
    assert_eq!(decision.reference_delivery, Some(FIRST));
}

#[test]
fn given_live_lease_when_decided_then_defer_naming_the_holder() {
    let decision = given().lease_alive().when_decided();
    assert_eq!(
        (decision.action, decision.reason),
        (Action::Defer, Reason::LeaseAlive)
    );
    assert_eq!(decision.reference_delivery, Some(FIRST));
}

#[test]
fn given_expired_lease_with_unknown_outcome_when_decided_then_reconcile_before_any_retry() {
    let decision = given().outcome_unknown().lookup_available().when_decided();
    assert_eq!(
        (decision.action, decision.reason),
        (Action::Reconcile, Reason::OutcomeUnknown)
    );
    assert_eq!(decision.reference_delivery, Some(FIRST));
    assert!(decision.lookup_first);
}

#[test]
fn given_tripped_breaker_and_strong_match_when_decided_then_reconcile_instead_of_ignore() {
    let decision = given().applied().breaker_tripped().when_decided();
    assert_eq!(
        (decision.action, decision.reason),
        (Action::Reconcile, Reason::BreakerTripped)
    );
    assert_eq!(
        (decision.reference_delivery, decision.effect_id),
        (Some(FIRST), Some(EFFECT))
    );
}

#[test]
fn given_tripped_breaker_and_new_key_when_decided_then_process_since_nothing_would_be_ignored() {
    let decision = given().breaker_tripped().when_decided();
    assert_eq!(
        (decision.action, decision.reason),
        (Action::Process, Reason::NewKey)
    );
}

#[test]
fn given_medium_key_match_on_reversible_type_when_decided_then_ignore_like_strong() {
    let decision = given().medium_key().reversible().applied().when_decided();
    assert_eq!(
        (decision.action, decision.reason),
        (Action::Ignore, Reason::DuplicateOfApplied)
    );
}

#[test]
fn given_medium_key_match_on_critical_type_when_decided_then_reconcile_like_weak() {
    let decision = given().medium_key().applied().when_decided();
    assert_eq!(
        (decision.action, decision.reason),
        (Action::Reconcile, Reason::MediumMatchCritical)
    );
}

#[test]
fn given_unparseable_body_when_decided_then_quarantine() {
    let decision = given().identity(Identity::UnparseableBody).when_decided();
    assert_eq!(
        (decision.action, decision.reason),
        (Action::Quarantine, Reason::UnparseableBody)
    );
}

#[test]
fn given_a_body_too_deep_when_decided_then_quarantine_with_its_own_reason() {
    let decision = given()
        .identity(Identity::BodyTooDeep)
        .applied()
        .when_decided();
    assert_eq!(
        (decision.action, decision.reason),
        (Action::Quarantine, Reason::BodyTooDeep)
    );
}

#[test]
fn given_duplicate_member_names_when_decided_then_quarantine_with_its_own_reason() {
    let decision = given()
        .identity(Identity::DuplicateMemberNames)
        .applied()
        .when_decided();
    assert_eq!(
        (decision.action, decision.reason),
        (Action::Quarantine, Reason::DuplicateMemberNames)
    );
}

#[test]
fn given_unknown_event_type_when_decided_then_quarantine() {
    let decision = given().identity(Identity::UnknownEventType).when_decided();
    assert_eq!(
        (decision.action, decision.reason),
        (Action::Quarantine, Reason::UnknownEventType)
    );
}

#[test]
fn given_no_strategy_applies_when_decided_then_quarantine() {
    let decision = given().identity(Identity::NoStrategy).when_decided();
    assert_eq!(
        (decision.action, decision.reason),
        (Action::Quarantine, Reason::NoStrategy)
    );
}

#[test]
fn given_an_operation_made_by_hand_with_these_fields_when_nothing_is_applied_then_a_person_decides()
{
    for given in [given(), given().lookup_available(), given().reversible()] {
        let decision = given.made_by_hand().when_decided();
        assert_eq!(
            (decision.action, decision.reason, decision.lookup_first),
            (Action::Reconcile, Reason::MadeByHand, false)
        );
    }
    let retried = given()
        .failed(crate::domain::decision::FailureKind::NoEffect)
        .made_by_hand()
        .when_decided();
    assert_eq!(
        (retried.action, retried.reason, retried.reference_delivery),
        (Action::Reconcile, Reason::MadeByHand, Some(FIRST))
    );
}

#[test]
fn given_an_operation_made_by_hand_when_a_weak_match_on_a_reversible_type_would_apply_it_then_a_person_decides()
 {
    let decision = given()
        .weak_key()
        .reversible()
        .applied()
        .made_by_hand()
        .when_decided();
    assert_eq!(
        (
            decision.action,
            decision.reason,
            decision.reference_delivery,
            decision.effect_id
        ),
        (
            Action::Reconcile,
            Reason::MadeByHand,
            Some(FIRST),
            Some(EFFECT)
        )
    );
    assert!(!decision.flagged_for_correction);
    let missing = given()
        .reversible()
        .missing("$.template")
        .made_by_hand()
        .when_decided();
    assert_eq!(missing.reason, Reason::MadeByHand);
}

#[test]
fn given_an_operation_made_by_hand_when_nothing_would_apply_it_then_the_matrix_decides_as_before() {
    let decision = given().applied().made_by_hand().when_decided();
    assert_eq!(
        (decision.action, decision.reason),
        (Action::Ignore, Reason::DuplicateOfApplied)
    );
    let decision = given().lease_alive().made_by_hand().when_decided();
    assert_eq!(decision.reason, Reason::LeaseAlive);
}

#[test]
fn given_a_look_alike_under_another_strategys_key_when_a_critical_effect_would_apply_then_a_person_decides()
 {
    for given in [given(), given().lookup_available(), given().weak_key()] {
        let decision = given.look_alike().when_decided();
        assert_eq!(
            (
                decision.action,
                decision.reason,
                decision.lookup_first,
                decision.reference_delivery,
                decision.effect_id
            ),
            (
                Action::Reconcile,
                Reason::LookAlikeKeyedOtherwise,
                false,
                Some(FIRST),
                Some(EFFECT)
            )
        );
    }
    // A reversible effect is applied as before; what would not be applied
    // is decided as before.
    let reversible = given().reversible().look_alike().when_decided();
    assert_eq!(reversible.action, Action::Process);
    let duplicate = given().applied().look_alike().when_decided();
    assert_eq!(duplicate.reason, Reason::DuplicateOfApplied);
}
