use std::collections::BTreeMap;

use chrono::DateTime;
use serde_json::{Value, json};
use uuid::Uuid;

use super::evidence::*;
use super::*;
use crate::domain::confidence::{Criticality, Strength};
use crate::domain::decision::{Existing, Horizon, LedgerEvidence};
use crate::domain::reservation::ReservationState;
use crate::store::entities::reservation;

fn key() -> KeySummary {
    KeySummary {
        key: "refund@2:aa".to_owned(),
        strategy: "refund@2".to_owned(),
        strength: Strength::Weak,
        effect_type: "refund".to_owned(),
        criticality: Criticality::Critical,
        horizon_secs: 3600,
        discriminants: BTreeMap::from([("amount".to_owned(), json!(700))]),
        missing_discriminants: Vec::new(),
        older_keys: vec!["refund@1:bb".to_owned()],
        older: BTreeMap::from([(
            "refund@1:bb".to_owned(),
            crate::domain::journal::OlderKey {
                discriminants: BTreeMap::from([("value".to_owned(), json!(700))]),
                missing_discriminants: Vec::new(),
            },
        )]),
        retired_keys: Vec::new(),
    }
}

fn reservation(key: &str, state: ReservationState, token: i64) -> reservation::Model {
    let at = DateTime::from_timestamp(1_800_000_000, 0).unwrap();
    reservation::Model {
        key: key.to_owned(),
        strategy: "refund@1".to_owned(),
        strength: "weak".to_owned(),
        effect_type: "refund".to_owned(),
        criticality: "critical".to_owned(),
        state: state.as_str().to_owned(),
        fencing_token: token,
        lease_until: Some(at),
        first_delivery_id: Uuid::now_v7().to_string(),
        effect_id: Uuid::now_v7().to_string(),
        discriminants: json!({ "value": 700 }),
        expires_at: at,
        updated_at: at,
    }
}

#[test]
fn a_new_key_is_claimed_itself_a_failed_one_again_with_the_next_token_else_a_key_of_its_own() {
    let key = key();
    let delivery = DeliveryId::from_uuid(Uuid::now_v7());
    // Given nothing under the key, when it is processed, then the key
    // itself is taken with the first token.
    let new = claim_for(Reason::NewKey, &KeyState::Nothing, &key, delivery);
    assert_eq!((new.key.as_str(), new.fencing_token), ("refund@2:aa", 1));
    // Given a reservation that failed without effect, when it is retried,
    // then its own key and effect are taken with the next token.
    let failed = reservation("refund@1:bb", ReservationState::Failed, 4);
    let state = KeyState::Reserved {
        through: Some(failed.key.clone()),
        row: failed.clone(),
    };
    let again = claim_for(
        Reason::PreviousAttemptFailedWithoutEffect,
        &state,
        &key,
        delivery,
    );
    assert_eq!(again.key, failed.key);
    assert_eq!(again.effect_id.to_string(), failed.effect_id);
    assert_eq!(again.fencing_token, 5);
    // Given a match processed under uncertainty, then a distinct effect
    // under a key derived for this delivery, never the matched one.
    let flagged = claim_for(Reason::WeakMatchReversibleFlagged, &state, &key, delivery);
    assert_eq!(flagged.key, format!("refund@2:aa~{delivery}"));
    assert_eq!(flagged.fencing_token, 1);
    assert_ne!(flagged.effect_id.to_string(), failed.effect_id);
}

#[test]
fn a_match_through_an_older_key_is_judged_on_that_versions_discriminants() {
    let key = key();
    let at = DateTime::from_timestamp(1_800_000_000, 0).unwrap();
    let applied = reservation("refund@1:bb", ReservationState::Applied, 1);
    let state = KeyState::Reserved {
        through: Some(applied.key.clone()),
        row: applied,
    };
    let evidence = evidence_of(&state, &key, at);
    assert!(matches!(evidence.existing, Existing::Applied { .. }));
    // Judged on `value` (version 1's field), which agrees: no difference,
    // though the current version names `amount`.
    assert!(
        evidence.differences.is_empty(),
        "{:?}",
        evidence.differences
    );
    assert_eq!(state.through(), Some("refund@1:bb"));
    // The same row under the current key is compared field by field.
    let state = KeyState::Reserved {
        through: None,
        row: reservation("refund@2:aa", ReservationState::Applied, 1),
    };
    let fields: Vec<String> = evidence_of(&state, &key, at)
        .differences
        .into_iter()
        .map(|d| d.field)
        .collect();
    assert_eq!(fields, ["amount", "value"]);
}

#[test]
fn a_reservation_whose_lease_ran_out_reads_as_an_unknown_outcome() {
    let key = key();
    let row = reservation("refund@2:aa", ReservationState::Reserved, 1);
    let until = row.lease_until.unwrap();
    let state = KeyState::Reserved { row, through: None };
    let before = evidence_of(&state, &key, until - chrono::Duration::seconds(1));
    assert!(matches!(before.existing, Existing::LeaseAlive { .. }));
    let after = evidence_of(&state, &key, until);
    assert!(matches!(after.existing, Existing::OutcomeUnknown { .. }));
}

#[test]
fn the_transport_layer_decides_only_a_seen_delivery_whose_key_is_unknown() {
    let nothing = Evidence {
        existing: Existing::Nothing,
        differences: Vec::new(),
        missing: Vec::new(),
        horizon: Horizon::Within,
    };
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
