//! Stored codes and the support sentence.

use std::collections::HashSet;

use serde_json::{Value, json};

use super::support::{EFFECT, FIRST, given};
use crate::domain::decision::{Action, DecisionInput, Reason, decide};
use crate::domain::journal::{DecisionMade, Layer};

#[test]
fn given_every_action_when_serialised_then_its_name_is_as_str() {
    for action in Action::ALL {
        assert_eq!(
            serde_json::to_value(action).expect("serialise"),
            json!(action.as_str())
        );
    }
}

#[test]
fn given_every_action_then_only_what_is_held_aside_or_waits_for_someone_opens_a_case() {
    let opening: Vec<Action> = Action::ALL.into_iter().filter(|a| a.opens_case()).collect();
    assert_eq!(opening, vec![Action::Quarantine, Action::Reconcile]);
}

#[test]
fn given_every_reason_when_serialised_then_its_name_is_a_distinct_as_str() {
    let mut names = HashSet::new();
    for reason in Reason::ALL {
        assert_eq!(
            serde_json::to_value(reason).expect("serialise"),
            json!(reason.as_str())
        );
        assert!(
            names.insert(reason.as_str()),
            "duplicate code {}",
            reason.as_str()
        );
    }
}

#[test]
fn given_a_decision_when_journaled_and_read_back_then_it_is_unchanged_with_snake_case_codes() {
    let decision = given().applied().when_decided();
    let made = DecisionMade::new(decision, Layer::Business, None, None);
    let stored: Value = serde_json::to_value(&made).expect("serialise");
    assert_eq!(stored["action"], json!("ignore"));
    assert_eq!(stored["reason"], json!("duplicate_of_applied"));
    let read: DecisionMade = serde_json::from_value(stored).expect("deserialise");
    assert_eq!(read, made);
}

#[test]
fn given_an_ignored_duplicate_when_summarised_then_it_names_first_delivery_and_effect() {
    let summary = given().applied().when_decided().summary();
    assert_eq!(
        summary,
        format!("Ignored: same effect as delivery {FIRST}, already applied as effect {EFFECT}.")
    );
}

#[test]
fn given_a_collision_when_summarised_then_it_shows_each_difference() {
    let summary = given()
        .applied()
        .discriminants_differ()
        .when_decided()
        .summary();
    assert!(summary.starts_with("Quarantined: "), "{summary}");
    assert!(summary.contains("$.amount: 1000 → 1200"), "{summary}");
}

#[test]
fn given_a_reconciliation_with_lookup_when_summarised_then_it_says_to_ask_the_provider() {
    let summary = given()
        .weak_key()
        .applied()
        .lookup_available()
        .when_decided()
        .summary();
    assert!(summary.contains("provider's API"), "{summary}");
}

#[test]
fn given_an_input_when_stored_as_a_fixture_and_read_back_then_it_decides_the_same() {
    let input = given()
        .weak_key()
        .ledger_holds_effect()
        .missing("$.refund_id")
        .lookup_available()
        .0;
    let stored: Value = serde_json::to_value(&input).expect("serialise");
    assert_eq!(
        stored["identity"],
        json!({"kind": "keyed", "strength": "weak"})
    );
    assert_eq!(stored["horizon"]["ledger"]["kind"], json!("found"));
    let read: DecisionInput = serde_json::from_value(stored).expect("deserialise");
    assert_eq!(read, input);
    assert_eq!(decide(&read), decide(&input));
}
