//! The resource a delivery is about (a payment, a charge): the value search
//! finds it by. Read at the first configured path present; a value a strategy
//! of the provider declares `sensitive` is kept only as its keyed hash, so a
//! search hashes the query the same way ([`ResourcePaths::query`]).
//!
//! Identity never rests on it: a resource id proves nothing about an effect.

use serde_json::Value;

use super::field::FieldRef;
use super::key::KeySecret;

/// Where the resource is read when neither the source nor its provider says:
/// a payment id at the top, or Stripe-shaped `data.object` references.
pub const DEFAULT_RESOURCE_PATHS: [&str; 4] = [
    "$.payment_id",
    "$.data.object.payment_intent",
    "$.data.object.charge",
    "$.data.object.id",
];

/// The paths tried in order, each marked sensitive or not.
#[derive(Debug, Clone, Default)]
pub struct ResourcePaths {
    paths: Vec<(FieldRef, bool)>,
}

impl ResourcePaths {
    /// `paths` in order; `sensitive` are the provider's sensitive body paths.
    /// A path at or under a node a sensitive one may select is sensitive
    /// (`may_hold`): `$.customer.email` under `$.customer`, `$..email` or
    /// `$.*.email` alike.
    pub fn new(paths: &[FieldRef], sensitive: &[&FieldRef]) -> Self {
        Self {
            paths: paths
                .iter()
                .map(|p| {
                    let hidden = sensitive.iter().any(|s| may_hold(s, p));
                    (p.clone(), hidden)
                })
                .collect(),
        }
    }

    /// The built-in defaults.
    pub fn defaults() -> Vec<FieldRef> {
        DEFAULT_RESOURCE_PATHS
            .iter()
            .filter_map(|p| FieldRef::parse(p).ok())
            .collect()
    }

    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.paths.iter().map(|(p, _)| p.as_str())
    }

    /// The searchable value of the first path present: a string or number as
    /// text, sealed when sensitive.
    pub fn value(
        &self,
        headers: &[(String, String)],
        body: Option<&Value>,
        secret: &KeySecret,
    ) -> Option<String> {
        self.paths.iter().find_map(|(path, sensitive)| {
            let text = searchable(&path.resolve(headers, body)?)?;
            Some(if *sensitive {
                sealed(&text, secret)
            } else {
                text
            })
        })
    }

    /// `text` as it is stored when it names the resource another way (a
    /// legacy handler's log): sealed when any path is sensitive, since which
    /// path it came from is not known, else as it is.
    pub fn stored(&self, text: &str, secret: &KeySecret) -> String {
        if self.seals_any() {
            sealed(text, secret)
        } else {
            text.to_owned()
        }
    }

    /// Whether a value read at some path is sealed.
    pub fn seals_any(&self) -> bool {
        self.paths.iter().any(|(_, sensitive)| *sensitive)
    }

    /// A resource Unicity stored for a delivery (`value`) in the form a
    /// legacy log's resource is stored in (`stored`), so that the two
    /// compare: sealed when any path is sensitive, unless it is already.
    pub fn comparable(&self, live: &str, secret: &KeySecret) -> String {
        if KeySecret::is_sealed(live) {
            live.to_owned()
        } else {
            self.stored(live, secret)
        }
    }

    /// What a stored resource equal to `q` can look like: `q` itself, and
    /// its keyed hash (a sensitive value).
    pub fn query(q: &str, secret: &KeySecret) -> [String; 2] {
        [q.to_owned(), sealed(q, secret)]
    }
}

/// One step of a singular path: a member's name or an array's index.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Name(String),
    Index(usize),
}

/// Whether `sensitive` may select the node `path` reads, or one above it,
/// in some body. Decided on the one document that holds just that node
/// (`{"customer": {"email": …}}` for `$.customer.email`): a sensitive path
/// that selects it, or a node above it, there. When that cannot be told (a
/// path that is not singular, a filter, which depends on values) it may.
fn may_hold(sensitive: &FieldRef, path: &FieldRef) -> bool {
    let (Some(query), Some(_)) = (sensitive.body_path(), path.body_path()) else {
        return false;
    };
    let Some(steps) = steps(path.as_str()) else {
        return true;
    };
    if depends_on_the_body(sensitive.as_str()) {
        return true;
    }
    let document =
        steps
            .iter()
            .rev()
            .fold(Value::String(String::new()), |inner, step| match step {
                Step::Name(name) => Value::Object([(name.clone(), inner)].into_iter().collect()),
                Step::Index(n) => {
                    let mut items = vec![Value::Null; *n];
                    items.push(inner);
                    Value::Array(items)
                }
            });
    query.query_located(&document).locations().any(|location| {
        location.len() <= steps.len()
            && location
                .iter()
                .zip(&steps)
                .all(|(at, step)| match (at, step) {
                    (serde_json_path::PathElement::Name(a), Step::Name(b)) => a == b,
                    (serde_json_path::PathElement::Index(a), Step::Index(b)) => a == b,
                    _ => false,
                })
    })
}

/// Whether what `sensitive` selects depends on more than where a node is:
/// a filter (on values), an index or slice counted from the end, or a
/// slice (on the array's length). Such a path may select anything.
fn depends_on_the_body(sensitive: &str) -> bool {
    let mut before = ' ';
    for c in sensitive.chars().filter(|c| !c.is_whitespace()) {
        if c == '?' || c == ':' || (c == '-' && matches!(before, '[' | ',')) {
            return true;
        }
        before = c;
    }
    false
}

/// Array positions a path may name and still be decided on a document
/// that holds it: past this, it may hold (nothing is built that large).
const LARGEST_INDEX: usize = 10_000;

/// The steps of a singular path written with `.name`, `['name']` or
/// `[index]`; `None` for anything else.
fn steps(path: &str) -> Option<Vec<Step>> {
    let mut rest = path.strip_prefix('$')?;
    let mut steps = Vec::new();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            let name = &after[..end];
            let plain = !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c == '_' || c.is_alphanumeric());
            if !plain {
                return None;
            }
            steps.push(Step::Name(name.to_owned()));
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix("['") {
            let end = after.find("']")?;
            let name = &after[..end];
            if name.contains(['\\', '\'']) {
                return None;
            }
            steps.push(Step::Name(name.to_owned()));
            rest = &after[end + 2..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']')?;
            let index: usize = after[..end].parse().ok()?;
            if index > LARGEST_INDEX {
                return None;
            }
            steps.push(Step::Index(index));
            rest = &after[end + 1..];
        } else {
            return None;
        }
    }
    Some(steps)
}

fn searchable(value: &Value) -> Option<String> {
    let text = match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    crate::domain::search::searchable(&text)
        .is_some()
        .then_some(text)
}

fn sealed(text: &str, secret: &KeySecret) -> String {
    match secret.seal(&Value::String(text.to_owned())) {
        Value::String(s) => s,
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn refs(paths: &[&str]) -> Vec<FieldRef> {
        paths.iter().map(|p| FieldRef::parse(p).unwrap()).collect()
    }

    #[test]
    fn the_first_present_path_gives_the_resource() {
        let secret = KeySecret::from_bytes(b"0123456789abcdef").unwrap();
        let paths = ResourcePaths::new(&ResourcePaths::defaults(), &[]);
        let stripe =
            json!({"data": {"object": {"id": "re_1", "charge": "ch_1", "payment_intent": "pi_1"}}});
        assert_eq!(
            paths.value(&[], Some(&stripe), &secret).as_deref(),
            Some("pi_1")
        );
        let intent = json!({"data": {"object": {"id": "pi_2", "payment_intent": null}}});
        assert_eq!(
            paths.value(&[], Some(&intent), &secret).as_deref(),
            Some("pi_2")
        );
        let numeric = json!({"payment_id": 42});
        assert_eq!(
            paths.value(&[], Some(&numeric), &secret).as_deref(),
            Some("42")
        );
        assert_eq!(
            paths.value(&[], Some(&json!({"payment_id": {}})), &secret),
            None
        );
        assert_eq!(paths.value(&[], None, &secret), None);
    }

    #[test]
    fn a_sensitive_resource_is_stored_and_searched_as_its_keyed_hash() {
        let secret = KeySecret::from_bytes(b"0123456789abcdef").unwrap();
        let sensitive = refs(&["$.customer"]);
        let sensitive: Vec<&FieldRef> = sensitive.iter().collect();
        let paths = ResourcePaths::new(&refs(&["$.customer.email", "$.payment_id"]), &sensitive);
        let body = json!({"customer": {"email": "ann@example.com"}, "payment_id": "pay_1"});
        let stored = paths.value(&[], Some(&body), &secret).unwrap();
        assert!(stored.starts_with("hmac:"), "{stored}");
        assert!(!stored.contains("ann@example.com"));
        assert!(ResourcePaths::query("ann@example.com", &secret).contains(&stored));
        // A sibling whose name merely starts like the sensitive one is clear.
        let clear = ResourcePaths::new(&refs(&["$.customer_id"]), &sensitive);
        let body = json!({"customer_id": "cus_1"});
        assert_eq!(
            clear.value(&[], Some(&body), &secret).as_deref(),
            Some("cus_1")
        );
    }

    #[test]
    fn a_path_a_wildcard_or_descendant_sensitive_path_may_select_is_sensitive() {
        let hidden = |sensitive: &str, path: &str| {
            let sensitive = refs(&[sensitive]);
            let sensitive: Vec<&FieldRef> = sensitive.iter().collect();
            ResourcePaths::new(&refs(&[path]), &sensitive).paths[0].1
        };
        assert!(hidden("$..email", "$.customer.email"));
        assert!(hidden("$..shopperEmail", "$.additionalData.shopperEmail"));
        assert!(hidden("$.customers[*].email", "$.customers[0].email"));
        assert!(hidden("$.*", "$.customer.email"), "a node above it");
        assert!(hidden("$['customer']", "$.customer['email']"));
        assert!(hidden("$.customer", "$.customer[2]"));
        assert!(hidden("$..[?@.kind == 'email'].value", "$.contact.value"));
        assert!(hidden("$..email", "$..email"), "not singular: it may");
        assert!(hidden("$.contacts[-2].email", "$.contacts[0].email"));
        assert!(hidden("$.contacts[:-1].email", "$.contacts[0].email"));
        assert!(hidden("$.contacts[0, -1].email", "$.contacts[3].email"));
        assert!(hidden("$.contacts[*].email", "$.contacts[100000000].email"));
        assert!(!hidden("$..email", "$.customer_email"));
        assert!(!hidden("$..iban", "$.payment_id"));
        assert!(!hidden("$.customers[*].email", "$.customers[0].name"));
        assert!(!hidden("$.customer", "header:customer"));
    }
}
