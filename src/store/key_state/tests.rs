use std::collections::BTreeMap;

use chrono::DateTime;
use serde_json::json;

use super::*;
use crate::domain::confidence::{Criticality, Strength};

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
                strength: None,
            },
        )]),
        retired_keys: Vec::new(),
        held_as: None,
        lacking: None,
    }
}

fn reservation(key: &str, state: ReservationState, token: i64) -> effect::Model {
    let at = DateTime::from_timestamp(1_800_000_000, 0).unwrap();
    effect::Model {
        effect_id: Uuid::now_v7().to_string(),
        key: key.to_owned(),
        effect_type: "refund".to_owned(),
        criticality: "critical".to_owned(),
        state: state.as_str().to_owned(),
        fencing_token: Some(token),
        lease_until: Some(at),
        expires_at: Some(at),
        key_purged: false,
        sink: "record".to_owned(),
        result: None,
        downstream_ref: None,
        provider_ref: None,
        first_delivery_id: Uuid::now_v7().to_string(),
        discriminants: json!({ "value": 700 }),
        created_at: at,
        settled_at: None,
        evidence_purged_at: None,
    }
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
    let evidence = state.evidence(&key, at);
    assert!(matches!(evidence.existing, Existing::Applied { .. }));
    // Judged on `value` (version 1's field), which agrees: no difference,
    // though the current version names `amount`.
    assert!(
        evidence.differences.is_empty(),
        "{:?}",
        evidence.differences
    );
    assert_eq!(evidence.matched_key.as_deref(), Some("refund@1:bb"));
    // The same row under the current key is compared field by field.
    let state = KeyState::Reserved {
        through: None,
        row: reservation("refund@2:aa", ReservationState::Applied, 1),
    };
    let evidence = state.evidence(&key, at);
    let fields: Vec<String> = evidence.differences.into_iter().map(|d| d.field).collect();
    assert_eq!(fields, ["amount", "value"]);
    assert_eq!(evidence.matched_key, None);
}

#[test]
fn a_reservation_whose_lease_ran_out_reads_as_an_unknown_outcome() {
    let key = key();
    let row = reservation("refund@2:aa", ReservationState::Reserved, 1);
    let until = row.lease_until.unwrap();
    let state = KeyState::Reserved { row, through: None };
    let before = state.evidence(&key, until - chrono::Duration::seconds(1));
    assert!(matches!(before.existing, Existing::LeaseAlive { .. }));
    let after = state.evidence(&key, until);
    assert!(matches!(after.existing, Existing::OutcomeUnknown { .. }));
}

#[test]
fn a_reservation_found_is_offered_as_the_claim_a_retry_takes_again() {
    let key = key();
    let at = DateTime::from_timestamp(1_800_000_000, 0).unwrap();
    let failed = reservation("refund@2:aa", ReservationState::Failed, 4);
    let state = KeyState::Reserved {
        row: failed.clone(),
        through: None,
    };
    let evidence = state.evidence(&key, at);
    assert!(matches!(evidence.existing, Existing::Failed { .. }));
    let claim = evidence.reserved.expect("the reservation found");
    assert_eq!(claim.key, failed.key);
    assert_eq!(claim.effect_id.to_string(), failed.effect_id);
    assert_eq!(claim.fencing_token, 4);
    // Nothing found offers nothing to take again.
    assert_eq!(KeyState::Nothing.evidence(&key, at).reserved, None);
}
