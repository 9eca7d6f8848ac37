//! What a key's state (`store::KeyState`) says to the decision matrix:
//! what exists, the discriminating fields that disagree or are missing, and
//! whether the key's horizon has passed — each match judged on what the
//! strategy version that keyed it recorded.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use crate::domain::decision::{Existing, FailureKind, FieldDifference, Horizon, LedgerEvidence};
use crate::domain::journal::KeySummary;
use crate::domain::reservation::ReservationState;
use crate::store::KeyState;
use crate::store::entities::{effect, reservation};

/// What the decision matrix is told about a key's state.
pub(super) struct Evidence {
    pub existing: Existing,
    pub differences: Vec<FieldDifference>,
    pub missing: Vec<String>,
    pub horizon: Horizon,
}

/// What `state` says to a decision on `key` at `at`.
pub(super) fn evidence_of(state: &KeyState, key: &KeySummary, at: DateTime<Utc>) -> Evidence {
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
