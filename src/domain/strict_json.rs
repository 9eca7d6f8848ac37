//! Reading JSON text in one pass while checking what `serde_json` lets through:
//! nesting deeper than a limit, and duplicate member names (RFC 7493, I-JSON,
//! forbids them; `serde_json` keeps the last one, another parser may keep the
//! first, and money would move on a value nobody sees).
//!
//! Bodies are read with [`Limits::BODY`]: at most [`MAX_BODY_DEPTH`] nested
//! arrays or objects, no duplicate member names at any depth. Journal payloads
//! are read with [`Limits::STORED`], which only bounds the depth, far above
//! anything Unicity ever wrote, so no stored row depends on `serde_json`'s own
//! limit of 128 to be read back.

use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Deepest nesting of arrays and objects a body may have (`{}` is 1,
/// `{"a":[1]}` is 2). Real webhooks stay under 10. The journal wraps values
/// read from a body a few levels deeper (key derivation, material, batch
/// items), and every one of those payloads must stay readable by parsers that
/// stop at 128 (`serde_json`) or at 64 (.NET's default) for a downstream: 64
/// leaves half of `serde_json`'s limit to the wrapping.
pub const MAX_BODY_DEPTH: usize = 64;

/// Depth bound for reading journal payloads back. Nothing ever written goes
/// past ~140 (bodies were parsed with `serde_json`'s limit of 128 before
/// [`MAX_BODY_DEPTH`]); the bound only keeps a corrupt row from exhausting the
/// stack.
pub const MAX_STORED_DEPTH: usize = 512;

/// What a reading checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_depth: usize,
    pub reject_duplicates: bool,
    /// Refuse a string or member name holding U+0000 (`\u0000`).
    pub reject_nul: bool,
}

impl Limits {
    /// What a delivery body must satisfy to be keyed.
    pub const BODY: Limits = Limits {
        max_depth: MAX_BODY_DEPTH,
        reject_duplicates: true,
        reject_nul: true,
    };
    /// What reading a stored journal payload checks.
    pub const STORED: Limits = Limits {
        max_depth: MAX_STORED_DEPTH,
        reject_duplicates: false,
        reject_nul: false,
    };
}

/// Why a text was not read into a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("nested deeper than {limit} levels")]
    TooDeep { limit: usize },
    #[error("member name {name:?} appears twice in one object")]
    DuplicateMember { name: String },
    /// JSON allows `\u0000` in a string, but PostgreSQL stores no text
    /// holding it: a value read from such a body could reach no column, and
    /// a row refused at the commit would fail every delivery of its batch.
    #[error("a string or member name holds U+0000")]
    Nul,
    #[error("not JSON: {0}")]
    Syntax(String),
}

/// Parses `text` as one JSON value under `limits`. The first problem met,
/// reading left to right, is the one reported.
pub fn parse(text: &str, limits: Limits) -> Result<Value, Refused> {
    let found = Cell::new(None);
    let mut de = serde_json::Deserializer::from_str(text);
    // Our own bound is the one that applies (and is below 128 for bodies).
    de.disable_recursion_limit();
    let seed = Seed {
        limits,
        depth: 0,
        found: &found,
    };
    let parsed = seed.deserialize(&mut de).and_then(|value| {
        de.end()?;
        Ok(value)
    });
    match (parsed, found.take()) {
        (Ok(value), _) => Ok(value),
        (Err(_), Some(refused)) => Err(refused),
        (Err(error), None) => Err(Refused::Syntax(error.to_string())),
    }
}

/// Builds a `serde_json::Value` exactly as `serde_json` would, one level at
/// `depth`, recording in `found` why it stopped.
#[derive(Clone, Copy)]
struct Seed<'f> {
    limits: Limits,
    depth: usize,
    found: &'f Cell<Option<Refused>>,
}

impl Seed<'_> {
    fn refuse<E: de::Error>(self, refused: Refused) -> E {
        let error = E::custom(&refused);
        self.found.set(Some(refused));
        error
    }

    /// Refuses a text the limits do not let through.
    fn check_text<E: de::Error>(self, text: &str) -> Result<(), E> {
        if self.limits.reject_nul && text.contains('\0') {
            return Err(self.refuse(Refused::Nul));
        }
        Ok(())
    }

    /// The seed for the values inside a container, or why there is none.
    fn enter<E: de::Error>(self) -> Result<Self, E> {
        if self.depth >= self.limits.max_depth {
            return Err(self.refuse(Refused::TooDeep {
                limit: self.limits.max_depth,
            }));
        }
        Ok(Self {
            depth: self.depth + 1,
            ..self
        })
    }
}

impl<'de> DeserializeSeed<'de> for Seed<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        // JSON text has no NaN or infinity; serde_json maps them to null too.
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        self.check_text(v)?;
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        self.check_text(&v)?;
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let inner = self.enter()?;
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(inner)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let inner = self.enter()?;
        let mut members = Map::new();
        while let Some(name) = map.next_key::<String>()? {
            self.check_text(&name)?;
            let value = map.next_value_seed(inner)?;
            if self.limits.reject_duplicates && members.contains_key(&name) {
                return Err(self.refuse(Refused::DuplicateMember { name }));
            }
            members.insert(name, value);
        }
        Ok(Value::Object(members))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(depth: usize) -> String {
        format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
    }

    #[test]
    fn the_depth_limit_counts_containers_and_holds_exactly() {
        assert_eq!(parse("1", Limits::BODY), Ok(serde_json::json!(1)));
        assert!(parse(&nested(MAX_BODY_DEPTH), Limits::BODY).is_ok());
        assert_eq!(
            parse(&nested(MAX_BODY_DEPTH + 1), Limits::BODY),
            Err(Refused::TooDeep {
                limit: MAX_BODY_DEPTH
            })
        );
        let objects = format!(
            "{}1{}",
            r#"{"a":"#.repeat(MAX_BODY_DEPTH + 1),
            "}".repeat(MAX_BODY_DEPTH + 1)
        );
        assert!(matches!(
            parse(&objects, Limits::BODY),
            Err(Refused::TooDeep { .. })
        ));
    }

    #[test]
    fn bodies_deeper_than_serde_json_allows_are_too_deep_not_syntax_errors() {
        for depth in [127, 128, 129, 300, 10_000] {
            assert!(
                matches!(
                    parse(&nested(depth), Limits::BODY),
                    Err(Refused::TooDeep { .. })
                ),
                "{depth}"
            );
        }
    }

    #[test]
    fn stored_payloads_read_past_serde_json_limit() {
        assert!(serde_json::from_str::<Value>(&nested(140)).is_err());
        let value = parse(&nested(140), Limits::STORED).expect("read");
        let text = serde_json::to_string(&value).expect("write");
        assert_eq!(text, nested(140));
        assert!(matches!(
            parse(&nested(MAX_STORED_DEPTH + 1), Limits::STORED),
            Err(Refused::TooDeep { .. })
        ));
    }

    #[test]
    fn a_nul_in_a_body_string_or_member_name_is_refused_but_read_back_from_storage() {
        for text in [
            r#"{"a":"x\u0000"}"#,
            r#"{"a":["\u0000"]}"#,
            r#"{"x\u0000":1}"#,
            r#""\u0000""#,
        ] {
            assert_eq!(parse(text, Limits::BODY), Err(Refused::Nul), "{text}");
            let stored = parse(text, Limits::STORED).expect("stored rows stay readable");
            assert!(stored.to_string().contains(r"\u0000"), "{text}");
        }
        // Every other control character is text like any other.
        let others = r#"{"a":"\u0001\u001f\t\n"}"#;
        assert!(parse(others, Limits::BODY).is_ok());
    }

    #[test]
    fn duplicate_member_names_are_refused_at_any_depth() {
        for text in [
            r#"{"amount":1,"amount":2}"#,
            r#"{"data":{"object":{"amount":1,"currency":"EUR","amount":2}}}"#,
            r#"[{"a":1},{"b":[{"c":1,"c":1}]}]"#,
            // The same name once escaped: equal after unescaping.
            r#"{"amount":1,"\u0061mount":2}"#,
        ] {
            assert!(
                matches!(
                    parse(text, Limits::BODY),
                    Err(Refused::DuplicateMember { ref name }) if name.ends_with('c') || name == "amount"
                ),
                "{text}: {:?}",
                parse(text, Limits::BODY)
            );
        }
        // Same name in sibling objects is not a duplicate.
        assert!(parse(r#"[{"a":1},{"a":1}]"#, Limits::BODY).is_ok());
        assert!(parse(r#"{"a":{"a":1}}"#, Limits::BODY).is_ok());
        // Stored payloads keep serde_json's reading.
        assert_eq!(
            parse(r#"{"a":1,"a":2}"#, Limits::STORED),
            Ok(serde_json::json!({"a": 2}))
        );
    }

    #[test]
    fn anything_else_wrong_is_a_syntax_error() {
        for text in ["", "{", "{not json", "[1,]", "1 2", "\"\\ud800\""] {
            assert!(
                matches!(parse(text, Limits::BODY), Err(Refused::Syntax(_))),
                "{text}"
            );
        }
    }

    #[test]
    fn what_passes_reads_exactly_as_serde_json_reads_it() {
        for text in [
            r#"{"type":"refund.created","amount":1500,"ratio":0.1,"neg":-3,"big":18446744073709551615}"#,
            r#"[1e400, -0.0, 1.7976931348623157e308, 5e-324, 123456789012345678901234567890]"#,
            r#"{"s":"caf\u00e9 \ud83d\ude00","n":null,"t":true,"f":false,"e":{},"a":[]}"#,
            "  \n\t\"x\"  ",
        ] {
            let expected: Result<Value, _> = serde_json::from_str(text);
            match expected {
                Ok(expected) => assert_eq!(parse(text, Limits::BODY), Ok(expected), "{text}"),
                Err(_) => assert!(parse(text, Limits::BODY).is_err(), "{text}"),
            }
        }
    }

    mod properties {
        use proptest::prelude::*;
        use serde_json::{Map, Value, json};

        use super::super::{Limits, Refused, parse};
        use crate::domain::delivery::BodyParse;

        fn arb_json() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                any::<i64>().prop_map(|n| json!(n)),
                any::<f64>()
                    .prop_filter("finite", |f| f.is_finite())
                    .prop_map(|f| json!(f)),
                "\\PC{0,8}".prop_map(Value::String),
            ];
            leaf.prop_recursive(4, 32, 4, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                    prop::collection::btree_map("\\PC{1,4}", inner, 0..4)
                        .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
                ]
            })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]

            /// Any bytes: classified without panic, and whatever is read as
            /// JSON is what serde_json reads.
            #[test]
            fn any_bytes_are_classified_and_agree_with_serde_json(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
                let (parse_kind, value) = BodyParse::classify(&bytes);
                if let Some(value) = value {
                    prop_assert_eq!(parse_kind, BodyParse::Json);
                    let theirs: Value = serde_json::from_slice(&bytes).expect("serde_json reads it too");
                    prop_assert_eq!(value, theirs);
                }
            }

            /// Any JSON text of any shape within the limit reads back to its value.
            #[test]
            fn any_json_within_the_limit_reads_back_to_itself(value in arb_json()) {
                let text = serde_json::to_string(&value).unwrap();
                prop_assert_eq!(parse(&text, Limits::BODY), Ok(value));
            }

            /// A member named twice, at any depth, is refused.
            #[test]
            fn a_member_named_twice_is_refused_at_any_depth(
                value in arb_json(),
                name in "\\PC{1,4}",
                depth in 0usize..5,
            ) {
                let mut text = format!("{{{}:1,{}:{}}}",
                    serde_json::to_string(&name).unwrap(),
                    serde_json::to_string(&name).unwrap(),
                    serde_json::to_string(&value).unwrap());
                for _ in 0..depth {
                    text = format!("[{text}]");
                }
                let refused = matches!(parse(&text, Limits::BODY), Err(Refused::DuplicateMember { .. }));
                prop_assert!(refused);
            }
        }
    }
}
