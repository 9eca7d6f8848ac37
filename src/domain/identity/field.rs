//! Where a value comes from: an RFC 9535 JSONPath into the body, or an HTTP
//! header written `header:<name>`.
//!
//! A reference that selects nothing, or only `null`, is *absent*: a strategy
//! that requires it is skipped. A singular path yields the value itself; a
//! path that can select several nodes (`[*]`, `..`, filters, slices, unions)
//! always yields an array of the selected values, in document order, so one
//! item and a one-element list never look alike by accident.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json_path::JsonPath;
use std::fmt;

/// A parsed field reference. Its text form is what the TOML and the journal hold.
#[derive(Debug, Clone)]
pub struct FieldRef {
    text: String,
    source: Source,
}

#[derive(Debug, Clone)]
enum Source {
    Header(String),
    Body { path: JsonPath, singular: bool },
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid field reference `{text}`: {reason}")]
pub struct FieldRefError {
    pub text: String,
    pub reason: String,
}

impl FieldRef {
    pub fn parse(text: &str) -> Result<Self, FieldRefError> {
        let err = |reason: String| FieldRefError {
            text: text.to_owned(),
            reason,
        };
        let source = if let Some(name) = text.strip_prefix("header:") {
            let name = name.trim();
            if name.is_empty() {
                return Err(err("empty header name".to_owned()));
            }
            Source::Header(name.to_ascii_lowercase())
        } else {
            let path = JsonPath::parse(text).map_err(|e| err(e.to_string()))?;
            Source::Body {
                path,
                singular: is_singular(text),
            }
        };
        Ok(Self {
            text: text.to_owned(),
            source,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn is_header(&self) -> bool {
        matches!(self.source, Source::Header(_))
    }

    /// The selected value, or `None` when absent (nothing selected, or only nulls).
    pub fn resolve(&self, headers: &[(String, String)], body: Option<&Value>) -> Option<Value> {
        match &self.source {
            Source::Header(name) => {
                crate::domain::delivery::header(headers, name).map(|v| Value::String(v.to_owned()))
            }
            Source::Body { path, singular } => {
                let nodes: Vec<Value> = path
                    .query(body?)
                    .all()
                    .into_iter()
                    .filter(|v| !v.is_null())
                    .cloned()
                    .collect();
                match (nodes.len(), singular) {
                    (0, _) => None,
                    (_, true) => nodes.into_iter().next(),
                    (_, false) => Some(Value::Array(nodes)),
                }
            }
        }
    }

    /// Whether this is a body path that selects at most one node (no
    /// wildcard, descendant segment, filter, slice or union).
    pub fn is_singular(&self) -> bool {
        matches!(self.source, Source::Body { singular: true, .. })
    }

    /// The header's name (lower-case), when this reference reads a header.
    pub fn header_name(&self) -> Option<&str> {
        match &self.source {
            Source::Header(name) => Some(name),
            Source::Body { .. } => None,
        }
    }

    /// The JSONPath, when this reference points into the body.
    pub fn body_path(&self) -> Option<&JsonPath> {
        match &self.source {
            Source::Body { path, .. } => Some(path),
            Source::Header(_) => None,
        }
    }
}

/// A path is singular unless it holds a wildcard, descendant segment, filter,
/// slice or union outside quoted names (RFC 9535 §2.3.5.1, approximated on text).
fn is_singular(text: &str) -> bool {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut prev = '\0';
    for c in text.chars() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
        } else {
            match c {
                '\'' | '"' => quote = Some(c),
                '*' | '?' | ',' | ':' => return false,
                '.' if prev == '.' => return false,
                _ => {}
            }
        }
        prev = c;
    }
    true
}

impl fmt::Display for FieldRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl PartialEq for FieldRef {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Serialize for FieldRef {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for FieldRef {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        FieldRef::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn singular_paths_yield_the_value_and_wildcards_an_array() {
        let body = json!({"a": {"b": 1}, "items": [{"id": "x"}], "n": null});
        let one = FieldRef::parse("$.a.b").unwrap();
        assert_eq!(one.resolve(&[], Some(&body)), Some(json!(1)));
        let many = FieldRef::parse("$.items[*].id").unwrap();
        assert_eq!(many.resolve(&[], Some(&body)), Some(json!(["x"])));
        let quoted = FieldRef::parse("$['a.*']").unwrap();
        assert_eq!(quoted.resolve(&[], Some(&body)), None);
    }

    #[test]
    fn null_and_missing_are_absent() {
        let body = json!({"n": null});
        assert_eq!(
            FieldRef::parse("$.n").unwrap().resolve(&[], Some(&body)),
            None
        );
        assert_eq!(
            FieldRef::parse("$.zz").unwrap().resolve(&[], Some(&body)),
            None
        );
        assert_eq!(FieldRef::parse("$.n").unwrap().resolve(&[], None), None);
    }

    #[test]
    fn headers_are_case_insensitive() {
        let headers = vec![("webhook-id".to_owned(), "msg_1".to_owned())];
        let r = FieldRef::parse("header:Webhook-Id").unwrap();
        assert_eq!(r.resolve(&headers, None), Some(json!("msg_1")));
        assert!(r.is_header());
        assert!(FieldRef::parse("header:").is_err());
        assert!(FieldRef::parse("$[").is_err());
    }
}
