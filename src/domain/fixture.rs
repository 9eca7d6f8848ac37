//! A resolved case as a regression fixture (`unicity-fixture/1`): the
//! deliveries of its key in arrival order, as received (headers without
//! secrets, the body's bytes with sensitive values replaced), the strategy
//! definitions in force, the collision breakers tripped while they arrived,
//! what the provider's API answered, and what must come out — each
//! delivery's decision, the case's resolution and the effects that exist
//! once it is applied. Replaying it (`services::fixtures`)
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
    /// Those of `strategies` whose collision breaker was tripped while the
    /// deliveries arrived: a tripped breaker turns a would-be duplicate into
    /// a case, and the collisions that tripped it are other keys' deliveries,
    /// not in the file. Absent from files exported before breakers were
    /// carried, which no breaker decided.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub breakers: Vec<Tripped>,
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

/// A strategy's collision breaker, tripped from `tripped_offset_ms` until
/// `reset_offset_ms` (or to the end of the fixture), on the deliveries'
/// clock: milliseconds after the first delivery, negative before it. A
/// replay trips it again before the first delivery that arrived once it was
/// tripped, so that delivery and those after it see it as they did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tripped {
    /// `name@version`.
    pub strategy: String,
    pub tripped_offset_ms: i64,
    /// When an operator reset it, if that was before the delivery that
    /// opened the case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reset_offset_ms: Option<i64>,
    /// The figures it was tripped on, as journaled: deliveries and
    /// collisions over the window, against the threshold.
    pub deliveries: i64,
    pub collisions: i64,
    pub threshold: f64,
    pub window_secs: u64,
}

/// A change of a breaker's state, in the order a replay makes them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BreakerChange<'a> {
    Trip(&'a Tripped),
    Reset(&'a Tripped),
}

impl BreakerChange<'_> {
    /// When it happened, on the deliveries' clock.
    pub fn offset_ms(&self) -> i64 {
        match self {
            Self::Trip(tripped) => tripped.tripped_offset_ms,
            Self::Reset(tripped) => tripped.reset_offset_ms.unwrap_or(i64::MAX),
        }
    }
}

impl Fixture {
    /// Every trip and reset of `breakers`, oldest first; at one moment, in
    /// the order of `breakers` (the journal's), a trip before its reset.
    pub fn breaker_changes(&self) -> Vec<BreakerChange<'_>> {
        let mut changes: Vec<(usize, BreakerChange<'_>)> = Vec::new();
        for (n, tripped) in self.breakers.iter().enumerate() {
            changes.push((n, BreakerChange::Trip(tripped)));
            if tripped.reset_offset_ms.is_some() {
                changes.push((n, BreakerChange::Reset(tripped)));
            }
        }
        changes.sort_by_key(|(n, change)| {
            (
                change.offset_ms(),
                *n,
                matches!(change, BreakerChange::Reset(_)),
            )
        });
        changes.into_iter().map(|(_, change)| change).collect()
    }
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

    fn tripped(strategy: &str, from: i64, to: Option<i64>) -> Tripped {
        Tripped {
            strategy: strategy.into(),
            tripped_offset_ms: from,
            reset_offset_ms: to,
            deliveries: 204,
            collisions: 2,
            threshold: 0.005,
            window_secs: 3600,
        }
    }

    #[test]
    fn a_file_without_breakers_reads_as_none_tripped_and_one_with_them_keeps_them() {
        let file = include_str!("../../tests/fixtures/no-strategy-rejected.json");
        let mut fixture: Fixture = serde_json::from_str(file).expect("a shipped fixture");
        assert_eq!(fixture.fixture, FORMAT);
        assert!(fixture.breakers.is_empty());
        assert!(
            !serde_json::to_string(&fixture)
                .unwrap()
                .contains("breakers")
        );
        fixture.breakers = vec![tripped("a@1", -5, None)];
        let text = serde_json::to_string(&fixture).unwrap();
        assert!(!text.contains("reset_offset_ms"), "{text}");
        let back: Fixture = serde_json::from_str(&text).unwrap();
        assert_eq!(back, fixture);
    }

    #[test]
    fn breakers_change_in_the_order_of_their_moments() {
        let fixture = Fixture {
            breakers: vec![
                tripped("a@1", -5, Some(10)),
                tripped("b@1", 3, None),
                tripped("a@1", 10, None),
            ],
            ..serde_json::from_str(include_str!(
                "../../tests/fixtures/no-strategy-rejected.json"
            ))
            .unwrap()
        };
        let changes: Vec<(&str, &str, i64)> = fixture
            .breaker_changes()
            .iter()
            .map(|change| match change {
                BreakerChange::Trip(t) => ("trip", t.strategy.as_str(), change.offset_ms()),
                BreakerChange::Reset(t) => ("reset", t.strategy.as_str(), change.offset_ms()),
            })
            .collect();
        assert_eq!(
            changes,
            [
                ("trip", "a@1", -5),
                ("trip", "b@1", 3),
                // reset, then tripped again at the same moment: in that order.
                ("reset", "a@1", 10),
                ("trip", "a@1", 10),
            ]
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
