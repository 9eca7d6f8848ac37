//! The plain sentence: every decision the matrix can produce has one, that
//! says what was done and names the delivery and effect it rests on.

use std::collections::HashMap;

use super::space::all_inputs;
use crate::domain::decision::{Action, Part, Reason, decide};

fn text(parts: &[Part]) -> String {
    parts
        .iter()
        .map(|p| match p {
            Part::Text(t) => t.clone(),
            Part::Delivery(id) => format!("delivery {id}"),
            Part::Effect(id) => format!("effect {id}"),
        })
        .collect()
}

#[test]
fn every_decision_the_matrix_produces_reads_as_a_sentence_naming_its_proof() {
    let mut by_reason: HashMap<Reason, String> = HashMap::new();
    for input in all_inputs() {
        let decision = decide(&input);
        let parts = decision.plain();
        let sentence = text(&parts);
        let verb = match decision.action {
            Action::Process => "Processed",
            Action::Ignore => "Ignored: ",
            Action::Quarantine => "Quarantined: ",
            Action::Reconcile => "Held for reconciliation: ",
            Action::Defer => "Deferred: ",
        };
        assert!(sentence.starts_with(verb), "{sentence}");
        assert!(sentence.ends_with('.'), "{sentence}");
        assert!(!sentence.contains("{"), "{sentence}");
        if let Some(delivery) = decision.reference_delivery {
            assert!(
                parts.contains(&Part::Delivery(delivery)),
                "{:?} names {delivery}: {sentence}",
                decision.reason
            );
        }
        if let (Some(effect), Action::Ignore) = (decision.effect_id, decision.action) {
            assert!(parts.contains(&Part::Effect(effect)), "{sentence}");
        }
        for field in &decision.missing_fields {
            assert!(sentence.contains(field.as_str()), "{sentence}");
        }
        by_reason.entry(decision.reason).or_insert(sentence);
    }
    // Every reason is reached by the sweep, each with its own words.
    for reason in Reason::ALL {
        assert!(by_reason.contains_key(&reason), "{reason:?} never produced");
    }
    let mut sentences: Vec<&String> = by_reason.values().collect();
    sentences.sort();
    sentences.dedup();
    assert_eq!(sentences.len(), Reason::ALL.len());
}

#[test]
fn once_its_case_is_resolved_a_sentence_says_how_it_ended_instead_of_asking_a_person() {
    use crate::domain::cases::Resolution;
    let mut asked = 0;
    for input in all_inputs() {
        let decision = decide(&input);
        let before = text(&decision.plain());
        if !before.contains("a person") {
            continue;
        }
        asked += 1;
        let after = text(&decision.plain_then(Some(Resolution::ProcessAsDistinct)));
        assert!(!after.contains("a person"), "{after}");
        assert!(
            after.contains("its case was resolved: processed as a distinct operation."),
            "{after}"
        );
        assert!(after.ends_with('.'), "{after}");
    }
    assert!(asked > 0, "the sweep reaches decisions left to a person");
}
