//! A transport match is evidence, never a verdict; only a reused delivery id with another
//! body changes the decision.

use super::support::{FIRST, given};
use crate::domain::decision::{Action, Reason, TransportMatch};

#[test]
fn given_identical_bodies_of_two_critical_operations_under_weak_key_when_decided_then_reconcile_not_ignore()
 {
    let decision = given()
        .weak_key()
        .applied()
        .transport(TransportMatch::RawBodyMatch)
        .when_decided();
    assert_eq!(
        (decision.action, decision.reason),
        (Action::Reconcile, Reason::WeakMatchCritical)
    );
}

#[test]
fn given_delivery_id_retry_with_same_body_and_strong_applied_match_when_decided_then_ignore() {
    let decision = given()
        .applied()
        .transport(TransportMatch::DeliveryIdRetry)
        .when_decided();
    assert_eq!(
        (decision.action, decision.reason),
        (Action::Ignore, Reason::DuplicateOfApplied)
    );
}

#[test]
fn given_delivery_id_back_with_different_body_when_decided_then_quarantine_as_collision() {
    let decision = given()
        .transport(TransportMatch::DeliveryIdCollision {
            first_delivery: FIRST,
            differences: Vec::new(),
        })
        .when_decided();
    assert_eq!(
        (decision.action, decision.reason),
        (Action::Quarantine, Reason::TransportIdCollision)
    );
    assert_eq!(decision.reference_delivery, Some(FIRST));
}

#[test]
fn given_raw_body_match_but_nothing_at_business_layer_when_decided_then_process_new_key() {
    let decision = given()
        .transport(TransportMatch::RawBodyMatch)
        .when_decided();
    assert_eq!(
        (decision.action, decision.reason),
        (Action::Process, Reason::NewKey)
    );
}

#[test]
fn given_delivery_id_retry_under_weak_key_on_reversible_type_when_decided_then_still_process_flagged()
 {
    let decision = given()
        .weak_key()
        .reversible()
        .applied()
        .transport(TransportMatch::DeliveryIdRetry)
        .when_decided();
    assert_eq!(decision.reason, Reason::WeakMatchReversibleFlagged);
}
