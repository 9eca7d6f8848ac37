//! What Unicity knows about one delivery before any decision: its id, how its
//! body parsed, and its headers with secrets masked.

use std::fmt;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::domain::strict_json::{self, Limits, Refused};

/// Identifier of one reception of one HTTP request (UUIDv7, so it sorts by time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct DeliveryId(Uuid);

impl DeliveryId {
    /// Wraps an id made by the caller (the domain never makes ids itself).
    pub fn from_uuid(id: Uuid) -> Self {
        Self(id)
    }

    pub fn as_uuid(&self) -> Uuid {
        self.0
    }
}

impl std::str::FromStr for DeliveryId {
    type Err = uuid::Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Uuid::parse_str(s).map(Self)
    }
}

impl fmt::Display for DeliveryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// How the raw body parsed. Anything but `Json` is kept and later quarantined:
/// an unparseable body is never dropped, and never keyed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum BodyParse {
    Json,
    NotUtf8,
    NotJson,
    /// JSON nested deeper than [`MAX_BODY_DEPTH`](crate::domain::strict_json::MAX_BODY_DEPTH).
    TooDeep,
    /// JSON with a member name twice in one object (RFC 7493 forbids it):
    /// parsers disagree on which value counts, so none is trusted.
    DuplicateMemberNames,
    /// JSON with U+0000 in a string or member name, which PostgreSQL
    /// cannot store as text (`strict_json::Refused::Nul`).
    NulCharacter,
}

impl BodyParse {
    /// Classifies raw bytes, returning the parsed document when there is one.
    /// Depth and duplicate member names are checked in the same single pass
    /// that builds the document.
    pub fn classify(raw: &[u8]) -> (Self, Option<serde_json::Value>) {
        let Ok(text) = std::str::from_utf8(raw) else {
            return (Self::NotUtf8, None);
        };
        match strict_json::parse(text, Limits::BODY) {
            Ok(value) => (Self::Json, Some(value)),
            Err(Refused::TooDeep { .. }) => (Self::TooDeep, None),
            Err(Refused::DuplicateMember { .. }) => (Self::DuplicateMemberNames, None),
            Err(Refused::Nul) => (Self::NulCharacter, None),
            Err(Refused::Syntax(_)) => (Self::NotJson, None),
        }
    }

    pub fn is_parseable(self) -> bool {
        self == Self::Json
    }
}

/// Reference to a raw body stored apart from the journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BodyRef {
    /// Lower-case hex SHA-256 of the exact bytes received.
    pub sha256: String,
    pub size: u64,
}

/// Header names and values as received, names lower-cased, in arrival order.
pub type Headers = Vec<(String, String)>;

/// The value `name` was sent with: its first non-empty one, trimmed, the
/// name matched whatever its case. An empty value counts as not sent, as
/// the signature schemes count it, so that a key never reads a header value
/// other than the one a signature was checked with.
pub fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .filter(|(n, _)| n.trim().eq_ignore_ascii_case(name))
        .map(|(_, v)| v.trim())
        .find(|v| !v.is_empty())
}

/// The placeholder stored instead of a secret header value (see
/// [`masking`](crate::domain::masking)).
pub const REDACTED: &str = "[redacted]";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classify_tells_json_from_bad_utf8_and_bad_json() {
        assert_eq!(BodyParse::classify(br#"{"a":1}"#).0, BodyParse::Json);
        assert_eq!(BodyParse::classify(b"\xff\xfe{}").0, BodyParse::NotUtf8);
        assert_eq!(BodyParse::classify(b"{not json").0, BodyParse::NotJson);
        assert_eq!(BodyParse::classify(b"").0, BodyParse::NotJson);
        assert_eq!(
            BodyParse::classify(br#"{"amount":1,"amount":2}"#),
            (BodyParse::DuplicateMemberNames, None)
        );
        let deep = format!("{}{}", "[".repeat(65), "]".repeat(65));
        assert_eq!(
            BodyParse::classify(deep.as_bytes()),
            (BodyParse::TooDeep, None)
        );
    }
}
