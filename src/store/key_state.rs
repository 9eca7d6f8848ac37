//! What exists for a business key, and what that says to a decision: the
//! reservation in the fast index, else the applied effect the ledger still
//! proves, else what a retired strategy version left (`KeyState`, read by
//! `Tx::decide_key` through the batch's key index or the database alike: the
//! caller never knows which), told to the decision matrix as `Evidence` —
//! each match judged on what the strategy version that keyed it recorded.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use super::entities::{effect, migrated_key};
use crate::domain::decision::{Existing, FailureKind, FieldDifference, Horizon, LedgerEvidence};
use crate::domain::journal::KeySummary;
use crate::domain::plan::{Claim, Evidence, differences};
use crate::domain::reservation::ReservationState;

/// What exists for a key. `through` names the older version's key a row
/// was found under (`None`: the key itself).
#[derive(Debug, Clone)]
pub(super) enum KeyState {
    /// Nothing under any key in force, nor under a retired one.
    Nothing,
    /// A key's row in the fast index (within its horizon).
    Reserved {
        row: effect::Model,
        through: Option<String>,
    },
    /// Past the fast index: an applied effect of the ledger.
    Ledger {
        effect: effect::Model,
        through: Option<String>,
    },
    /// Past every key in force: the effect a migrated key stands for (its
    /// retained body re-derived under the current version).
    Migrated {
        alias: migrated_key::Model,
        effect: effect::Model,
    },
    /// An effect only a retired version's own key finds: its migration could
    /// not carry it over.
    Retired { effect: effect::Model },
}

impl KeyState {
    /// The key a match was made through, when it is not the key itself.
    fn through(&self) -> Option<&str> {
        match self {
            Self::Nothing => None,
            Self::Reserved { through, .. } | Self::Ledger { through, .. } => through.as_deref(),
            Self::Migrated { effect, .. } | Self::Retired { effect } => Some(&effect.key),
        }
    }
}

/// The row of the first of `keys` that has one (the key itself, then older
/// versions' newest first), with the older key it was found under.
pub(super) fn pick<T>(
    keys: &[String],
    mut rows: Vec<T>,
    key_of: fn(&T) -> &str,
) -> Option<(T, Option<String>)> {
    for (n, wanted) in keys.iter().enumerate() {
        if let Some(at) = rows.iter().position(|row| key_of(row) == wanted) {
            let row = rows.swap_remove(at);
            return Some((row, (n > 0).then(|| wanted.clone())));
        }
    }
    None
}

impl KeyState {
    /// What this state says to a decision on `key` at `at`.
    pub(super) fn evidence(&self, key: &KeySummary, at: DateTime<Utc>) -> Evidence {
        Evidence {
            matched_key: self.through().map(str::to_owned),
            judged_through: match self {
                Self::Migrated { alias, .. } if alias.key != key.key => Some(alias.key.clone()),
                _ => None,
            },
            reserved: match self {
                Self::Reserved { row, .. } => Some(Claim {
                    key: row.key.clone(),
                    effect_id: row.effect_id.parse().unwrap_or_else(|_| Uuid::now_v7()),
                    fencing_token: row.fencing_token.unwrap_or_default(),
                    provider_ref: None,
                }),
                _ => None,
            },
            ..evidence_of(self, key, at)
        }
    }
}

fn evidence_of(state: &KeyState, key: &KeySummary, at: DateTime<Utc>) -> Evidence {
    let nothing = || Evidence::nothing(key);
    match state {
        KeyState::Nothing => nothing(),
        KeyState::Reserved { row, through } => {
            let seen = seen_by(key, through.as_deref());
            Evidence {
                existing: existing_of(row, at),
                differences: seen.differences(&row.discriminants),
                missing: seen.missing,
                horizon: Horizon::Within,
                ..nothing()
            }
        }
        // Beyond the fast index: what the effects ledger still proves,
        // searched with every key in force (the current version's, then
        // older ones'), so a version bump never turns a late retry into a
        // second effect.
        KeyState::Ledger { effect, through } => {
            let seen = seen_by(key, through.as_deref());
            Evidence {
                differences: seen.differences(&effect.discriminants),
                missing: seen.missing,
                horizon: Horizon::Passed {
                    ledger: ledger_evidence(effect, true),
                },
                ..nothing()
            }
        }
        // A migrated key stands for the effect its retained body was
        // re-derived from, judged on that body's discriminants under the
        // version of the key it was carried to: the delivery's own, or
        // another in force (a strategy added above the retired one since).
        KeyState::Migrated { alias, effect } => {
            let seen = seen_by(key, (alias.key != key.key).then_some(alias.key.as_str()));
            Evidence {
                differences: seen.differences(&alias.discriminants),
                missing: seen.missing,
                horizon: Horizon::Passed {
                    ledger: ledger_evidence(
                        effect,
                        effect.state == ReservationState::Applied.as_str(),
                    ),
                },
                ..nothing()
            }
        }
        // Found only through a retired version's own key: its body was gone
        // when it was migrated, so nothing proves what it was; an approval
        // is needed, never a silent second effect.
        KeyState::Retired { .. } => Evidence {
            missing: Vec::new(),
            horizon: Horizon::Passed {
                ledger: LedgerEvidence::Purged,
            },
            ..nothing()
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

fn existing_of(row: &effect::Model, at: DateTime<Utc>) -> Existing {
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

#[cfg(test)]
mod tests;
