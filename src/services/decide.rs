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
use super::reserve::{Claim, EffectJob, business_keys, derived_key, reserve_effect};
use crate::domain::decision::{
    self, Action, Decision, DecisionInput, Existing, FailureKind, FieldDifference, Horizon,
    Identity, LedgerEvidence, Reason, TransportMatch,
};
use crate::domain::delivery::DeliveryId;
use crate::domain::journal::{KeyDerived, KeySummary, Layer};
use crate::domain::reservation::ReservationState;
use crate::store::Tx;
use crate::store::entities::reservation;

/// What the business layer decided, and the effect to run if any.
pub struct Verdict {
    pub decision: Decision,
    pub layer: Layer,
    pub matched_key: Option<String>,
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

/// Decides a keyed delivery and, on `process`, reserves its key. An effect
/// whose sink is `record` (the ledger itself, no external call) is applied in
/// the same transaction; any other is returned as a job to run after commit.
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
        let found = read_key(tx, key).await?;
        let (existing, differences, missing, horizon, matched_key) = match &found {
            Some((row, matched)) => {
                let seen = seen_by(key, matched.as_deref());
                (
                    existing_of(row, at),
                    seen.differences(&row.discriminants),
                    seen.missing,
                    Horizon::Within,
                    matched.clone(),
                )
            }
            None => match ledger(tx, key).await? {
                Some(answer) => answer,
                // A reservation committed between the two reads: look again.
                None => continue,
            },
        };
        let layer = if matches!(existing, Existing::Nothing)
            && !matches!(horizon, Horizon::Passed { .. })
        {
            match transport {
                TransportMatch::FirstSeen => Layer::Business,
                _ => Layer::Transport,
            }
        } else {
            Layer::Business
        };
        let input = DecisionInput {
            identity: Identity::Keyed {
                strength: key.strength,
            },
            transport: transport.clone(),
            existing,
            horizon,
            differences,
            missing_fields: missing,
            criticality: key.criticality,
            // Whether the provider's API can be asked before a person: a
            // held delivery's case is then put to it at once.
            lookup_available: engine.lookup_for(key).is_some(),
            breaker_tripped: engine.is_tripped(&key.strategy),
        };
        let mut decision = decision::decide(&input);
        if decision.action != Action::Process {
            return Ok(Verdict {
                decision,
                layer,
                matched_key,
                job: None,
            });
        }
        let (claim_key, effect_id, token) = match (decision.reason, &found) {
            (Reason::NewKey, _) => (key.key.clone(), Uuid::now_v7(), 1),
            (Reason::PreviousAttemptFailedWithoutEffect, Some((row, _))) => (
                row.key.clone(),
                row.effect_id.parse().unwrap_or_else(|_| Uuid::now_v7()),
                row.fencing_token + 1,
            ),
            // Processing under uncertainty (a flagged reversible effect): a
            // distinct effect with a key of its own, never the matched one.
            _ => (derived_key(&key.key, delivery_id), Uuid::now_v7(), 1),
        };
        let claim = Claim {
            key: claim_key,
            effect_id,
            fencing_token: token,
            provider_ref: None,
        };
        // Lost: another delivery took the key meanwhile; decide again
        // against its row.
        let Ok(job) = reserve_effect(tx, engine, sink, delivery_id, key, claim, at)
            .await?
            .won()
        else {
            continue;
        };
        decision.effect_id = Some(effect_id);
        return Ok(Verdict {
            decision,
            layer,
            matched_key,
            job,
        });
    }
    // Never reached in practice; holding the delivery is the safe answer.
    Err(DbErr::Custom(
        "reservation contended three times".to_owned(),
    ))
}

/// A reservation found for a key, with the older strategy version's key it
/// was found under (`None`: the key itself).
type Found = (reservation::Model, Option<String>);

/// Reads the reservation for the key, else for the key of an older strategy
/// version still in the index.
async fn read_key(tx: &mut Tx<'_>, key: &KeySummary) -> Result<Option<Found>, DbErr> {
    let found = tx.reservations(&business_keys(key)).await?;
    Ok(pick_current(key, found))
}

/// The row of the key itself if any, else the one of the newest older
/// version that has one (`older_keys` is newest first), with the older key
/// it was found under.
fn pick<T>(
    key: &KeySummary,
    mut rows: Vec<T>,
    key_of: fn(&T) -> &str,
) -> Option<(T, Option<String>)> {
    for (n, wanted) in business_keys(key).iter().enumerate() {
        if let Some(at) = rows.iter().position(|row| key_of(row) == wanted) {
            let row = rows.swap_remove(at);
            return Some((row, (n > 0).then(|| wanted.clone())));
        }
    }
    None
}

fn pick_current(key: &KeySummary, rows: Vec<reservation::Model>) -> Option<Found> {
    pick(key, rows, |row| &row.key)
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

/// What the decision reads for a key: what exists, the discriminating
/// fields that disagree, those missing, the horizon, and the older version's
/// key the match was made through.
type Answer = (
    Existing,
    Vec<FieldDifference>,
    Vec<String>,
    Horizon,
    Option<String>,
);

/// Beyond the fast index: what the effects ledger still proves, searched
/// with every key in force (the current version's, then older ones'), so a
/// version bump never turns a late retry into a second effect.
///
/// Only applied effects leave the fast index, so an effect found here in any
/// other state belongs to a reservation that committed after the index was
/// read: `None` asks the caller to read the index again.
async fn ledger(tx: &mut Tx<'_>, key: &KeySummary) -> Result<Option<Answer>, DbErr> {
    let rows = tx.ledger(&business_keys(key)).await?;
    let Some((effect, matched)) = pick(key, rows, |row| &row.key) else {
        return retired(tx, key).await.map(Some);
    };
    if effect.status != ReservationState::Applied.as_str() {
        return Ok(None);
    }
    let evidence = if effect.evidence_purged_at.is_some() {
        LedgerEvidence::Purged
    } else {
        LedgerEvidence::Found {
            reference_delivery: uuid_of(&effect.first_delivery_id),
            effect_id: uuid_of(&effect.effect_id),
        }
    };
    let seen = seen_by(key, matched.as_deref());
    Ok(Some((
        Existing::Nothing,
        seen.differences(&effect.discriminants),
        seen.missing,
        Horizon::Passed { ledger: evidence },
        matched,
    )))
}

/// Past every key in force: the effects that retired versions keyed. A
/// migrated key stands for the effect its retained body was re-derived from,
/// judged on that body's discriminants under the current version; an effect
/// found only through a retired version's own key could not be migrated (its
/// body was gone), so nothing proves what it was: an approval is needed,
/// never a silent second effect.
async fn retired(tx: &Tx<'_>, key: &KeySummary) -> Result<Answer, DbErr> {
    let nothing = (
        Existing::Nothing,
        Vec::new(),
        key.missing_discriminants.clone(),
        Horizon::Within,
        None,
    );
    if key.retired_keys.is_empty() {
        return Ok(nothing);
    }
    if let Some((alias, effect)) = tx
        .migrated_effects(&business_keys(key))
        .await?
        .into_iter()
        .next()
    {
        let applied = effect.status == ReservationState::Applied.as_str();
        let evidence = if applied && effect.evidence_purged_at.is_none() {
            LedgerEvidence::Found {
                reference_delivery: uuid_of(&effect.first_delivery_id),
                effect_id: uuid_of(&effect.effect_id),
            }
        } else {
            LedgerEvidence::Purged
        };
        return Ok((
            Existing::Nothing,
            differences(&alias.discriminants, &key.discriminants),
            key.missing_discriminants.clone(),
            Horizon::Passed { ledger: evidence },
            Some(effect.key),
        ));
    }
    let found = tx.retired_ledger(&key.retired_keys).await?;
    Ok(match found.into_iter().next() {
        Some(effect) => (
            Existing::Nothing,
            Vec::new(),
            Vec::new(),
            Horizon::Passed {
                ledger: LedgerEvidence::Purged,
            },
            Some(effect.key),
        ),
        None => nothing,
    })
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
