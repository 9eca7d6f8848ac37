//! Values read from a delivery or an operation: a dotted field of the
//! delivery's body, a string or number as text.

use serde_json::Value;

/// A string or number as text.
pub(super) fn text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The delivery's field at a dotted path (`data.object.amount`).
pub(super) fn field<'v>(event: &'v Value, name: &str) -> Option<&'v Value> {
    name.split('.').try_fold(event, |v, part| v.get(part))
}
