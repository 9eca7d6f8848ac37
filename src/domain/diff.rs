//! A field-level diff of two JSON documents (a case's delivery against its
//! reference), for people: each leaf that was added, removed or changed,
//! with its path. Objects are compared member by member, arrays position by
//! position (a list is a sequence: reordering is a change).

use serde::Serialize;
use serde_json::Value;

/// What happened to one field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    Added,
    Removed,
    Changed,
}

/// One field that differs, `path` in JSONPath form (`$.data.amount`,
/// `$.items[0].sku`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldChange {
    pub path: String,
    pub change: Change,
    pub old: Option<Value>,
    pub new: Option<Value>,
}

/// Every leaf of `new` that differs from `old`, in document order (members
/// sorted by name).
pub fn diff(old: &Value, new: &Value) -> Vec<FieldChange> {
    let mut out = Vec::new();
    walk("$".to_owned(), Some(old), Some(new), &mut out);
    out
}

fn walk(path: String, old: Option<&Value>, new: Option<&Value>, out: &mut Vec<FieldChange>) {
    match (old, new) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let mut names: Vec<&String> = a.keys().chain(b.keys()).collect();
            names.sort();
            names.dedup();
            for name in names {
                walk(member(&path, name), a.get(name), b.get(name), out);
            }
        }
        (Some(Value::Array(a)), Some(Value::Array(b))) => {
            for i in 0..a.len().max(b.len()) {
                walk(format!("{path}[{i}]"), a.get(i), b.get(i), out);
            }
        }
        (Some(a), Some(b)) if a == b => {}
        (old, new) => {
            let change = match (old, new) {
                (None, _) => Change::Added,
                (_, None) => Change::Removed,
                _ => Change::Changed,
            };
            out.push(FieldChange {
                path,
                change,
                old: old.cloned(),
                new: new.cloned(),
            });
        }
    }
}

/// `$.name`, or `$['odd name']` when the name is not a plain identifier.
fn member(path: &str, name: &str) -> String {
    let plain = !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit());
    if plain {
        format!("{path}.{name}")
    } else {
        format!(
            "{path}['{}']",
            name.replace('\\', "\\\\").replace('\'', "\\'")
        )
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn given_two_refunds_when_compared_then_each_differing_leaf_is_named() {
        let old = json!({"amount": 700, "currency": "EUR", "lines": [{"sku": "a"}], "gone": 1});
        let new = json!({"amount": 900, "currency": "EUR", "lines": [{"sku": "a"}, {"sku": "b"}], "odd key": true});
        let changes = diff(&old, &new);
        let seen: Vec<(&str, Change)> = changes
            .iter()
            .map(|c| (c.path.as_str(), c.change))
            .collect();
        assert_eq!(
            seen,
            [
                ("$.amount", Change::Changed),
                ("$.gone", Change::Removed),
                ("$.lines[1]", Change::Added),
                ("$['odd key']", Change::Added),
            ]
        );
        assert_eq!(changes[0].old, Some(json!(700)));
        assert_eq!(changes[0].new, Some(json!(900)));
    }

    #[test]
    fn given_equal_documents_then_nothing_differs_and_order_of_lists_matters() {
        let doc = json!({"a": [1, 2], "b": {"c": null}});
        assert!(diff(&doc, &doc).is_empty());
        let swapped = json!({"a": [2, 1], "b": {"c": null}});
        assert_eq!(diff(&doc, &swapped).len(), 2, "a list is a sequence");
    }

    #[test]
    fn a_type_change_is_a_change_of_the_whole_value() {
        let changes = diff(&json!({"a": {"b": 1}}), &json!({"a": [1]}));
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].path, "$.a");
        assert_eq!(changes[0].change, Change::Changed);
    }
}
