//! Edges of the matrix: definitive failures and replays beyond the key's horizon.

use super::support::{EFFECT, FIRST, given};
use crate::domain::decision::{Action, FailureKind, LedgerEvidence, Reason};

#[test]
fn given_previous_attempt_failed_without_effect_when_decided_then_process_again_with_reference() {
    let decision = given().failed(FailureKind::NoEffect).when_decided();
    assert_eq!(
        (decision.action, decision.reason),
        (Action::Process, Reason::PreviousAttemptFailedWithoutEffect)
    );
    assert_eq!(decision.reference_delivery, Some(FIRST));
}

#[test]
fn given_previous_attempt_failed_after_partial_effect_when_decided_then_reconcile() {
    let decision = given()
        .reversible()
        .failed(FailureKind::PartialEffect)
        .when_decided();
    assert_eq!(
        (decision.action, decision.reason),
        (Action::Reconcile, Reason::PreviousAttemptPartiallyApplied)
    );
}

#[test]
fn given_horizon_passed_and_ledger_holds_effect_when_decided_then_ignore_as_late_replay() {
    let decision = given().ledger_holds_effect().when_decided();
    assert_eq!(
        (decision.action, decision.reason),
        (Action::Ignore, Reason::LateReplayFoundEffect)
    );
    assert_eq!(
        (decision.reference_delivery, decision.effect_id),
        (Some(FIRST), Some(EFFECT))
    );
}

#[test]
fn given_horizon_passed_and_evidence_purged_when_decided_then_reconcile_for_approval() {
    let decision = given()
        .reversible()
        .horizon_passed(LedgerEvidence::Purged)
        .when_decided();
    assert_eq!(
        (decision.action, decision.reason),
        (Action::Reconcile, Reason::EvidencePurged)
    );
}

#[test]
fn given_horizon_passed_and_ledger_has_no_such_effect_when_decided_then_process_new_key() {
    let decision = given()
        .horizon_passed(LedgerEvidence::Absent)
        .when_decided();
    assert_eq!(
        (decision.action, decision.reason),
        (Action::Process, Reason::NewKey)
    );
}

#[test]
fn given_weak_key_late_replay_on_critical_type_when_decided_then_reconcile_not_ignore() {
    let decision = given().weak_key().ledger_holds_effect().when_decided();
    assert_eq!(
        (decision.action, decision.reason),
        (Action::Reconcile, Reason::WeakMatchCritical)
    );
    assert_eq!(decision.reference_delivery, Some(FIRST));
}
