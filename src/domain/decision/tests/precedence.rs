//! One test per precedence rule of the module docs, each combining rows that disagree.

use serde_json::json;

use super::support::{EFFECT, FIRST, amount_difference, given};
use crate::domain::decision::{
    Action, FailureKind, FieldDifference, Identity, LedgerEvidence, Reason, TransportMatch,
};

fn body_difference() -> FieldDifference {
    FieldDifference {
        field: "$.data.refund.id".to_owned(),
        existing: json!("re_1"),
        new: json!("re_2"),
    }
}

fn collision() -> TransportMatch {
    TransportMatch::DeliveryIdCollision {
        first_delivery: FIRST,
        differences: vec![body_difference()],
    }
}

#[test]
fn rule_1_given_unparseable_body_with_id_collision_and_unknown_outcome_when_decided_then_quarantine_unparseable()
 {
    let decision = given()
        .identity(Identity::UnparseableBody)
        .transport(collision())
        .outcome_unknown()
        .discriminants_differ()
        .when_decided();
    assert_eq!(
        (decision.action, decision.reason),
        (Action::Quarantine, Reason::UnparseableBody)
    );
}

#[test]
fn rule_2_given_id_collision_and_strong_applied_match_when_decided_then_quarantine_collision_not_ignore()
 {
    let decision = given().applied().transport(collision()).when_decided();
    assert_eq!(
        (decision.action, decision.reason),
        (Action::Quarantine, Reason::TransportIdCollision)
    );
    assert_eq!(decision.reference_delivery, Some(FIRST));
    assert_eq!(decision.differences, vec![body_difference()]);
}

#[test]
fn rule_2_given_id_collision_and_unknown_outcome_when_decided_then_quarantine_collision() {
    let decision = given()
        .outcome_unknown()
        .transport(collision())
        .when_decided();
    assert_eq!(decision.reason, Reason::TransportIdCollision);
}

#[test]
fn rule_3_given_live_lease_and_differing_discriminants_when_decided_then_quarantine_not_defer() {
    let decision = given().lease_alive().discriminants_differ().when_decided();
    assert_eq!(
        (decision.action, decision.reason),
        (Action::Quarantine, Reason::DiscriminantsDiffer)
    );
    assert_eq!(decision.reference_delivery, Some(FIRST));
}

#[test]
fn rule_3_given_unknown_outcome_and_differing_discriminants_when_decided_then_quarantine() {
    let decision = given()
        .outcome_unknown()
        .discriminants_differ()
        .when_decided();
    assert_eq!(decision.action, Action::Quarantine);
}

#[test]
fn rule_3_given_tripped_breaker_and_differing_discriminants_when_decided_then_quarantine() {
    let decision = given()
        .applied()
        .breaker_tripped()
        .discriminants_differ()
        .when_decided();
    assert_eq!(decision.reason, Reason::DiscriminantsDiffer);
}

#[test]
fn rule_3_given_ledger_record_with_differing_discriminants_when_decided_then_quarantine_with_ledger_reference()
 {
    let decision = given()
        .ledger_holds_effect()
        .discriminants_differ()
        .when_decided();
    assert_eq!(decision.action, Action::Quarantine);
    assert_eq!(
        (decision.reference_delivery, decision.effect_id),
        (Some(FIRST), Some(EFFECT))
    );
}

#[test]
fn rule_3_given_missing_fields_and_differing_discriminants_on_reversible_type_when_decided_then_quarantine()
 {
    let decision = given()
        .reversible()
        .applied()
        .missing("$.template")
        .discriminants_differ()
        .when_decided();
    assert_eq!(decision.differences, vec![amount_difference()]);
    assert_eq!(decision.action, Action::Quarantine);
}

#[test]
fn rule_4_given_unknown_outcome_and_missing_fields_on_reversible_type_when_decided_then_reconcile_not_process()
 {
    let decision = given()
        .reversible()
        .outcome_unknown()
        .missing("$.to")
        .when_decided();
    assert_eq!(
        (decision.action, decision.reason),
        (Action::Reconcile, Reason::OutcomeUnknown)
    );
}

#[test]
fn rule_4_given_evidence_purged_and_weak_key_on_reversible_type_when_decided_then_reconcile_not_process()
 {
    let decision = given()
        .weak_key()
        .reversible()
        .horizon_passed(LedgerEvidence::Purged)
        .when_decided();
    assert_eq!(decision.reason, Reason::EvidencePurged);
}

#[test]
fn rule_4_given_key_index_still_holds_result_beyond_horizon_when_decided_then_index_wins_over_purged_ledger()
 {
    let decision = given()
        .applied()
        .horizon_passed(LedgerEvidence::Purged)
        .when_decided();
    assert_eq!(
        (decision.action, decision.reason),
        (Action::Ignore, Reason::DuplicateOfApplied)
    );
}

#[test]
fn rule_5_given_live_lease_and_missing_fields_on_critical_type_when_decided_then_defer() {
    let decision = given().lease_alive().missing("$.refund_id").when_decided();
    assert_eq!(decision.action, Action::Defer);
}

#[test]
fn rule_5_given_live_lease_weak_key_and_tripped_breaker_when_decided_then_defer() {
    let decision = given()
        .weak_key()
        .lease_alive()
        .breaker_tripped()
        .when_decided();
    assert_eq!(decision.action, Action::Defer);
}

#[test]
fn rule_6_given_missing_fields_and_strong_applied_match_on_critical_type_when_decided_then_reconcile_not_ignore()
 {
    let decision = given().applied().missing("$.refund_id").when_decided();
    assert_eq!(
        (decision.action, decision.reason),
        (Action::Reconcile, Reason::RequiredFieldsMissing)
    );
    assert_eq!(decision.reference_delivery, Some(FIRST));
}

#[test]
fn rule_6_given_missing_fields_after_failure_without_effect_on_critical_type_when_decided_then_reconcile()
 {
    let decision = given()
        .failed(FailureKind::NoEffect)
        .missing("$.refund_id")
        .when_decided();
    assert_eq!(decision.reason, Reason::RequiredFieldsMissing);
}

#[test]
fn rule_8_given_failure_without_effect_weak_key_and_tripped_breaker_when_decided_then_process() {
    let decision = given()
        .weak_key()
        .failed(FailureKind::NoEffect)
        .breaker_tripped()
        .when_decided();
    assert_eq!(
        (decision.action, decision.reason),
        (Action::Process, Reason::PreviousAttemptFailedWithoutEffect)
    );
}

#[test]
fn rule_9_given_tripped_breaker_and_late_replay_found_in_ledger_when_decided_then_reconcile() {
    let decision = given()
        .ledger_holds_effect()
        .breaker_tripped()
        .when_decided();
    assert_eq!(
        (decision.action, decision.reason),
        (Action::Reconcile, Reason::BreakerTripped)
    );
}

#[test]
fn rule_9_given_tripped_breaker_and_weak_match_on_reversible_type_when_decided_then_still_process_flagged()
 {
    let decision = given()
        .weak_key()
        .reversible()
        .applied()
        .breaker_tripped()
        .when_decided();
    assert_eq!(decision.reason, Reason::WeakMatchReversibleFlagged);
}

#[test]
fn rule_9_given_tripped_breaker_and_medium_match_on_reversible_type_when_decided_then_reconcile() {
    let decision = given()
        .medium_key()
        .reversible()
        .applied()
        .breaker_tripped()
        .when_decided();
    assert_eq!(decision.reason, Reason::BreakerTripped);
}
