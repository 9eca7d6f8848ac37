//! Normalisation a strategy may apply on top of the canonical form, and only
//! to the fields it names: drop volatile fields (each with a written reason),
//! rewrite date fields to one form, sort arrays declared unordered. Anything
//! not named is left exactly as received: arrays stay sequences.
//!
//! Order of application: volatile removal, dates, sensitive values (replaced
//! by their HMAC), unordered sorting. Sorting comes last so that elements are
//! compared in their final form.

use super::field::FieldRef;
use super::jcs;
use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::cmp::Ordering;

/// Normalisation rules of a strategy, as declared in TOML.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NormalizeRules {
    /// Fields removed before anything is read; each needs a reason.
    #[serde(default)]
    pub volatile: Vec<VolatileField>,
    /// Fields holding an instant (RFC 3339 text or unix seconds), rewritten to
    /// RFC 3339 UTC (`2024-01-02T03:04:05Z`, fraction only when non-zero).
    #[serde(default)]
    pub dates: Vec<FieldRef>,
    /// Arrays whose order carries no meaning; sorted by canonical form.
    #[serde(default)]
    pub unordered: Vec<FieldRef>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VolatileField {
    pub path: FieldRef,
    /// Why removing it cannot merge two distinct operations. Required.
    pub reason: String,
}

/// One step of a normalised path, owned so the body can be mutated.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Step {
    Index(usize),
    Name(String),
}

/// Where in `body` each node the path selects is, as the steps to it; none
/// for a path that reads no body.
pub fn locate(path: &FieldRef, body: &Value) -> Vec<Vec<Step>> {
    let Some(p) = path.body_path() else {
        return Vec::new();
    };
    p.query_located(body)
        .locations()
        .map(|loc| {
            loc.iter()
                .map(|e| match e.as_index() {
                    Some(i) => Step::Index(i),
                    None => Step::Name(e.as_name().unwrap_or_default().to_owned()),
                })
                .collect()
        })
        .collect()
}

/// The node `steps` lead to in `body`.
pub fn node<'v>(body: &'v Value, steps: &[Step]) -> Option<&'v Value> {
    steps.iter().try_fold(body, |v, step| match step {
        Step::Index(i) => v.get(*i),
        Step::Name(n) => v.get(n.as_str()),
    })
}

fn node_mut<'v>(body: &'v mut Value, steps: &[Step]) -> Option<&'v mut Value> {
    steps.iter().try_fold(body, |v, step| match step {
        Step::Index(i) => v.get_mut(*i),
        Step::Name(n) => v.get_mut(n.as_str()),
    })
}

/// Removes every node the path selects (deepest and last first, so indices
/// stay valid while removing).
pub fn remove_all(body: &mut Value, path: &FieldRef) {
    let mut locations = locate(path, body);
    locations.sort_by(|a, b| b.cmp(a));
    for steps in locations {
        let Some((last, parent)) = steps.split_last() else {
            continue; // never remove the root
        };
        match (node_mut(body, parent), last) {
            (Some(Value::Object(map)), Step::Name(n)) => {
                map.remove(n);
            }
            (Some(Value::Array(items)), Step::Index(i)) if *i < items.len() => {
                items.remove(*i);
            }
            _ => {}
        }
    }
}

/// Replaces every node the path selects with `f(node)`.
pub fn map_all(body: &mut Value, path: &FieldRef, f: &dyn Fn(&Value) -> Value) {
    for steps in locate(path, body) {
        if let Some(node) = node_mut(body, &steps) {
            *node = f(node);
        }
    }
}

/// RFC 3339 UTC form of an instant given as RFC 3339 text (any offset) or
/// integer unix seconds; anything else is left untouched (never guessed).
pub fn normalize_date(v: &Value) -> Value {
    let parsed: Option<DateTime<Utc>> = match v {
        Value::String(s) => DateTime::parse_from_rfc3339(s.trim())
            .ok()
            .map(|d| d.with_timezone(&Utc)),
        Value::Number(n) => n.as_i64().and_then(|s| DateTime::from_timestamp(s, 0)),
        _ => None,
    };
    match parsed {
        Some(d) => Value::String(d.to_rfc3339_opts(SecondsFormat::AutoSi, true)),
        None => v.clone(),
    }
}

fn sort_array(v: &Value) -> Value {
    match v {
        Value::Array(items) => {
            let mut keyed: Vec<(String, Value)> = items
                .iter()
                .map(|i| (jcs::key_string(i), i.clone()))
                .collect();
            keyed.sort_by(|a, b| cmp_utf16(&a.0, &b.0));
            Value::Array(keyed.into_iter().map(|(_, v)| v).collect())
        }
        other => other.clone(),
    }
}

fn cmp_utf16(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

impl NormalizeRules {
    /// No rule: the canonical form is the normalised form.
    pub fn is_empty(&self) -> bool {
        self.volatile.is_empty() && self.dates.is_empty() && self.unordered.is_empty()
    }

    /// Applies volatile removal and date rewriting (the steps before
    /// sensitive values are replaced).
    pub fn apply_before_sensitive(&self, body: &mut Value) {
        for v in &self.volatile {
            remove_all(body, &v.path);
        }
        for d in &self.dates {
            map_all(body, d, &normalize_date);
        }
    }

    /// Sorts the arrays declared unordered.
    pub fn apply_unordered(&self, body: &mut Value) {
        for u in &self.unordered {
            map_all(body, u, &sort_array);
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        for v in &self.volatile {
            if v.reason.trim().is_empty() {
                return Err(format!("volatile field `{}` has no reason", v.path));
            }
        }
        let all = self
            .volatile
            .iter()
            .map(|v| &v.path)
            .chain(&self.dates)
            .chain(&self.unordered);
        for p in all {
            if p.is_header() {
                return Err(format!("normalisation applies to the body, not `{p}`"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn r(p: &str) -> FieldRef {
        FieldRef::parse(p).unwrap()
    }

    #[test]
    fn given_volatile_fields_when_applied_then_only_they_disappear() {
        let rules = NormalizeRules {
            volatile: vec![VolatileField {
                path: r("$.items[*].sent_at"),
                reason: "attempt time".into(),
            }],
            ..Default::default()
        };
        let mut body =
            json!({"items": [{"sent_at": 1, "a": 1}, {"sent_at": 2, "a": 2}], "sent_at": 3});
        rules.apply_before_sensitive(&mut body);
        assert_eq!(body, json!({"items": [{"a": 1}, {"a": 2}], "sent_at": 3}));
    }

    #[test]
    fn given_array_elements_when_removed_then_indices_stay_valid() {
        let mut body = json!({"a": [0, 1, 2, 3]});
        remove_all(&mut body, &r("$.a[0,2]"));
        assert_eq!(body, json!({"a": [1, 3]}));
    }

    #[test]
    fn dates_from_offsets_and_unix_seconds_meet() {
        assert_eq!(
            normalize_date(&json!("2017-02-17T11:11:44+01:00")),
            json!("2017-02-17T10:11:44Z")
        );
        assert_eq!(
            normalize_date(&json!(1487326304)),
            json!("2017-02-17T10:11:44Z")
        );
        assert_eq!(
            normalize_date(&json!("2018-07-05T09:13:51.404Z")),
            json!("2018-07-05T09:13:51.404Z")
        );
        assert_eq!(normalize_date(&json!("yesterday")), json!("yesterday"));
    }

    #[test]
    fn only_declared_arrays_are_sorted() {
        let rules = NormalizeRules {
            unordered: vec![r("$.tags")],
            ..Default::default()
        };
        let mut body = json!({"tags": ["b", "a"], "lines": ["b", "a"]});
        rules.apply_unordered(&mut body);
        assert_eq!(body, json!({"tags": ["a", "b"], "lines": ["b", "a"]}));
    }

    #[test]
    fn a_volatile_field_without_reason_is_refused() {
        let rules = NormalizeRules {
            volatile: vec![VolatileField {
                path: r("$.x"),
                reason: " ".into(),
            }],
            ..Default::default()
        };
        assert!(rules.validate().is_err());
    }
}
