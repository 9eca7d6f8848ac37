//! Every combination of the enum inputs (98 304 of them), checked against the rules that
//! must hold whatever the precedence: these fail if a row is reordered unsafely.

use std::collections::HashMap;

use super::space::all_inputs;
use crate::domain::confidence::{Criticality, Strength};
use crate::domain::decision::{
    Action, Decision, DecisionInput, Existing, FailureKind, Horizon, Identity, LedgerEvidence,
    Reason, TransportMatch, decide,
};

/// Checks `rule` on every input; the message names the first input that breaks it.
fn for_all(rule: impl Fn(&DecisionInput, &Decision) -> bool) {
    let inputs = all_inputs();
    assert_eq!(inputs.len(), 8 * 4 * 6 * 4 * 2 * 2 * 2 * 2 * 2 * 2 * 2);
    for input in &inputs {
        let decision = decide(input);
        assert!(
            rule(input, &decision),
            "given {input:#?}\nthen {decision:#?}"
        );
    }
}

/// Anything the new delivery could duplicate: the key index's state, or the ledger's
/// evidence (found or purged) beyond the horizon.
fn something_exists(input: &DecisionInput) -> bool {
    input.existing != Existing::Nothing
        || matches!(
            input.horizon,
            Horizon::Passed {
                ledger: LedgerEvidence::Found { .. } | LedgerEvidence::Purged
            }
        )
}

fn failed_without_effect(input: &DecisionInput) -> bool {
    matches!(
        input.existing,
        Existing::Failed {
            failure: FailureKind::NoEffect,
            ..
        }
    )
}

fn keyed(input: &DecisionInput) -> bool {
    matches!(input.identity, Identity::Keyed { .. })
}

#[test]
fn invariant_1_never_ignore_when_discriminants_differ() {
    for_all(|input, d| input.differences.is_empty() || d.action != Action::Ignore);
}

#[test]
fn invariant_2_never_process_critical_when_something_exists_unless_failed_without_effect() {
    for_all(|input, d| {
        !(input.criticality == Criticality::Critical
            && something_exists(input)
            && d.action == Action::Process)
            || failed_without_effect(input)
    });
}

#[test]
fn invariant_3_never_ignore_when_breaker_tripped() {
    for_all(|input, d| !input.breaker_tripped || d.action != Action::Ignore);
}

#[test]
fn invariant_4_never_process_when_outcome_unknown_partial_or_purged() {
    for_all(|input, d| {
        let unknowable = matches!(input.existing, Existing::OutcomeUnknown { .. })
            || matches!(
                input.existing,
                Existing::Failed {
                    failure: FailureKind::PartialEffect,
                    ..
                }
            )
            || (input.existing == Existing::Nothing
                && input.horizon
                    == (Horizon::Passed {
                        ledger: LedgerEvidence::Purged,
                    }));
        !unknowable || !matches!(d.action, Action::Process | Action::Ignore)
    });
}

#[test]
fn invariant_5_no_identity_always_quarantine() {
    for_all(|input, d| keyed(input) || d.action == Action::Quarantine);
}

#[test]
fn invariant_6_every_ignore_carries_reference_delivery_and_effect() {
    for_all(|_, d| {
        d.action != Action::Ignore || (d.reference_delivery.is_some() && d.effect_id.is_some())
    });
}

#[test]
fn invariant_transport_collision_always_quarantines() {
    for_all(|input, d| {
        !matches!(input.transport, TransportMatch::DeliveryIdCollision { .. })
            || d.action == Action::Quarantine
    });
}

#[test]
fn invariant_transport_retry_or_raw_body_match_never_changes_the_verdict() {
    for_all(|input, d| {
        let first_seen = DecisionInput {
            transport: TransportMatch::FirstSeen,
            ..input.clone()
        };
        matches!(input.transport, TransportMatch::DeliveryIdCollision { .. })
            || *d == decide(&first_seen)
    });
}

#[test]
fn invariant_weak_key_never_ignores_on_critical_type() {
    for_all(|input, d| {
        input.identity
            != (Identity::Keyed {
                strength: Strength::Weak,
            })
            || input.criticality == Criticality::Reversible
            || d.action != Action::Ignore
    });
}

#[test]
fn invariant_defer_only_while_a_lease_is_alive() {
    for_all(|input, d| {
        d.action != Action::Defer || matches!(input.existing, Existing::LeaseAlive { .. })
    });
}

#[test]
fn invariant_lookup_first_exactly_on_reconcile_with_lookup_available() {
    // Except an operation made by hand: the provider's list does not know it.
    for_all(|input, d| {
        d.lookup_first
            == (d.action == Action::Reconcile
                && input.lookup_available
                && d.reason != Reason::MadeByHand
                && d.reason != Reason::LookAlikeKeyedOtherwise)
    });
}

#[test]
fn invariant_no_critical_look_alike_is_processed() {
    for_all(|input, d| {
        input.look_alike.is_none()
            || input.criticality != Criticality::Critical
            || d.action != Action::Process
    });
}

#[test]
fn invariant_nothing_made_by_hand_is_processed() {
    for_all(|input, d| !input.made_by_hand || d.action != Action::Process);
}

#[test]
fn invariant_flagged_only_when_processing_a_reversible_type() {
    for_all(|input, d| {
        !d.flagged_for_correction
            || (d.action == Action::Process && input.criticality == Criticality::Reversible)
    });
}

#[test]
fn invariant_summary_names_the_reference_delivery_and_effect() {
    for_all(|_, d| {
        let summary = d.summary();
        let named = |id: Option<uuid::Uuid>| id.is_none_or(|id| summary.contains(&id.to_string()));
        named(d.reference_delivery) && named(d.effect_id)
    });
}

#[test]
fn invariant_each_reason_always_comes_with_one_action_and_every_reason_is_reachable() {
    let mut seen: HashMap<Reason, Action> = HashMap::new();
    for input in all_inputs() {
        let decision = decide(&input);
        let first = *seen.entry(decision.reason).or_insert(decision.action);
        assert_eq!(
            first, decision.action,
            "{:?} given {input:#?}",
            decision.reason
        );
    }
    let unreached: Vec<Reason> = Reason::ALL
        .into_iter()
        .filter(|r| !seen.contains_key(r))
        .collect();
    assert!(unreached.is_empty(), "never decided: {unreached:?}");
}
