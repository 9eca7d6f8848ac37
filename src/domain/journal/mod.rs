//! Journal event types. Each event has a frozen stored name (past tense) and a
//! version; renaming a stored name or changing a payload shape needs a new
//! version and an upcaster in `JournalEvent::from_stored`.

mod access;
pub mod audit;
mod case;
mod decided;
mod decision;
mod delivery;
mod derivation;
mod effect;
#[cfg(test)]
mod frozen;
mod observe;
mod operators;
mod reconcile;
mod strategy;

pub use access::{FixtureExported, RawBodyRead};
pub use case::{
    CaseAssigned, CaseCommented, CaseResolved, HandMade, LookupPerformed, ProviderOperation,
};
pub use decided::{Applied, DeliveryDecided, Reserved, Unfoldable};
pub use decision::{DecisionMade, KeyDerived, KeySummary, Lacking, Layer, OlderKey};
pub use delivery::{DeliveryReceived, DeliveryRejected, ItemOf, Origin, RejectionsAggregated};
pub use derivation::{
    DerivationProof, KeyingProof, SkipDetail, SkippedStrategy, StrategyName, UnresolvedDetail,
};
pub use effect::{
    DownstreamCall, EffectSettled, EvidencePurged, KeyReserved, KeyTaken, KeysPurged,
    ReservationExpired, SettlementOutcome, StatusLookupPerformed,
};
pub use observe::{LegacyEffect, LegacyEffectsImported, SourceModeSet};
pub use operators::{
    Actor, LoginFailed, OperatorCreated, OperatorDisabled, OperatorLoggedIn, OperatorLoggedOut,
    OperatorPasswordChanged, OperatorRoleChanged, PasswordLinkIssued, SetupCompleted, TokenIssued,
    TokenRevoked,
};
pub use reconcile::{DiscrepancyFound, DiscrepancyKind, EffectPaired, ReconciliationRan};
pub use strategy::{
    CohortFlagged, KeyMigrated, StrategyMigrated, StrategyReset, StrategyTripped,
    StrategyVersionRecorded,
};

/// Error reading a stored event back.
#[derive(Debug, thiserror::Error)]
pub enum StoredEventError {
    #[error("unknown journal event type {event_type} v{version}")]
    Unknown { event_type: String, version: i32 },
    #[error("unreadable {event_type} payload: {reason}")]
    Unreadable { event_type: String, reason: String },
    /// `reason` says what kind of error, never the value that caused it:
    /// serde's own message quotes it, and a payload's values are sensitive.
    #[error("malformed {event_type} payload: {reason}")]
    Malformed { event_type: String, reason: String },
}

impl StoredEventError {
    /// A payload that did not read as its type: what kind of error, not
    /// the value serde's message quotes (`invalid type: string "ann@…"`).
    pub fn malformed(event_type: &str, error: &serde_json::Error) -> Self {
        let message = error.to_string();
        let kind = message
            .split([':', '"', '`', '\''])
            .next()
            .unwrap_or_default()
            .trim();
        Self::Malformed {
            event_type: event_type.to_owned(),
            reason: format!("{kind} ({:?} error)", error.classify()),
        }
    }
}

/// Declares `JournalEvent` with, for each variant, its frozen stored name and
/// current version, and the (de)serialisation that goes with them.
macro_rules! journal_events {
    ($($variant:ident($payload:ty) = $name:literal, version $version:literal;)*) => {
        /// Every event Unicity appends to its journal.
        #[derive(Debug, Clone, PartialEq)]
        pub enum JournalEvent {
            $($variant($payload),)*
        }

        impl JournalEvent {
            /// Every stored name this code writes, with the version it writes.
            pub const WRITTEN: &[(&str, i32)] = &[$(($name, $version),)*];

            /// The frozen stored name of the event.
            pub fn event_type(&self) -> &'static str {
                match self {
                    $(Self::$variant(_) => $name,)*
                }
            }

            /// The version of the payload shape this code writes.
            pub fn version(&self) -> i32 {
                match self {
                    $(Self::$variant(_) => $version,)*
                }
            }

            /// The JSON payload stored in the journal's `data` column.
            pub fn data(&self) -> serde_json::Value {
                let value = match self {
                    $(Self::$variant(e) => serde_json::to_value(e),)*
                };
                // These payloads hold no non-string map keys and no non-finite floats.
                value.unwrap_or(serde_json::Value::Null)
            }

            /// The same payload as `data`, serialised (what is bound on insert).
            pub fn data_text(&self) -> String {
                let text = match self {
                    $(Self::$variant(e) => serde_json::to_string(e),)*
                };
                text.unwrap_or_else(|_| "null".to_owned())
            }

            /// Reads a stored event back, upcasting older versions where needed.
            pub fn from_stored(
                event_type: &str,
                version: i32,
                data: serde_json::Value,
            ) -> Result<Self, StoredEventError> {
                let (version, data) = upcast(event_type, version, data);
                match (event_type, version) {
                    $(($name, $version) => serde_json::from_value(data)
                        .map(Self::$variant)
                        .map(Self::upcast)
                        .map_err(|error| StoredEventError::malformed(event_type, &error)),)*
                    _ => Err(StoredEventError::Unknown {
                        event_type: event_type.to_owned(),
                        version,
                    }),
                }
            }
        }
    };
}

impl JournalEvent {
    /// The events a stored row stands for: the event itself, or the parts of
    /// a `DeliveryDecided` (which needs the row's delivery id). Every reader
    /// of the journal sees parts, never the folded row.
    pub fn into_parts(
        self,
        delivery_id: Option<crate::domain::delivery::DeliveryId>,
    ) -> Result<Vec<Self>, StoredEventError> {
        let Self::DeliveryDecided(decided) = self else {
            return Ok(vec![self]);
        };
        let unreadable = |reason: &str| StoredEventError::Unreadable {
            event_type: "DeliveryDecided".to_owned(),
            reason: reason.to_owned(),
        };
        let id = delivery_id.ok_or_else(|| unreadable("a row without a delivery id"))?;
        decided.parts(id).map_err(unreadable)
    }

    /// Reads what older code stored in today's terms, where the payload
    /// shape did not change but its meaning did:
    /// * a batch delivery journaled before 2026-12-01 carried a synthetic
    ///   `batch@1` key over the set of its item keys; batches now have no key
    ///   of their own (each item is decided on its own), so that key reads
    ///   as absent. The decision then made stays in the journal as it was.
    fn upcast(self) -> Self {
        match self {
            Self::KeyDerived(mut derived) => {
                let synthetic = derived.business.as_ref().is_some_and(|b| {
                    b.strategy
                        .split_once('@')
                        .is_some_and(|(name, _)| name == crate::domain::identity::BATCH_STRATEGY)
                });
                if synthetic {
                    derived.business = None;
                }
                Self::KeyDerived(derived)
            }
            other => other,
        }
    }
}

journal_events! {
    DeliveryReceived(DeliveryReceived) = "DeliveryReceived", version 1;
    DeliveryRejected(DeliveryRejected) = "DeliveryRejected", version 2;
    RejectionsAggregated(RejectionsAggregated) = "RejectionsAggregated", version 1;
    KeyDerived(KeyDerived) = "KeyDerived", version 2;
    DecisionMade(DecisionMade) = "DecisionMade", version 1;
    DeliveryDecided(Box<DeliveryDecided>) = "DeliveryDecided", version 1;
    KeyReserved(KeyReserved) = "KeyReserved", version 1;
    EffectApplied(EffectSettled) = "EffectApplied", version 1;
    EffectFailed(EffectSettled) = "EffectFailed", version 1;
    EffectOutcomeUnknown(EffectSettled) = "EffectOutcomeUnknown", version 1;
    ReservationExpired(ReservationExpired) = "ReservationExpired", version 1;
    KeysPurged(KeysPurged) = "KeysPurged", version 1;
    EvidencePurged(EvidencePurged) = "EvidencePurged", version 1;
    StrategyVersionRecorded(StrategyVersionRecorded) = "StrategyVersionRecorded", version 1;
    StrategyTripped(StrategyTripped) = "StrategyTripped", version 1;
    CohortFlagged(CohortFlagged) = "CohortFlagged", version 1;
    StrategyReset(StrategyReset) = "StrategyReset", version 2;
    KeyMigrated(KeyMigrated) = "KeyMigrated", version 1;
    StrategyMigrated(StrategyMigrated) = "StrategyMigrated", version 1;
    CaseResolved(CaseResolved) = "CaseResolved", version 1;
    CaseCommented(CaseCommented) = "CaseCommented", version 1;
    CaseAssigned(CaseAssigned) = "CaseAssigned", version 1;
    LookupPerformed(LookupPerformed) = "LookupPerformed", version 1;
    StatusLookupPerformed(StatusLookupPerformed) = "StatusLookupPerformed", version 1;
    DiscrepancyFound(DiscrepancyFound) = "DiscrepancyFound", version 1;
    ReconciliationRan(ReconciliationRan) = "ReconciliationRan", version 1;
    EffectPaired(EffectPaired) = "EffectPaired", version 1;
    RawBodyRead(RawBodyRead) = "RawBodyRead", version 1;
    FixtureExported(FixtureExported) = "FixtureExported", version 1;
    SourceModeSet(SourceModeSet) = "SourceModeSet", version 1;
    LegacyEffectsImported(LegacyEffectsImported) = "LegacyEffectsImported", version 1;
    OperatorLoggedIn(OperatorLoggedIn) = "OperatorLoggedIn", version 1;
    LoginFailed(LoginFailed) = "LoginFailed", version 1;
    OperatorLoggedOut(OperatorLoggedOut) = "OperatorLoggedOut", version 1;
    OperatorCreated(OperatorCreated) = "OperatorCreated", version 1;
    OperatorDisabled(OperatorDisabled) = "OperatorDisabled", version 1;
    OperatorRoleChanged(OperatorRoleChanged) = "OperatorRoleChanged", version 1;
    OperatorPasswordChanged(OperatorPasswordChanged) = "OperatorPasswordChanged", version 1;
    PasswordLinkIssued(PasswordLinkIssued) = "PasswordLinkIssued", version 1;
    TokenIssued(TokenIssued) = "TokenIssued", version 1;
    TokenRevoked(TokenRevoked) = "TokenRevoked", version 1;
    SetupCompleted(SetupCompleted) = "SetupCompleted", version 1;
}

/// Brings a stored payload of an older version to the shape this code reads.
fn upcast(event_type: &str, version: i32, data: serde_json::Value) -> (i32, serde_json::Value) {
    match (event_type, version) {
        // v2 only adds fields that default: `headers_omitted`, `header_bytes`.
        ("DeliveryRejected", 1) => (2, data),
        // v2 only adds who reset the breaker and why, both optional.
        ("StrategyReset", 1) => (2, data),
        // v2 keeps the proof of the derivation instead of the live
        // derivation whole (see `derivation`).
        ("KeyDerived", 1) => {
            let mut data = data;
            if let Some(whole) = data.get("derivation") {
                data["derivation"] = DerivationProof::from_v1(whole);
            }
            (2, data)
        }
        _ => (version, data),
    }
}

#[cfg(test)]
mod tests {
    use chrono::DateTime;

    use super::*;

    #[test]
    fn a_payload_that_does_not_read_says_why_without_its_values() {
        let data = serde_json::json!({"key": "k", "fencing_token": "ann.secret@example.com"});
        let error = JournalEvent::from_stored("ReservationExpired", 1, data).unwrap_err();
        let said = format!("{error}");
        assert!(
            said.starts_with("malformed ReservationExpired payload: "),
            "{said}"
        );
        assert!(!said.contains("ann.secret"), "{said}");
        assert!(std::error::Error::source(&error).is_none());
    }

    #[test]
    fn stored_events_round_trip_through_their_frozen_names() {
        let event = JournalEvent::DeliveryRejected(DeliveryRejected {
            origin: Origin {
                source: "s".into(),
                tenant: "t".into(),
                provider: "stripe".into(),
                environment: "test".into(),
            },
            received_at: DateTime::from_timestamp(1_700_000_000, 0).unwrap_or_default(),
            headers: vec![],
            headers_omitted: 0,
            header_bytes: Some(0),
            reason: "invalid_signature".into(),
            status: 401,
            body: None,
            declared_size: None,
        });
        assert_eq!(event.event_type(), "DeliveryRejected");
        let back = JournalEvent::from_stored(event.event_type(), event.version(), event.data())
            .expect("round trip");
        assert_eq!(back, event);
        assert!(JournalEvent::from_stored("Nope", 1, serde_json::json!({})).is_err());
        assert!(JournalEvent::from_stored("DeliveryRejected", 3, event.data()).is_err());
    }

    #[test]
    fn a_version_1_rejection_with_every_header_whole_still_reads() {
        let stored = serde_json::json!({
            "source": "s", "tenant": "t", "provider": "stripe", "environment": "test",
            "received_at": "2026-01-01T00:00:00Z",
            "headers": [["x-big", "a".repeat(100_000)]],
            "reason": "invalid_signature", "status": 401,
            "body": null, "declared_size": null,
        });
        let Ok(JournalEvent::DeliveryRejected(read)) =
            JournalEvent::from_stored("DeliveryRejected", 1, stored)
        else {
            panic!("a version 1 row must read");
        };
        assert_eq!(read.headers[0].1.len(), 100_000);
        assert_eq!((read.headers_omitted, read.header_bytes), (0, None));
    }

    #[test]
    fn a_batch_key_stored_before_items_were_decided_alone_reads_as_no_key() {
        let stored = serde_json::json!({
            "event_type": "payments.confirmed+payments.failed",
            "transport_key": "t",
            "provider_event_id": null,
            "body_fingerprint": "f",
            "business": {
                "key": format!("batch@1:{}", "ab".repeat(32)),
                "strategy": "batch@1",
                "strength": "strong",
                "effect_type": "batch",
                "criticality": "critical",
                "horizon_secs": 60,
                "discriminants": {},
                "missing_discriminants": [],
                "older_keys": []
            },
            "unresolved": null,
            "derivation": {}
        });
        let Ok(JournalEvent::KeyDerived(derived)) =
            JournalEvent::from_stored("KeyDerived", 1, stored.clone())
        else {
            panic!("KeyDerived reads back");
        };
        assert!(derived.business.is_none());
        // Any other key reads as stored.
        let mut other = stored;
        other["business"]["strategy"] = "gocardless-event-id@1".into();
        let Ok(JournalEvent::KeyDerived(kept)) = JournalEvent::from_stored("KeyDerived", 1, other)
        else {
            panic!("KeyDerived reads back");
        };
        assert!(kept.business.is_some());
    }
}
