//! Journal event types. Each event has a frozen stored name (past tense) and a
//! version; renaming a stored name or changing a payload shape needs a new
//! version and an upcaster in `JournalEvent::from_stored`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::delivery::{BodyParse, BodyRef, Headers};

/// Where a delivery came from: the configured source and what it stands for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    pub source: String,
    pub tenant: String,
    pub provider: String,
    pub environment: String,
}

/// A delivery passed its source's checks and its body is stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeliveryReceived {
    #[serde(flatten)]
    pub origin: Origin,
    pub received_at: DateTime<Utc>,
    /// Signature and authorization values are masked.
    pub headers: Headers,
    pub body: BodyRef,
    pub parse: BodyParse,
    pub signature_scheme: String,
    /// Which of the source's secrets matched (rotation), when one did.
    pub secret_index: Option<usize>,
}

/// A delivery was refused before any decision; the provider got an error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeliveryRejected {
    #[serde(flatten)]
    pub origin: Origin,
    pub received_at: DateTime<Utc>,
    pub headers: Headers,
    /// Stable snake_case code, the same one the provider received.
    pub reason: String,
    pub status: u16,
    /// Present when the whole body was read (it is hashed, never stored).
    pub body: Option<BodyRef>,
    /// Bytes announced or read when the body was refused for its size.
    pub declared_size: Option<u64>,
}

/// Every event Unicity appends to its journal.
#[derive(Debug, Clone, PartialEq)]
pub enum JournalEvent {
    DeliveryReceived(DeliveryReceived),
    DeliveryRejected(DeliveryRejected),
}

/// Error reading a stored event back.
#[derive(Debug, thiserror::Error)]
pub enum StoredEventError {
    #[error("unknown journal event type {event_type} v{version}")]
    Unknown { event_type: String, version: i32 },
    #[error("malformed {event_type} payload: {source}")]
    Malformed {
        event_type: String,
        #[source]
        source: serde_json::Error,
    },
}

impl JournalEvent {
    /// The frozen stored name of the event.
    pub fn event_type(&self) -> &'static str {
        match self {
            Self::DeliveryReceived(_) => "DeliveryReceived",
            Self::DeliveryRejected(_) => "DeliveryRejected",
        }
    }

    pub fn version(&self) -> i32 {
        1
    }

    /// The JSON payload stored in the journal's `data` column.
    pub fn data(&self) -> serde_json::Value {
        let value = match self {
            Self::DeliveryReceived(e) => serde_json::to_value(e),
            Self::DeliveryRejected(e) => serde_json::to_value(e),
        };
        // Serialising these plain structs cannot fail: no maps with non-string keys, no floats.
        value.unwrap_or(serde_json::Value::Null)
    }

    /// Reads a stored event back, upcasting older versions where needed.
    pub fn from_stored(
        event_type: &str,
        version: i32,
        data: serde_json::Value,
    ) -> Result<Self, StoredEventError> {
        let malformed = |source| StoredEventError::Malformed {
            event_type: event_type.to_owned(),
            source,
        };
        match (event_type, version) {
            ("DeliveryReceived", 1) => serde_json::from_value(data)
                .map(Self::DeliveryReceived)
                .map_err(malformed),
            ("DeliveryRejected", 1) => serde_json::from_value(data)
                .map(Self::DeliveryRejected)
                .map_err(malformed),
            _ => Err(StoredEventError::Unknown {
                event_type: event_type.to_owned(),
                version,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
