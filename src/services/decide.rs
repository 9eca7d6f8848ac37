//! Deciding one delivery inside its ingest transaction: read the transport
//! evidence and what exists for the business key, run the pure decision
//! matrix, and when it says `process`, take the key atomically.
//!
//! There is no check-then-insert: the reservation is an insert that does
//! nothing on conflict (or a compare-and-set on the fencing token), and a
//! delivery that loses the race decides again against the winner's row.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use sea_orm::DbErr;
use serde_json::Value;
use uuid::Uuid;

use super::engine::Engine;
use super::reserve::{Claim, EffectJob, Reserved, derived_key, reserve_effect};
use crate::domain::decision::{
    self, Action, Decision, DecisionInput, Existing, FailureKind, FieldDifference, Horizon,
    Identity, LedgerEvidence, Reason, TransportMatch,
};
use crate::domain::delivery::DeliveryId;
use crate::domain::journal::{KeyDerived, KeySummary, KeyTaken, Layer};
use crate::domain::reservation::ReservationState;
use crate::store::entities::{effect, reservation};
use crate::store::{KeyState, Tx};

/// What the business layer decided: the key it took, if any, to journal
/// in the same transaction, and the effect to run after commit.
pub struct Verdict {
    pub decision: Decision,
    pub layer: Layer,
    pub matched_key: Option<String>,
    pub taken: Option<KeyTaken>,
    pub job: Option<EffectJob>,
}

/// Claims the transport identity for this delivery (the first reception of
/// it), or else reports what the existing first reception says about it.
pub async fn claim_transport(
    tx: &mut Tx<'_>,
    delivery_id: DeliveryId,
    derived: &KeyDerived,
    by_header: bool,
    at: DateTime<Utc>,
) -> Result<(TransportMatch, Option<DeliveryId>), DbErr> {
    let found = tx
        .claim_transport_link(&delivery_id.to_string(), derived, at)
        .await?;
    let Some(link) = found else {
        return Ok((TransportMatch::FirstSeen, None));
    };
    let first: Option<DeliveryId> = link.first_delivery_id.parse().ok();
    let ours = derived.body_fingerprint.clone().unwrap_or_default();
    let evidence = if link.body_fingerprint == ours {
        if by_header {
            TransportMatch::DeliveryIdRetry
        } else {
            TransportMatch::RawBodyMatch
        }
    } else {
        TransportMatch::DeliveryIdCollision {
            first_delivery: first.map(|f| f.as_uuid()).unwrap_or_default(),
            differences: vec![FieldDifference {
                field: "body (without volatile fields)".to_owned(),
                existing: Value::String(link.body_fingerprint),
                new: Value::String(ours),
            }],
        }
    };
    Ok((evidence, first))
}

/// Decides a delivery that has no business identity: always kept, quarantined.
pub fn decide_unkeyed(identity: Identity, transport: TransportMatch) -> Decision {
    decision::decide(&DecisionInput {
        identity,
        transport,
        existing: Existing::Nothing,
        horizon: Horizon::Within,
        differences: Vec::new(),
        missing_fields: Vec::new(),
        criticality: crate::domain::confidence::Criticality::Critical,
        lookup_available: false,
        breaker_tripped: false,
    })
}

/// Decides a keyed delivery and, on `process`, reserves its key: read what
/// exists for the key (`Tx::key_state`), run the pure decision matrix on it,
/// and take the key the decision names. An effect whose sink is `record`
/// (the ledger itself, no external call) is applied with the claim; any
/// other is returned as a job to run after commit. What the claim journals
/// comes back in the verdict, for the caller to record.
pub async fn decide_keyed(
    tx: &mut Tx<'_>,
    engine: &Engine,
    sink: &str,
    delivery_id: DeliveryId,
    key: &KeySummary,
    transport: TransportMatch,
    at: DateTime<Utc>,
) -> Result<Verdict, DbErr> {
    // On PostgreSQL a loser of the insert race waits for the winner's commit,
    // then sees its row: two passes always suffice; the third is a safety net.
    for _ in 0..3 {
        // `None`: a reservation committed between two reads; look again.
        let Some(state) = tx.key_state(key).await? else {
            continue;
        };
        let evidence = evidence_of(&state, key, at);
        let layer = layer_of(&evidence, &transport);
        let input = DecisionInput {
            identity: Identity::Keyed {
                strength: key.strength,
            },
            transport: transport.clone(),
            existing: evidence.existing,
            horizon: evidence.horizon,
            differences: evidence.differences,
            missing_fields: evidence.missing,
            criticality: key.criticality,
            // Whether the provider's API can be asked before a person: a
            // held delivery's case is then put to it at once.
            lookup_available: engine.lookup_for(key).is_some(),
            breaker_tripped: engine.is_tripped(&key.strategy),
        };
        let mut decision = decision::decide(&input);
        let matched_key = state.through().map(str::to_owned);
        if decision.action != Action::Process {
            return Ok(Verdict {
                decision,
                layer,
                matched_key,
                taken: None,
                job: None,
            });
        }
        let claim = claim_for(decision.reason, &state, key, delivery_id);
        let effect_id = claim.effect_id;
        // Lost: another delivery took the key meanwhile; decide again
        // against its row.
        let Reserved::Won { taken, job } =
            reserve_effect(tx, engine, sink, delivery_id, key, claim, at).await?
        else {
            continue;
        };
        decision.effect_id = Some(effect_id);
        return Ok(Verdict {
            decision,
            layer,
            matched_key,
            taken: Some(*taken),
            job,
        });
    }
    // Never reached in practice; holding the delivery is the safe answer.
    Err(DbErr::Custom(
        "reservation contended three times".to_owned(),
    ))
}

/// The key a `process` decision takes: a new key for a new effect; the
/// failed reservation's own key with the next fencing token when a
/// definitive failure without effect is retried; otherwise (processing under
/// uncertainty, a flagged reversible effect) a distinct effect with a key of
/// its own, never the matched one.
fn claim_for(reason: Reason, state: &KeyState, key: &KeySummary, delivery_id: DeliveryId) -> Claim {
    let (claim_key, effect_id, fencing_token) = match (reason, state) {
        (Reason::NewKey, _) => (key.key.clone(), Uuid::now_v7(), 1),
        (Reason::PreviousAttemptFailedWithoutEffect, KeyState::Reserved { row, .. }) => (
            row.key.clone(),
            row.effect_id.parse().unwrap_or_else(|_| Uuid::now_v7()),
            row.fencing_token + 1,
        ),
        _ => (derived_key(&key.key, delivery_id), Uuid::now_v7(), 1),
    };
    Claim {
        key: claim_key,
        effect_id,
        fencing_token,
        provider_ref: None,
    }
}

/// What the decision matrix is told about a key's state.
struct Evidence {
    existing: Existing,
    differences: Vec<FieldDifference>,
    missing: Vec<String>,
    horizon: Horizon,
}

/// Which layer decided: the transport layer when nothing exists for the key
/// within its horizon and the delivery was already seen; otherwise the
/// business layer.
fn layer_of(evidence: &Evidence, transport: &TransportMatch) -> Layer {
    let unknown_key = matches!(evidence.existing, Existing::Nothing)
        && !matches!(evidence.horizon, Horizon::Passed { .. });
    match transport {
        TransportMatch::FirstSeen => Layer::Business,
        _ if unknown_key => Layer::Transport,
        _ => Layer::Business,
    }
}

/// What `state` says to a decision on `key` at `at`.
fn evidence_of(state: &KeyState, key: &KeySummary, at: DateTime<Utc>) -> Evidence {
    let nothing = || Evidence {
        existing: Existing::Nothing,
        differences: Vec::new(),
        missing: key.missing_discriminants.clone(),
        horizon: Horizon::Within,
    };
    match state {
        KeyState::Nothing => nothing(),
        KeyState::Reserved { row, through } => {
            let seen = seen_by(key, through.as_deref());
            Evidence {
                existing: existing_of(row, at),
                differences: seen.differences(&row.discriminants),
                missing: seen.missing,
                horizon: Horizon::Within,
            }
        }
        // Beyond the fast index: what the effects ledger still proves,
        // searched with every key in force (the current version's, then
        // older ones'), so a version bump never turns a late retry into a
        // second effect.
        KeyState::Ledger { effect, through } => {
            let seen = seen_by(key, through.as_deref());
            Evidence {
                existing: Existing::Nothing,
                differences: seen.differences(&effect.discriminants),
                missing: seen.missing,
                horizon: Horizon::Passed {
                    ledger: ledger_evidence(effect, true),
                },
            }
        }
        // A migrated key stands for the effect its retained body was
        // re-derived from, judged on that body's discriminants under the
        // current version.
        KeyState::Migrated { alias, effect } => Evidence {
            existing: Existing::Nothing,
            differences: differences(&alias.discriminants, &key.discriminants),
            missing: key.missing_discriminants.clone(),
            horizon: Horizon::Passed {
                ledger: ledger_evidence(
                    effect,
                    effect.status == ReservationState::Applied.as_str(),
                ),
            },
        },
        // Found only through a retired version's own key: its body was gone
        // when it was migrated, so nothing proves what it was; an approval
        // is needed, never a silent second effect.
        KeyState::Retired { .. } => Evidence {
            existing: Existing::Nothing,
            differences: Vec::new(),
            missing: Vec::new(),
            horizon: Horizon::Passed {
                ledger: LedgerEvidence::Purged,
            },
        },
    }
}

/// What a ledger row proves: its first delivery and effect while its
/// evidence is kept and it is `applied`; nothing past its purge.
fn ledger_evidence(effect: &effect::Model, applied: bool) -> LedgerEvidence {
    if applied && effect.evidence_purged_at.is_none() {
        LedgerEvidence::Found {
            reference_delivery: uuid_of(&effect.first_delivery_id),
            effect_id: uuid_of(&effect.effect_id),
        }
    } else {
        LedgerEvidence::Purged
    }
}

/// The delivery as the version that keyed a match sees it.
struct Seen<'k> {
    discriminants: &'k BTreeMap<String, Value>,
    missing: Vec<String>,
    /// Compare only the fields both sides have (see `seen_by`).
    shared_only: bool,
}

impl Seen<'_> {
    fn differences(&self, existing: &Value) -> Vec<FieldDifference> {
        let mut found = differences(existing, self.discriminants);
        if self.shared_only {
            let recorded = existing.as_object();
            found.retain(|d| {
                self.discriminants.contains_key(&d.field)
                    && recorded.is_some_and(|r| r.contains_key(&d.field))
            });
        }
        found
    }
}

/// What a match through `matched` (an older version's key; `None`: the
/// current one) is judged on: that version's discriminants, as recorded when
/// its key was reserved, against the delivery's under the same version —
/// never the newer version's, whose added fields the older one never
/// recorded. A delivery journaled before older versions' discriminants were
/// kept (re-decided after deferral) is compared on the fields both sides have.
fn seen_by<'k>(key: &'k KeySummary, matched: Option<&str>) -> Seen<'k> {
    let current = Seen {
        discriminants: &key.discriminants,
        missing: key.missing_discriminants.clone(),
        shared_only: false,
    };
    let Some(matched) = matched else {
        return current;
    };
    match key.older.get(matched) {
        Some(older) => Seen {
            discriminants: &older.discriminants,
            missing: older.missing_discriminants.clone(),
            shared_only: false,
        },
        None => Seen {
            missing: Vec::new(),
            shared_only: true,
            ..current
        },
    }
}

fn uuid_of(text: &str) -> Uuid {
    text.parse().unwrap_or_default()
}

fn existing_of(row: &reservation::Model, at: DateTime<Utc>) -> Existing {
    let reference_delivery = uuid_of(&row.first_delivery_id);
    match ReservationState::parse(&row.state) {
        Some(ReservationState::Reserved) if row.lease_until.is_some_and(|until| until > at) => {
            Existing::LeaseAlive { reference_delivery }
        }
        Some(ReservationState::Applied) => Existing::Applied {
            reference_delivery,
            effect_id: uuid_of(&row.effect_id),
        },
        Some(ReservationState::Failed) => Existing::Failed {
            reference_delivery,
            failure: FailureKind::NoEffect,
        },
        // Unknown, reserved with its lease run out, or a state this code does
        // not know: nobody can say whether the effect happened.
        _ => Existing::OutcomeUnknown { reference_delivery },
    }
}

/// Discriminating fields whose values disagree (an absent field reads as null).
pub fn differences(existing: &Value, new: &BTreeMap<String, Value>) -> Vec<FieldDifference> {
    let empty = serde_json::Map::new();
    let existing = existing.as_object().unwrap_or(&empty);
    let mut names: Vec<&String> = existing.keys().chain(new.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter_map(|name| {
            let old = existing.get(name).cloned().unwrap_or(Value::Null);
            let new = new.get(name).cloned().unwrap_or(Value::Null);
            (old != new).then(|| FieldDifference {
                field: name.clone(),
                existing: old,
                new,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
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
}
