//! What Unicity knows of a provider before any strategy runs: where its
//! delivery id travels (transport identity), how to read the event type, and
//! whether one delivery is a batch of items keyed one by one.
//!
//! An event type that cannot be read is reported, never guessed.

use super::field::FieldRef;
use super::normalize::VolatileField;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderDef {
    pub name: String,
    /// Where the delivery id travels (`header:webhook-id`), first present wins.
    /// Empty, or none present: the transport identity is the raw-body SHA-256.
    #[serde(default)]
    pub transport: Vec<FieldRef>,
    /// A header read under another name when it is absent: `{ "webhook-id" =
    /// "svix-id" }` makes every `header:webhook-id` reference (transport and
    /// strategies alike) read `svix-id` when no `webhook-id` was sent, so one
    /// delivery id keys alike under either spelling.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub header_aliases: BTreeMap<String, String>,
    /// Path selecting the items of a batch delivery (`$.events[*]`). A body in
    /// which it selects nothing is a single event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<FieldRef>,
    /// Alternatives tried in order; the first whose required parts are all
    /// present gives the event type.
    pub event_type: Vec<EventTypeRule>,
    /// Per-delivery body fields (attempt counters, signatures) left out of the
    /// transport body fingerprint, each with its reason.
    #[serde(default)]
    pub volatile: Vec<VolatileField>,
    /// Where the resource a delivery is about (a payment id) is read, first
    /// present wins; searched by, never keyed on. Empty: the defaults
    /// (`resource::DEFAULT_RESOURCE_PATHS`). A source may set its own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource: Vec<FieldRef>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
}

/// Event type = the parts' string values joined with `separator` (default `.`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventTypeRule {
    pub parts: Vec<EventTypePart>,
    #[serde(default = "default_separator")]
    pub separator: String,
}

fn default_separator() -> String {
    ".".to_owned()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventTypePart {
    pub field: FieldRef,
    /// An optional part is left out when absent (GitHub's `action`).
    #[serde(default)]
    pub optional: bool,
}

/// Why no event type could be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventTypeMissing {
    /// The required references that were absent or not strings, per alternative.
    pub missing: Vec<String>,
}

impl ProviderDef {
    pub fn validate(&self) -> Result<(), String> {
        if self.name.trim().is_empty() {
            return Err("provider with an empty name".to_owned());
        }
        if self.event_type.iter().all(|r| r.parts.is_empty()) {
            return Err(format!("provider {}: no event_type rule", self.name));
        }
        if let Some(v) = self.volatile.iter().find(|v| v.reason.trim().is_empty()) {
            return Err(format!(
                "provider {}: volatile `{}` has no reason",
                self.name, v.path
            ));
        }
        Ok(())
    }

    /// The event type of one event body (a whole delivery or one batch item).
    pub fn event_type(
        &self,
        headers: &[(String, String)],
        body: &Value,
    ) -> Result<String, EventTypeMissing> {
        let mut missing = Vec::new();
        'rules: for rule in &self.event_type {
            let mut parts = Vec::new();
            for part in &rule.parts {
                match part.field.resolve(headers, Some(body)) {
                    Some(Value::String(s)) if !s.is_empty() => parts.push(s),
                    _ if part.optional => {}
                    _ => {
                        missing.push(part.field.to_string());
                        continue 'rules;
                    }
                }
            }
            if !parts.is_empty() {
                return Ok(parts.join(&rule.separator));
            }
        }
        Err(EventTypeMissing { missing })
    }

    /// `headers` plus, for each alias whose header was not sent, the alias's
    /// value under the header's name; `None` when no alias applies.
    pub fn with_header_aliases(
        &self,
        headers: &[(String, String)],
    ) -> Option<Vec<(String, String)>> {
        let find = |name: &str| crate::domain::delivery::header(headers, name);
        let added: Vec<(String, String)> = self
            .header_aliases
            .iter()
            .filter(|(name, _)| find(name).is_none())
            .filter_map(|(name, alias)| Some((name.to_ascii_lowercase(), find(alias)?.to_owned())))
            .collect();
        if added.is_empty() {
            return None;
        }
        Some(headers.iter().cloned().chain(added).collect())
    }

    /// The batch items, when this delivery is a batch.
    /// The one event of a batch of one (`{"events": [e]}` is `e`), which a
    /// delivery's resource, look-ups and effect read as a larger batch's
    /// items are read; `None` for anything else.
    pub fn batch_of_one(&self, body: &Value) -> Option<Value> {
        let mut items = self.batch_items(body)?;
        (items.len() == 1).then(|| items.remove(0))
    }

    pub fn batch_items(&self, body: &Value) -> Option<Vec<Value>> {
        let path = self.items.as_ref()?;
        match path.resolve(&[], Some(body))? {
            Value::Array(items) if !items.is_empty() => Some(items),
            Value::Array(_) => None,
            single => Some(vec![single]),
        }
    }
}
