//! Events of reservations and effects: a key taken with a lease and a fencing
//! token, its settlement, its expiry, the purge of the fast index.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::domain::reservation::ReservationState;
use uuid::Uuid;

use crate::domain::confidence::{Criticality, Strength};
use crate::domain::delivery::DeliveryId;

/// A business key was reserved: exactly one delivery will apply its effect.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyReserved {
    pub key: String,
    pub strategy: String,
    pub strength: Strength,
    pub effect_type: String,
    pub criticality: Criticality,
    pub effect_id: Uuid,
    /// 1 for a first reservation; the previous token + 1 when a definitive
    /// failure without effect is retried.
    pub fencing_token: i64,
    pub lease_until: DateTime<Utc>,
    /// End of the key's horizon in the fast index.
    pub expires_at: DateTime<Utc>,
    pub discriminants: BTreeMap<String, serde_json::Value>,
    pub sink: String,
    pub delivery_id: DeliveryId,
    /// The provider's operation this effect is applied for, when a look-up
    /// or a person resolved its case citing one: consumed by this effect.
    /// Absent from reservations made before 2026-12-04 and from those of a
    /// first delivery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_ref: Option<String>,
}

/// A key taken in one transaction: its reservation and, for a `record`
/// sink, the effect applied with it. The events that journal a claim, as a
/// value: the store hands one back only for a claim that took
/// (`Tx::reserve`), and the caller records it as it is or folds it into its
/// reception's row (`DeliveryDecided`).
#[derive(Debug, Clone, PartialEq)]
#[must_use = "a key taken must be journaled in the transaction that took it"]
pub struct KeyTaken {
    pub reserved: KeyReserved,
    pub applied: Option<EffectSettled>,
}

impl KeyTaken {
    /// Its events, in the order they happened.
    pub fn events(self) -> Vec<super::JournalEvent> {
        let mut events = vec![super::JournalEvent::KeyReserved(self.reserved)];
        events.extend(self.applied.map(super::JournalEvent::EffectApplied));
        events
    }
}

/// How an effect attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SettlementOutcome {
    Applied,
    /// Definitively refused, known to have had no effect.
    Failed,
    /// Maybe applied (timeout, reset after sending): reconcile, never retry blindly.
    Unknown,
}

impl SettlementOutcome {
    /// The reservation state this outcome leaves.
    pub fn state(self) -> &'static str {
        self.reservation_state().as_str()
    }

    pub fn reservation_state(self) -> ReservationState {
        match self {
            Self::Applied => ReservationState::Applied,
            Self::Failed => ReservationState::Failed,
            Self::Unknown => ReservationState::Unknown,
        }
    }
}

/// The settlement of one effect attempt (`EffectApplied`, `EffectFailed`,
/// `EffectOutcomeUnknown`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EffectSettled {
    pub key: String,
    pub effect_id: Uuid,
    pub fencing_token: i64,
    pub outcome: SettlementOutcome,
    pub result: Option<serde_json::Value>,
    pub authoritative_ref: Option<String>,
    /// A stable code for failures and unknown outcomes.
    pub error: Option<String>,
    /// The reconciliation case opened for an unknown outcome.
    pub case_id: Option<Uuid>,
    pub delivery_id: DeliveryId,
    /// The call to the downstream service this settlement is the answer
    /// to. Absent when nothing was called (a `record` sink, a status
    /// look-up's or a person's settlement) and from settlements journaled
    /// before 2026-12-02.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<DownstreamCall>,
}

/// One call to a downstream service: when it was sent, how long it took
/// to end, and the HTTP status it answered (`None`: no answer came).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DownstreamCall {
    pub sent_at: DateTime<Utc>,
    pub latency_ms: u64,
    pub status: Option<u16>,
}

/// A lease ran out before its effect settled: the outcome is unknown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReservationExpired {
    pub key: String,
    pub effect_id: Uuid,
    pub fencing_token: i64,
    pub case_id: Uuid,
    pub first_delivery_id: DeliveryId,
}

/// Settled keys past their horizon left the fast index. The effects ledger
/// still holds their effects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeysPurged {
    pub keys: Vec<String>,
}

/// A retention policy removed an effect's stored result; its identity stays.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvidencePurged {
    pub effect_id: Uuid,
}

/// The downstream was asked what became of an effect whose outcome was
/// unknown (its status URL, by the Idempotency-Key): what it answered, or
/// the error, and when it is asked again if it settled nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusLookupPerformed {
    pub case_id: Uuid,
    pub effect_id: Uuid,
    /// The key the effect was sent with (its Idempotency-Key).
    pub key: String,
    /// The URL asked; empty when the sink declares no status URL.
    pub url: String,
    pub status: Option<u16>,
    pub latency_ms: u64,
    /// `applied`, `failed` or `unknown`, as the downstream said.
    pub answer: Option<String>,
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<DateTime<Utc>>,
    /// Who asked, when a person did (an operator's or a token's
    /// signature, as `resolved_by` keeps it); absent for the server's own
    /// questions and in look-ups journaled before 2026-12-07.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asked_by: Option<String>,
}
