//! `DeliveryDecided`: one journal row for what a delivery's reception
//! journals in one transaction — received, keyed, decided and, when that
//! decision took its key, the reservation and the effect applied with it —
//! instead of one row per event that repeats the key, the strategy, the
//! effect type and the discriminants in each.
//!
//! It is a storage form, never a fact of its own: readers get its parts
//! (`parts`), the same events, field for field, as the separate rows it
//! replaces. `compact` only folds a group whose parts it gives back exactly
//! (anything else stays separate rows), so what is read is what was decided.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{
    DecisionMade, DeliveryReceived, EffectSettled, JournalEvent, KeyDerived, KeyReserved, KeyTaken,
    SettlementOutcome,
};
use crate::domain::delivery::DeliveryId;

/// A delivery received, keyed and decided in one transaction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeliveryDecided {
    pub received: DeliveryReceived,
    pub key: KeyDerived,
    /// The key its decision reserved, if it did in the same transaction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved: Option<Reserved>,
    pub decision: DecisionMade,
}

/// `KeyReserved` without what the delivery's business key already says
/// (strategy, strength, effect type, criticality, discriminants), and the
/// effect applied with it (a `record` sink's, settled in the same batch).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reserved {
    /// The key reserved when it is not the business key itself (an older
    /// version's key taken again, or a key derived for a distinct effect).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    pub effect_id: Uuid,
    pub fencing_token: i64,
    pub lease_until: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub sink: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied: Option<Applied>,
}

/// `EffectApplied` without what its reservation already says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Applied {
    pub result: Option<serde_json::Value>,
    pub authoritative_ref: Option<String>,
}

/// Events that a `DeliveryDecided` would not give back as they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unfoldable;

impl DeliveryDecided {
    /// Folds a reception's events: its `DeliveryReceived` and `KeyDerived`,
    /// the key its decision took, if any, and its `DecisionMade`. `None`
    /// when the key taken holds a field this form would not give back as it
    /// is: those events are then journaled one row each.
    pub fn compact(
        received: &DeliveryReceived,
        key: &KeyDerived,
        taken: Option<&KeyTaken>,
        decision: &DecisionMade,
        delivery_id: DeliveryId,
    ) -> Option<Self> {
        let reserved = Reserved::fold(taken, key, delivery_id).ok()?;
        Some(Self {
            received: received.clone(),
            key: key.clone(),
            reserved,
            decision: decision.clone(),
        })
    }

    /// The events this row stands for, in the order they happened. Fails
    /// only for a row no version of this code writes: a reservation on a
    /// delivery without a business key.
    pub fn parts(self, delivery_id: DeliveryId) -> Result<Vec<JournalEvent>, &'static str> {
        let mut out = Vec::with_capacity(5);
        let reserved = match self.reserved {
            Some(r) => Some(
                r.events(&self.key, delivery_id)
                    .ok_or("a reservation without a business key")?,
            ),
            None => None,
        };
        out.push(JournalEvent::DeliveryReceived(self.received));
        out.push(JournalEvent::KeyDerived(self.key));
        if let Some((reserved, applied)) = reserved {
            out.push(JournalEvent::KeyReserved(reserved));
            out.extend(applied.map(JournalEvent::EffectApplied));
        }
        out.push(JournalEvent::DecisionMade(self.decision));
        Ok(out)
    }
}

impl Reserved {
    /// The key a decision took (see `DeliveryDecided::compact`) in this
    /// form: `Ok(None)` for none.
    pub fn fold(
        taken: Option<&KeyTaken>,
        key: &KeyDerived,
        delivery_id: DeliveryId,
    ) -> Result<Option<Self>, Unfoldable> {
        match taken {
            None => Ok(None),
            Some(taken) => {
                Self::of(&taken.reserved, taken.applied.as_ref(), key, delivery_id).map(Some)
            }
        }
    }

    /// `r` (and `s`, settled with it) in this form, if they hold nothing
    /// but what the form gives back.
    fn of(
        r: &KeyReserved,
        s: Option<&EffectSettled>,
        key: &KeyDerived,
        delivery_id: DeliveryId,
    ) -> Result<Self, Unfoldable> {
        let business = key.business.as_ref().ok_or(Unfoldable)?;
        let from_key = r.strategy == business.strategy
            && r.strength == business.strength
            && r.effect_type == business.effect_type
            && r.criticality == business.criticality
            && r.discriminants == business.discriminants
            && r.delivery_id == delivery_id
            && r.provider_ref.is_none();
        if !from_key {
            return Err(Unfoldable);
        }
        let applied = match s {
            None => None,
            Some(s) => {
                let with_reservation = s.key == r.key
                    && s.effect_id == r.effect_id
                    && s.fencing_token == r.fencing_token
                    && s.outcome == SettlementOutcome::Applied
                    && s.error.is_none()
                    && s.case_id.is_none()
                    && s.call.is_none()
                    && s.delivery_id == delivery_id;
                if !with_reservation {
                    return Err(Unfoldable);
                }
                Some(Applied {
                    result: s.result.clone(),
                    authoritative_ref: s.authoritative_ref.clone(),
                })
            }
        };
        Ok(Self {
            key: (r.key != business.key).then(|| r.key.clone()),
            effect_id: r.effect_id,
            fencing_token: r.fencing_token,
            lease_until: r.lease_until,
            expires_at: r.expires_at,
            sink: r.sink.clone(),
            applied,
        })
    }

    /// The `KeyReserved` and `EffectApplied` this stands for; `None` without
    /// a business key to read them from.
    fn events(
        self,
        key: &KeyDerived,
        delivery_id: DeliveryId,
    ) -> Option<(KeyReserved, Option<EffectSettled>)> {
        let business = key.business.as_ref()?;
        let reserved = KeyReserved {
            key: self.key.unwrap_or_else(|| business.key.clone()),
            strategy: business.strategy.clone(),
            strength: business.strength,
            effect_type: business.effect_type.clone(),
            criticality: business.criticality,
            effect_id: self.effect_id,
            fencing_token: self.fencing_token,
            lease_until: self.lease_until,
            expires_at: self.expires_at,
            discriminants: business.discriminants.clone(),
            sink: self.sink,
            delivery_id,
            provider_ref: None,
        };
        let applied = self.applied.map(|a| EffectSettled {
            key: reserved.key.clone(),
            effect_id: reserved.effect_id,
            fencing_token: reserved.fencing_token,
            outcome: SettlementOutcome::Applied,
            result: a.result,
            authoritative_ref: a.authoritative_ref,
            error: None,
            case_id: None,
            delivery_id,
            call: None,
        });
        Some((reserved, applied))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The frozen samples of the parts, made to agree with one another.
    fn reception() -> (DeliveryReceived, KeyDerived, DecisionMade, DeliveryId) {
        let read = |name: &str, version: i32, text: &str| {
            JournalEvent::from_stored(name, version, serde_json::from_str(text).unwrap()).unwrap()
        };
        let JournalEvent::DeliveryReceived(received) = read(
            "DeliveryReceived",
            1,
            include_str!("frozen/DeliveryReceived.v1.json"),
        ) else {
            unreachable!()
        };
        let JournalEvent::KeyDerived(key) =
            read("KeyDerived", 2, include_str!("frozen/KeyDerived.v2.json"))
        else {
            unreachable!()
        };
        let JournalEvent::DecisionMade(decision) = read(
            "DecisionMade",
            1,
            include_str!("frozen/DecisionMade.v1.json"),
        ) else {
            unreachable!()
        };
        let id = DeliveryId::from_uuid(Uuid::now_v7());
        (received, key, decision, id)
    }

    fn reserved(key: &KeyDerived, id: DeliveryId) -> KeyReserved {
        let business = key.business.clone().unwrap();
        KeyReserved {
            key: business.key,
            strategy: business.strategy,
            strength: business.strength,
            effect_type: business.effect_type,
            criticality: business.criticality,
            effect_id: Uuid::now_v7(),
            fencing_token: 1,
            lease_until: received_at(),
            expires_at: received_at() + chrono::Duration::days(30),
            discriminants: business.discriminants,
            sink: "record".to_owned(),
            delivery_id: id,
            provider_ref: None,
        }
    }

    fn applied(r: &KeyReserved) -> EffectSettled {
        EffectSettled {
            key: r.key.clone(),
            effect_id: r.effect_id,
            fencing_token: r.fencing_token,
            outcome: SettlementOutcome::Applied,
            result: Some(serde_json::json!({ "recorded": true })),
            authoritative_ref: Some("re_1".to_owned()),
            error: None,
            case_id: None,
            delivery_id: r.delivery_id,
            call: None,
        }
    }

    fn received_at() -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000, 0).unwrap()
    }

    fn taken(reserved: KeyReserved, applied: Option<EffectSettled>) -> Option<KeyTaken> {
        Some(KeyTaken { reserved, applied })
    }

    /// Folds the key `taken(key, id)` gives, stores, reads back and
    /// expands: the events come back as they were.
    fn round_trip(
        taken: impl Fn(&KeyDerived, DeliveryId) -> Option<KeyTaken>,
    ) -> Option<(String, Vec<JournalEvent>)> {
        let (received, key, decision, id) = reception();
        let taken = taken(&key, id);
        let mut expected = vec![
            JournalEvent::DeliveryReceived(received.clone()),
            JournalEvent::KeyDerived(key.clone()),
        ];
        expected.extend(taken.clone().map(KeyTaken::events).unwrap_or_default());
        expected.push(JournalEvent::DecisionMade(decision.clone()));
        let folded = DeliveryDecided::compact(&received, &key, taken.as_ref(), &decision, id)?;
        let stored = JournalEvent::DeliveryDecided(Box::new(folded));
        let back = JournalEvent::from_stored(stored.event_type(), stored.version(), stored.data())
            .unwrap();
        let parts = back.into_parts(Some(id)).unwrap();
        assert_eq!(parts, expected);
        Some((stored.data_text(), parts))
    }

    #[test]
    fn a_decision_that_reserved_nothing_folds_and_reads_back_as_its_three_events() {
        let (_, parts) = round_trip(|_, _| None).expect("folds");
        assert_eq!(parts.len(), 3);
    }

    #[test]
    fn a_reservation_and_the_effect_applied_with_it_fold_and_read_back_whole() {
        let (stored, parts) = round_trip(|key, id| {
            let r = reserved(key, id);
            let s = applied(&r);
            taken(r, Some(s))
        })
        .expect("folds");
        assert_eq!(parts.len(), 5);
        // What the key says is stored once, not again in the reservation.
        assert_eq!(
            stored.matches(r#""strategy":"vref@3""#).count(),
            1,
            "{stored}"
        );
        let (_, parts) = round_trip(|key, id| taken(reserved(key, id), None)).expect("folds");
        assert_eq!(parts.len(), 4);
        // A reservation made for another delivery does not fold.
        let other = DeliveryId::from_uuid(Uuid::now_v7());
        assert!(round_trip(|key, _| taken(reserved(key, other), None)).is_none());
    }

    #[test]
    fn a_reserved_key_other_than_the_business_key_is_kept_and_given_back() {
        let (received, key, decision, id) = reception();
        let mut r = reserved(&key, id);
        r.key = format!("{}~{id}", r.key);
        r.fencing_token = 2;
        let one = taken(r.clone(), None);
        let folded =
            DeliveryDecided::compact(&received, &key, one.as_ref(), &decision, id).unwrap();
        assert_eq!(
            folded.reserved.as_ref().and_then(|r| r.key.as_deref()),
            Some(r.key.as_str())
        );
        assert_eq!(folded.parts(id).unwrap()[2], JournalEvent::KeyReserved(r));
    }

    #[test]
    fn what_the_form_would_not_give_back_stays_separate_rows() {
        let (received, key, decision, id) = reception();
        let base = reserved(&key, id);
        let mut other_strategy = base.clone();
        other_strategy.strategy = "vref@2".to_owned();
        let mut other_discriminants = base.clone();
        other_discriminants.discriminants.clear();
        let mut with_case = applied(&base);
        with_case.case_id = Some(Uuid::now_v7());
        let mut failed = applied(&base);
        failed.outcome = SettlementOutcome::Failed;
        let mut other_key = applied(&base);
        other_key.key = format!("{}~{id}", base.key);
        let refused = [
            taken(other_strategy, None),
            taken(other_discriminants, None),
            taken(base.clone(), Some(with_case)),
            taken(base.clone(), Some(failed)),
            taken(base.clone(), Some(other_key)),
        ];
        for one in refused {
            assert!(
                DeliveryDecided::compact(&received, &key, one.as_ref(), &decision, id).is_none(),
                "{one:?}"
            );
        }
        // A delivery without a business key has nothing to reserve under.
        let mut unkeyed = key;
        unkeyed.business = None;
        let one = taken(base, None);
        assert!(
            DeliveryDecided::compact(&received, &unkeyed, one.as_ref(), &decision, id).is_none()
        );
    }

    #[test]
    fn a_folded_row_without_a_delivery_id_or_with_a_keyless_reservation_is_refused() {
        let (received, key, decision, id) = reception();
        let one = taken(reserved(&key, id), None);
        let mut folded =
            DeliveryDecided::compact(&received, &key, one.as_ref(), &decision, id).unwrap();
        let event = JournalEvent::DeliveryDecided(Box::new(folded.clone()));
        assert!(event.into_parts(None).is_err());
        folded.key.business = None;
        let keyless = JournalEvent::DeliveryDecided(Box::new(folded));
        assert!(keyless.into_parts(Some(id)).is_err());
    }
}
