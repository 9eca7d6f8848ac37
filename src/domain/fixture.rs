//! A resolved case as a regression fixture (`unicity-fixture/1`): the
//! deliveries of its key in arrival order, as received (headers without
//! secrets, the body's bytes with sensitive values replaced), the strategy
//! definitions in force, what the provider's API answered, and what must
//! come out — each delivery's decision, the case's resolution and the
//! effects that exist once it is applied. Replaying it (`services::fixtures`)
//! against the code of the day says whether that code still decides this
//! history as the person who resolved it did.

use std::collections::BTreeMap;

use base64::Engine as _;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The format's name and version, the file's first field.
pub const FORMAT: &str = "unicity-fixture/1";

/// How sensitive values are replaced, said in every file.
pub const MASKING: &str = "each string value at a path a strategy of the provider declares sensitive is replaced in the body's bytes, everywhere it occurs, by `masked-` and 16 hex digits of HMAC-SHA256 under a key drawn for this export: equal values stay equal and different ones different, so keys, matches and decisions are unchanged, and nothing in the file gives the value back. Secret headers (signatures, tokens) are left out; replays do not check signatures.";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fixture {
    pub fixture: String,
    /// What the fixture is about, for its reader: the case's reason and
    /// resolution.
    pub name: String,
    pub exported_at: DateTime<Utc>,
    pub exported_by: String,
    pub masking: String,
    /// The definitions that keyed these deliveries, whole, with their
    /// fingerprints.
    pub strategies: Vec<StrategyInForce>,
    pub deliveries: Vec<Delivery>,
    pub case: Case,
    /// Effects asked for under the key once the case is resolved (applied
    /// in the original run, or left to its sink's answer; a replay applies
    /// them all).
    pub expected_effects: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StrategyInForce {
    /// `name@version`.
    pub strategy: String,
    pub fingerprint: String,
    pub definition: Value,
}

/// One delivery as it was received.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Delivery {
    pub source: String,
    pub tenant: String,
    pub provider: String,
    pub environment: String,
    /// Milliseconds after the first delivery of the fixture.
    pub offset_ms: i64,
    /// Its headers, secret ones left out.
    pub headers: Vec<(String, String)>,
    /// The body's bytes (sensitive values replaced), base64.
    pub body_base64: String,
    /// The same bytes as text, for a reader, when they are UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// How it was decided when it arrived.
    pub expect: Decided,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decided {
    pub decision: String,
    pub reason: String,
}

/// The case and how it ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Case {
    /// The delivery (index in `deliveries`) that opened it.
    pub delivery: usize,
    pub reason: String,
    /// `process_as_distinct`, `confirm_duplicate` or `reject`.
    pub resolution: String,
    pub resolved_by: String,
    pub note: String,
    /// The provider's operation the resolution cited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// What the provider's API answered when it was asked, as journaled;
    /// a replay resolves as recorded and asks nobody.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lookups: Vec<Value>,
}

impl Delivery {
    /// The body's bytes.
    pub fn bytes(&self) -> Result<Vec<u8>, base64::DecodeError> {
        base64::engine::general_purpose::STANDARD.decode(&self.body_base64)
    }

    /// `bytes` as stored in a fixture.
    pub fn encode(bytes: &[u8]) -> (String, Option<String>) {
        (
            base64::engine::general_purpose::STANDARD.encode(bytes),
            std::str::from_utf8(bytes).ok().map(str::to_owned),
        )
    }
}

/// Replaces each of `values` (strings) in `body` wherever it occurs as a
/// JSON string, by its replacement from `mask`; bytes around it are kept as
/// they were, so whitespace and member order — which the transport layer
/// compares — do not change.
pub fn mask_body(body: &[u8], values: &[String], mask: impl Fn(&str) -> String) -> Vec<u8> {
    let mut text = match std::str::from_utf8(body) {
        Ok(text) => text.to_owned(),
        // Not text: nothing of it is keyed as a JSON value.
        Err(_) => return body.to_vec(),
    };
    let mut replacements: BTreeMap<String, String> = BTreeMap::new();
    for value in values {
        let quoted = serde_json::to_string(value).unwrap_or_default();
        let replacement = serde_json::to_string(&mask(value)).unwrap_or_default();
        replacements.insert(quoted, replacement);
    }
    // Longest first, so that a value inside another is not replaced in it.
    let mut ordered: Vec<_> = replacements.into_iter().collect();
    ordered.sort_by_key(|(quoted, _)| std::cmp::Reverse(quoted.len()));
    for (quoted, replacement) in ordered {
        text = text.replace(&quoted, &replacement);
    }
    text.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sensitive_value_is_replaced_everywhere_and_the_bytes_around_it_are_kept() {
        let body = br#"{ "email" : "ann@example.org",
  "copy":"ann@example.org", "amount": 700 }"#;
        let masked = mask_body(body, &["ann@example.org".to_owned()], |v| {
            format!("masked-{}", v.len())
        });
        assert_eq!(
            std::str::from_utf8(&masked).unwrap(),
            "{ \"email\" : \"masked-15\",\n  \"copy\":\"masked-15\", \"amount\": 700 }"
        );
    }

    #[test]
    fn a_body_round_trips_through_the_file() {
        let (encoded, text) = Delivery::encode(b"{\"a\": 1}\n");
        let delivery = Delivery {
            source: "s".into(),
            tenant: "t".into(),
            provider: "p".into(),
            environment: "e".into(),
            offset_ms: 0,
            headers: Vec::new(),
            body_base64: encoded,
            body: text,
            expect: Decided {
                decision: "process".into(),
                reason: "new_key".into(),
            },
        };
        assert_eq!(delivery.bytes().unwrap(), b"{\"a\": 1}\n");
        assert_eq!(delivery.body.as_deref(), Some("{\"a\": 1}\n"));
    }
}
