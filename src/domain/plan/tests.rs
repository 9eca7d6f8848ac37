use std::collections::BTreeMap;

use chrono::DateTime;
use serde_json::{Value, json};
use uuid::Uuid;

use super::*;
use crate::domain::confidence::Strength;
use crate::domain::decision::{FailureKind, LedgerEvidence};

fn key() -> KeySummary {
    KeySummary {
        key: "refund@2:aa".to_owned(),
        strategy: "refund@2".to_owned(),
        strength: Strength::Strong,
        effect_type: "refund".to_owned(),
        criticality: Criticality::Critical,
        horizon_secs: 3600,
        discriminants: BTreeMap::from([("amount".to_owned(), json!(700))]),
        missing_discriminants: Vec::new(),
        older_keys: Vec::new(),
        older: BTreeMap::new(),
        retired_keys: Vec::new(),
        held_as: None,
        lacking: None,
    }
}

fn at() -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000, 0).unwrap()
}

/// `key`'s decision planned on `evidence`, its effect going to `sink`.
fn planned(key: &KeySummary, evidence: Evidence, sink: &'static str) -> Plan {
    planned_tripped(key, evidence, sink, Vec::new())
}

/// `planned`, the strategies of `tripped_older` tripped by their breaker.
fn planned_tripped(
    key: &KeySummary,
    evidence: Evidence,
    sink: &'static str,
    tripped_older: Vec<String>,
) -> Plan {
    let given = Given {
        key,
        transport: TransportMatch::FirstSeen,
        route: Route {
            sink,
            lookup_available: false,
            breaker_tripped: false,
            tripped_older,
            lease: Duration::seconds(30),
            migrations_possible: false,
        },
        delivery_id: DeliveryId::from_uuid(Uuid::from_u128(7)),
        at: at(),
        new_effect: Uuid::from_u128(42),
    };
    keyed(&given, evidence)
}

fn failed(token: i64) -> Evidence {
    let effect_id = Uuid::from_u128(9);
    Evidence {
        existing: Existing::Failed {
            reference_delivery: Uuid::from_u128(1),
            failure: FailureKind::NoEffect,
        },
        reserved: Some(Claim {
            key: "refund@2:aa".to_owned(),
            effect_id,
            fencing_token: token,
            provider_ref: None,
        }),
        ..Evidence::nothing(&key())
    }
}

#[test]
fn given_a_new_key_when_planned_then_the_key_itself_is_taken_with_the_first_token_and_a_new_effect()
{
    let key = key();
    let plan = planned(&key, Evidence::nothing(&key), "webhook");
    assert_eq!(plan.made.decision.action, Action::Process);
    assert_eq!(plan.made.decision.reason, Reason::NewKey);
    let taken = plan.take.as_ref().expect("a process plan takes a key");
    assert_eq!(taken.reserved.key, "refund@2:aa");
    assert_eq!(taken.reserved.fencing_token, 1);
    assert_eq!(taken.reserved.effect_id, Uuid::from_u128(42));
    assert_eq!(plan.made.decision.effect_id, Some(Uuid::from_u128(42)));
    assert_eq!(taken.reserved.lease_until, at() + Duration::seconds(30));
    assert_eq!(taken.reserved.expires_at, at() + Duration::seconds(3600));
    // Sent after the commit: the plan names the job and applies nothing.
    assert!(taken.applied.is_none());
    let job = plan.job().expect("an effect to send");
    assert_eq!((job.key.as_str(), job.fencing_token), ("refund@2:aa", 1));
    assert_eq!(plan.made.layer, Layer::Business);
    assert_eq!(plan.made.business_key.as_deref(), Some("refund@2:aa"));
}

#[test]
fn given_a_record_sink_when_planned_then_the_effect_is_applied_with_the_claim_and_no_job_remains() {
    let key = key();
    let plan = planned(&key, Evidence::nothing(&key), RECORD_SINK);
    let taken = plan.take.as_ref().unwrap();
    let applied = taken.applied.as_ref().expect("applied with the claim");
    assert_eq!(applied.outcome, SettlementOutcome::Applied);
    assert_eq!(applied.result, Some(recorded()));
    assert!(plan.job().is_none());
}

#[test]
fn given_a_failure_without_effect_when_retried_then_its_own_key_and_effect_are_taken_with_the_next_token()
 {
    let key = key();
    let plan = planned(&key, failed(4), "webhook");
    assert_eq!(
        plan.made.decision.reason,
        Reason::PreviousAttemptFailedWithoutEffect
    );
    let taken = plan.take.unwrap();
    assert_eq!(taken.reserved.key, "refund@2:aa");
    assert_eq!(taken.reserved.effect_id, Uuid::from_u128(9));
    assert_eq!(taken.reserved.fencing_token, 5);
}

#[test]
fn given_an_applied_effect_when_planned_then_nothing_is_taken() {
    let key = key();
    let evidence = Evidence {
        existing: Existing::Applied {
            reference_delivery: Uuid::from_u128(1),
            effect_id: Uuid::from_u128(2),
        },
        matched_key: Some("refund@1:bb".to_owned()),
        ..Evidence::nothing(&key)
    };
    let plan = planned(&key, evidence, "webhook");
    assert_eq!(plan.made.decision.action, Action::Ignore);
    assert!(plan.take.is_none() && plan.job().is_none());
    assert_eq!(plan.made.matched_key.as_deref(), Some("refund@1:bb"));
}

/// `key` with an older version's key `refund@1:bb` of `strength` in force.
fn with_older(strength: Option<Strength>) -> KeySummary {
    let seen = crate::domain::journal::OlderKey {
        discriminants: BTreeMap::from([("amount".to_owned(), json!(700))]),
        missing_discriminants: Vec::new(),
        strength,
    };
    KeySummary {
        older_keys: vec!["refund@1:bb".to_owned()],
        older: BTreeMap::from([("refund@1:bb".to_owned(), seen)]),
        ..key()
    }
}

fn applied_through(key: &KeySummary, matched: &str) -> Evidence {
    Evidence {
        existing: Existing::Applied {
            reference_delivery: Uuid::from_u128(1),
            effect_id: Uuid::from_u128(2),
        },
        matched_key: Some(matched.to_owned()),
        ..Evidence::nothing(key)
    }
}

#[test]
fn given_a_match_through_an_older_medium_version_of_money_then_it_is_reconciled_not_ignored() {
    let key = with_older(Some(Strength::Medium));
    let plan = planned(&key, applied_through(&key, "refund@1:bb"), "webhook");
    assert_eq!(plan.made.decision.action, Action::Reconcile);
    assert_eq!(plan.made.decision.reason, Reason::MediumMatchCritical);
    // Through its own strong key, the same applied effect is ignored.
    let plan = planned(&key, applied_through(&key, "refund@2:aa"), "webhook");
    assert_eq!(plan.made.decision.action, Action::Ignore);
    // An older key journaled without its strength is judged as the delivery's.
    let key = with_older(None);
    let plan = planned(&key, applied_through(&key, "refund@1:bb"), "webhook");
    assert_eq!(plan.made.decision.action, Action::Ignore);
}

#[test]
fn given_a_match_through_an_older_version_whose_breaker_is_tripped_then_it_is_reconciled() {
    let key = with_older(Some(Strength::Strong));
    let tripped = vec!["refund@1".to_owned()];
    let plan = planned_tripped(
        &key,
        applied_through(&key, "refund@1:bb"),
        "webhook",
        tripped.clone(),
    );
    assert_eq!(plan.made.decision.action, Action::Reconcile);
    assert_eq!(plan.made.decision.reason, Reason::BreakerTripped);
    // The older version's breaker says nothing of a match through the
    // delivery's own key, which its own strategy's breaker judges.
    let own = applied_through(&key, "refund@2:aa");
    let plan = planned_tripped(&key, own.clone(), "webhook", tripped);
    assert_eq!(plan.made.decision.action, Action::Ignore);
    let given = Given {
        key: &key,
        transport: TransportMatch::FirstSeen,
        route: Route {
            sink: "webhook",
            lookup_available: false,
            breaker_tripped: true,
            tripped_older: Vec::new(),
            lease: Duration::seconds(30),
            migrations_possible: false,
        },
        delivery_id: DeliveryId::from_uuid(Uuid::from_u128(7)),
        at: at(),
        new_effect: Uuid::from_u128(42),
    };
    assert_eq!(
        keyed(&given, own).made.decision.reason,
        Reason::BreakerTripped
    );
    // Nor does a match through the older key escape the delivery's own.
    let older = applied_through(&key, "refund@1:bb");
    assert_eq!(
        keyed(&given, older).made.decision.reason,
        Reason::BreakerTripped
    );
}

#[test]
fn given_a_match_through_an_older_stronger_version_then_the_weaker_own_strength_judges_it() {
    // Version 2 was made medium after version 1 merged distinct refunds.
    let key = KeySummary {
        strength: Strength::Medium,
        ..with_older(Some(Strength::Strong))
    };
    let plan = planned(&key, applied_through(&key, "refund@1:bb"), "webhook");
    assert_eq!(plan.made.decision.reason, Reason::MediumMatchCritical);
}

#[test]
fn given_a_match_processed_under_uncertainty_then_a_distinct_effect_under_a_key_of_this_delivery() {
    // A weak, reversible match with differing discriminants is processed
    // and flagged: a key derived for this delivery, never the matched one.
    let mut key = key();
    key.strength = Strength::Weak;
    key.criticality = Criticality::Reversible;
    let evidence = Evidence {
        existing: Existing::Applied {
            reference_delivery: Uuid::from_u128(1),
            effect_id: Uuid::from_u128(2),
        },
        reserved: failed(1).reserved,
        ..Evidence::nothing(&key)
    };
    let plan = planned(&key, evidence, "webhook");
    assert_eq!(plan.made.decision.action, Action::Process);
    assert_eq!(
        plan.made.decision.reason,
        Reason::WeakMatchReversibleFlagged
    );
    let delivery = DeliveryId::from_uuid(Uuid::from_u128(7));
    let taken = plan.take.unwrap();
    assert_eq!(taken.reserved.key, format!("refund@2:aa~{delivery}"));
    assert_eq!(taken.reserved.fencing_token, 1);
    assert_eq!(taken.reserved.effect_id, Uuid::from_u128(42));
}

#[test]
fn the_transport_layer_decides_only_a_seen_delivery_whose_key_is_unknown() {
    let key = key();
    let nothing = Evidence::nothing(&key);
    assert_eq!(
        layer_of(&nothing, &TransportMatch::RawBodyMatch),
        Layer::Transport
    );
    assert_eq!(
        layer_of(&nothing, &TransportMatch::FirstSeen),
        Layer::Business
    );
    let past = Evidence {
        horizon: Horizon::Passed {
            ledger: LedgerEvidence::Purged,
        },
        ..nothing
    };
    assert_eq!(
        layer_of(&past, &TransportMatch::RawBodyMatch),
        Layer::Business
    );
}

#[test]
fn given_no_business_identity_then_the_delivery_is_held_on_the_transport_layer() {
    let plan = unkeyed(Identity::NoStrategy, TransportMatch::FirstSeen, None);
    assert_ne!(plan.made.decision.action, Action::Process);
    assert_eq!(plan.made.layer, Layer::Transport);
    assert!(plan.take.is_none());
}

#[test]
fn a_transport_id_seen_again_is_a_retry_when_its_body_agrees_else_a_collision() {
    let first = DeliveryId::from_uuid(Uuid::from_u128(3));
    assert_eq!(transport_match(None, "f1", true), TransportMatch::FirstSeen);
    assert_eq!(
        transport_match(Some((Some(first), "f1")), "f1", true),
        TransportMatch::DeliveryIdRetry
    );
    assert_eq!(
        transport_match(Some((Some(first), "f1")), "f1", false),
        TransportMatch::RawBodyMatch
    );
    let TransportMatch::DeliveryIdCollision {
        first_delivery,
        differences,
    } = transport_match(Some((Some(first), "f1")), "f2", true)
    else {
        panic!("a different body under a seen id is a collision");
    };
    assert_eq!(first_delivery, first.as_uuid());
    // Named, never shown: a fingerprint is an unkeyed digest of the body.
    assert_eq!(differences[0].field, "body (without volatile fields)");
    let shown = json!(differences).to_string();
    assert!(!shown.contains("f1") && !shown.contains("f2"), "{shown}");
}

#[test]
fn differences_name_each_disagreeing_field_and_treat_absence_as_null() {
    let existing = json!({ "amount": 1500, "currency": "EUR" });
    let new = BTreeMap::from([
        ("amount".to_owned(), json!(1500)),
        ("reference".to_owned(), json!("r2")),
    ]);
    let diffs = differences(&existing, &new);
    let fields: Vec<_> = diffs.iter().map(|d| d.field.as_str()).collect();
    assert_eq!(fields, ["currency", "reference"]);
    assert_eq!(diffs[0].new, Value::Null);
    assert!(
        differences(
            &existing,
            &BTreeMap::from([
                ("amount".to_owned(), json!(1500)),
                ("currency".to_owned(), json!("EUR")),
            ])
        )
        .is_empty()
    );
}

#[test]
fn derived_keys_name_their_delivery_and_lead_back_to_their_base() {
    let delivery = DeliveryId::from_uuid(Uuid::from_u128(5));
    let derived = derived_key("refund@2:aa", delivery);
    assert_eq!(base_key(&derived), "refund@2:aa");
    assert_eq!(base_key("refund@2:aa"), "refund@2:aa");
}

#[test]
fn the_fingerprints_an_earlier_collision_named_are_found_wherever_they_are_shown() {
    let (first, second) = ("a".repeat(64), "b".repeat(64));
    let recorded = json!({
        "summary": format!("came back with a different body ({first} → {second})"),
        "differences": [
            {"field": BODY_DIFFERENCE, "existing": first, "new": second},
            {"field": "amount", "existing": "c".repeat(64), "new": 5},
        ],
    });
    assert_eq!(journaled_fingerprints(&recorded), [first, second]);
    let named = json!({"differences": [{"field": BODY_DIFFERENCE, "existing": "as first received", "new": "different"}]});
    assert!(journaled_fingerprints(&named).is_empty());
}

#[test]
fn given_a_match_through_a_strong_strategy_below_then_its_strength_judges_not_the_weaker_own() {
    let seen = crate::domain::journal::OlderKey {
        discriminants: BTreeMap::from([("amount".to_owned(), json!(700))]),
        missing_discriminants: Vec::new(),
        strength: Some(Strength::Strong),
    };
    let key = KeySummary {
        strength: Strength::Weak,
        criticality: Criticality::Reversible,
        older_keys: vec!["event-id@1:cc".to_owned()],
        older: BTreeMap::from([("event-id@1:cc".to_owned(), seen)]),
        ..key()
    };
    let plan = planned(&key, applied_through(&key, "event-id@1:cc"), "webhook");
    assert_eq!(plan.made.decision.action, Action::Ignore);
}

#[test]
fn given_a_match_through_a_migrated_key_then_the_version_it_was_carried_to_judges_it() {
    // `refund@1` retired, its effect carried to `refund@3`'s key (medium),
    // found by a delivery keyed by `refund@4` (strong).
    let mut key = with_older(Some(Strength::Medium));
    key.older_keys = vec!["refund@3:cc".to_owned()];
    key.older = BTreeMap::from([(
        "refund@3:cc".to_owned(),
        key.older.remove("refund@1:bb").expect("the older key"),
    )]);
    let evidence = Evidence {
        judged_through: Some("refund@3:cc".to_owned()),
        ..applied_through(&key, "refund@1:bb")
    };
    let plan = planned(&key, evidence.clone(), "webhook");
    assert_eq!(plan.made.decision.reason, Reason::MediumMatchCritical);
    assert_eq!(plan.made.matched_key.as_deref(), Some("refund@1:bb"));
    // and by that version's breaker
    let key = with_older(Some(Strength::Strong));
    let mut strong = key.clone();
    strong.older_keys = vec!["refund@3:cc".to_owned()];
    strong.older = BTreeMap::from([("refund@3:cc".to_owned(), key.older["refund@1:bb"].clone())]);
    let plan = planned_tripped(&strong, evidence, "webhook", vec!["refund@3".to_owned()]);
    assert_eq!(plan.made.decision.reason, Reason::BreakerTripped);
}
