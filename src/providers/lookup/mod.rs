//! Authoritative look-ups: asking the provider's own API which operations of
//! a kind exist for a resource ("which refunds does payment P have?"), as a
//! list of `{id, amount, currency, status}`. A generic HTTP look-up configured
//! per provider and effect type:
//!
//! ```toml
//! [[lookups]]
//! provider = "norefid"
//! effect_type = "refund.*"
//! url = "https://api.example.com/payments/{payment_id}/refunds"
//! operations = "$.data[*]"          # JSONPath to the list
//! id = "$.id"                       # JSONPath within one operation
//! amount = "$.amount"
//! currency = "$.currency"
//! status = "$.status"               # optional
//! resource = "$.payment_id"         # the resource each operation is about
//! effect_resource = "payment_id"    # the delivery's resource, in its body
//! # Either may be a list, tried in order: the first path naming a value is
//! # the resource (`["$.payment_intent", "$.charge"]`).
//! auth_env = "NOREFID_API_KEY"      # optional: sent as a bearer token
//! timeout_ms = 2000
//!
//! # Which field of an operation each of the strategy's discriminants is
//! # compared with: `id`, `resource`, `amount` or `currency`.
//! [lookups.compare]
//! payment = "resource"
//! amount = "amount"
//! currency = "currency"
//! ```
//!
//! A look-up settles a case only when it can compare everything the
//! strategy discriminates on (`domain::lookup`): each discriminant needs a
//! `compare` entry, and every operation must name its resource, which must
//! be the delivery's. Otherwise the case stays for a person, with the reason.
//!
//! `{name}` in the URL is the delivery's top-level field `name` (dots reach
//! deeper: `{data.object.payment_intent}`), every byte but unreserved ones
//! percent-encoded. A value that is empty, `.` or `..` is refused: it would
//! move the URL to another of the provider's resources once the client
//! resolves dot segments. Secrets never appear in what is journaled: the
//! URL carries none, the token is a header.
//!
//! A look-up with a `list_url` also lists every operation in a time window,
//! for periodic reconciliation (see `list`).

mod breaker;
mod list;
mod url;
mod values;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

pub use breaker::Breakers;
pub use list::{EffectFields, Listing, Page};
pub(crate) use url::encode;
use url::{fill, routes_as_written};
use values::text;

use secrecy::SecretString;
use serde::Deserialize;
use serde_json::Value;
use serde_json_path::JsonPath;

use crate::domain::identity::pattern;
use crate::domain::lookup::OperationField;
use crate::domain::search::{MAX_SEARCHABLE, searchable};

/// One `[[lookups]]` table as written. A `preset` fills what is not given.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LookupFile {
    pub provider: String,
    /// Effect type pattern (`*` wildcard).
    pub effect_type: String,
    /// `stripe-refunds`: the refunds of the event's charge, as Stripe's API
    /// lists them (`GET /v1/refunds?charge=…`, the secret key as bearer
    /// token in `auth_env`).
    pub preset: Option<String>,
    pub url: Option<String>,
    pub operations: Option<String>,
    pub id: Option<String>,
    pub amount: Option<String>,
    pub currency: Option<String>,
    pub status: Option<String>,
    pub auth_env: Option<String>,
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// JSONPath within one operation to the resource it belongs to (or
    /// several, the first naming a value wins), and to when it was made
    /// (RFC 3339 or Unix seconds).
    pub resource: Option<Paths>,
    pub created_at: Option<String>,
    /// Reconciliation: a URL listing the operations made in a window
    /// (`{from}`, `{to}` as RFC 3339; `{from_unix}`, `{to_unix}` in seconds).
    pub list_url: Option<String>,
    /// JSONPath to the next page's cursor in a listing answer (none, or
    /// null: the last page), and the query parameter it is sent as.
    pub cursor: Option<String>,
    pub cursor_param: Option<String>,
    /// JSONPath to a boolean saying whether more pages follow (optional).
    pub has_more: Option<String>,
    /// Where an effect's resource, amount and currency are in the body of
    /// the delivery that asked for it (dotted paths, as in `url`; the
    /// resource's may be several, as `resource`'s).
    pub effect_resource: Option<Paths>,
    pub effect_amount: Option<String>,
    pub effect_currency: Option<String>,
    /// The strategy's discriminant names, each with the operation field
    /// (`id`, `resource`, `amount`, `currency`) it is compared with.
    #[serde(default)]
    pub compare: BTreeMap<String, String>,
}

fn default_timeout_ms() -> u64 {
    2000
}

/// One path, or several tried in order: the first that names a value is
/// the one read. A resource may be named by different fields on different
/// operations of one provider (Stripe: a refund's payment intent, else its
/// charge), and both sides of a comparison read it the same way.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Paths {
    One(String),
    Several(Vec<String>),
}

impl Paths {
    fn list(&self) -> Vec<String> {
        match self {
            Paths::One(path) => vec![path.clone()],
            Paths::Several(paths) => paths.clone(),
        }
    }

    /// The paths of `given`, else the preset's.
    fn or_preset(given: Option<&Paths>, preset: Option<&[&str]>) -> Vec<String> {
        match (given, preset) {
            (Some(given), _) => given.list(),
            (None, Some(preset)) => preset.iter().map(|p| (*p).to_owned()).collect(),
            (None, None) => Vec::new(),
        }
    }
}

/// A look-up ready to run: paths parsed, secret read.
#[derive(Clone)]
pub struct Lookup {
    pub provider: String,
    pub effect_type: String,
    url: String,
    operations: JsonPath,
    /// Where the list itself is, for `operations` written `<list>[*]`: an
    /// answer must hold an array there (an empty one included).
    list: Option<JsonPath>,
    id: JsonPath,
    amount: JsonPath,
    currency: JsonPath,
    status: Option<JsonPath>,
    /// Tried in order (`Paths`).
    resource: Vec<JsonPath>,
    created_at: Option<JsonPath>,
    auth: Option<SecretString>,
    timeout: Duration,
    /// How to list the operations of a window (reconciliation), if configured.
    pub listing: Option<Listing>,
    /// Where an effect's resource, amount and currency are in its delivery.
    pub effect_fields: EffectFields,
    /// Which operation field each of the strategy's discriminants is
    /// compared with.
    pub compare: BTreeMap<String, OperationField>,
}

impl std::fmt::Debug for Lookup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lookup")
            .field("provider", &self.provider)
            .field("effect_type", &self.effect_type)
            .field("url", &self.url)
            .field("auth", &self.auth.as_ref().map(|_| "[redacted]"))
            .finish_non_exhaustive()
    }
}

/// What a preset fills: url, operations, id, amount, currency, status,
/// and for reconciliation how to list a window.
struct Preset {
    compare: &'static [(&'static str, OperationField)],
    url: &'static str,
    operations: &'static str,
    id: &'static str,
    amount: &'static str,
    currency: &'static str,
    status: &'static str,
    resource: &'static [&'static str],
    created_at: &'static str,
    listing: list::ListingPreset,
}

/// Stripe lists refunds by creation time (`created[gte]`, `created[lt]`,
/// Unix seconds) a page at a time, the next page after the last refund's id
/// (`starting_after`) while `has_more` is true. A refund belongs to its
/// payment intent, or to its charge when it has none (a charge made through
/// the Charges API): both the listing and the webhook's refund are read so,
/// and a look-up asks for the refunds of the charge, which every refund of
/// a charge names.
const STRIPE_REFUNDS: Preset = Preset {
    // The discriminants of the Stripe refund strategies.
    compare: &[
        ("amount", OperationField::Amount),
        ("currency", OperationField::Currency),
        ("payment_intent", OperationField::Resource),
    ],
    url: "https://api.stripe.com/v1/refunds?charge={data.object.charge}&limit=100",
    operations: "$.data[*]",
    id: "$.id",
    amount: "$.amount",
    currency: "$.currency",
    status: "$.status",
    resource: &["$.payment_intent", "$.charge"],
    created_at: "$.created",
    listing: list::ListingPreset {
        list_url: "https://api.stripe.com/v1/refunds?created[gte]={from_unix}&created[lt]={to_unix}&limit=100",
        cursor: "$.data[-1].id",
        cursor_param: "starting_after",
        has_more: Some("$.has_more"),
        effect_resource: &["data.object.payment_intent", "data.object.charge"],
        effect_amount: "data.object.amount",
        effect_currency: "data.object.currency",
    },
};

fn preset(name: &str) -> Option<&'static Preset> {
    match name {
        "stripe-refunds" => Some(&STRIPE_REFUNDS),
        _ => None,
    }
}

impl LookupFile {
    /// Parses the paths and reads the secret through `env`.
    pub fn resolve(&self, env: impl Fn(&str) -> Option<String>) -> anyhow::Result<Lookup> {
        let who = &self.provider;
        let preset = match &self.preset {
            Some(name) => Some(
                preset(name)
                    .ok_or_else(|| anyhow::anyhow!("look-up for {who}: unknown preset {name:?}"))?,
            ),
            None => None,
        };
        let given = |value: &Option<String>, field: &str, from: fn(&Preset) -> &'static str| {
            value
                .clone()
                .or_else(|| preset.map(|p| from(p).to_owned()))
                .ok_or_else(|| anyhow::anyhow!("look-up for {who}: `{field}` is required"))
        };
        let url = given(&self.url, "url", |p| p.url)?;
        let path = |text: &str| {
            JsonPath::parse(text)
                .map_err(|e| anyhow::anyhow!("look-up for {who}: path {text:?}: {e}"))
        };
        let mut compare: BTreeMap<String, OperationField> = preset
            .map(|p| {
                p.compare
                    .iter()
                    .map(|(n, f)| ((*n).to_owned(), *f))
                    .collect()
            })
            .unwrap_or_default();
        for (name, field) in &self.compare {
            let field = OperationField::parse(field).ok_or_else(|| {
                anyhow::anyhow!(
                    "look-up for {who}: compare.{name} = {field:?}: an operation field is \
                     id, resource, amount or currency"
                )
            })?;
            compare.insert(name.clone(), field);
        }
        let auth = match &self.auth_env {
            Some(name) => Some(SecretString::from(env(name).ok_or_else(|| {
                anyhow::anyhow!("look-up for {}: {name} is unset", self.provider)
            })?)),
            None => None,
        };
        let operations = given(&self.operations, "operations", |p| p.operations)?;
        Ok(Lookup {
            provider: self.provider.clone(),
            effect_type: self.effect_type.clone(),
            url,
            list: operations.strip_suffix("[*]").map(path).transpose()?,
            operations: path(&operations)?,
            id: path(&given(&self.id, "id", |p| p.id)?)?,
            amount: path(&given(&self.amount, "amount", |p| p.amount)?)?,
            currency: path(&given(&self.currency, "currency", |p| p.currency)?)?,
            status: self
                .status
                .clone()
                .or_else(|| preset.map(|p| p.status.to_owned()))
                .as_deref()
                .map(path)
                .transpose()?,
            resource: Paths::or_preset(self.resource.as_ref(), preset.map(|p| p.resource))
                .iter()
                .map(|text| path(text))
                .collect::<anyhow::Result<_>>()?,
            created_at: self
                .created_at
                .clone()
                .or_else(|| preset.map(|p| p.created_at.to_owned()))
                .as_deref()
                .map(path)
                .transpose()?,
            auth,
            timeout: Duration::from_millis(self.timeout_ms.max(1)),
            listing: list::resolve(self, preset.map(|p| &p.listing))
                .map_err(|e| anyhow::anyhow!("look-up for {who}: {e}"))?,
            effect_fields: list::fields(self, preset.map(|p| &p.listing)),
            compare,
        })
    }
}

pub use crate::domain::journal::ProviderOperation as Operation;

/// What one look-up came to, journaled as is.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The URL asked (no secret in it).
    pub url: String,
    pub status: Option<u16>,
    pub latency_ms: u64,
    pub operations: Result<Vec<Operation>, String>,
}

/// The look-up configured for `provider` and `effect_type`, if any.
pub fn find<'a>(lookups: &'a [Lookup], provider: &str, effect_type: &str) -> Option<&'a Lookup> {
    lookups
        .iter()
        .find(|l| l.provider == provider && pattern::matches(&l.effect_type, effect_type))
}

impl Lookup {
    /// Asks the provider for the operations of the resource `event` names.
    pub async fn fetch(&self, http: &reqwest::Client, event: &Value) -> Answer {
        let url = match fill(&self.url, event) {
            Ok(url) => url,
            Err(missing) => {
                return Answer {
                    url: self.url.clone(),
                    status: None,
                    latency_ms: 0,
                    operations: Err(format!(
                        "the delivery's `{missing}` is missing, empty, `.` or `..`: \
                         it cannot be put in the URL"
                    )),
                };
            }
        };
        if !routes_as_written(&url) {
            return Answer {
                url,
                status: None,
                latency_ms: 0,
                operations: Err("the look-up URL would not be asked as written".to_owned()),
            };
        }
        let started = Instant::now();
        // An answer that lists in pages (the provider's listing says how)
        // is read to its last page: a first page taken for the whole would
        // count the resource's operations short, and a legitimate second
        // refund could be confirmed as the first's duplicate.
        let (pages, operations) = match &self.listing {
            Some(listing) => self.pages(http, listing, url.clone()).await,
            None => {
                let (page, answer) = self.page(http, url.clone()).await;
                (vec![page], answer.and_then(|body| self.map(&body)))
            }
        };
        // Until the whole answer was read, bodies included.
        let latency_ms = started.elapsed().as_millis() as u64;
        Answer {
            url,
            status: pages.last().and_then(|page| page.status),
            latency_ms,
            operations,
        }
    }

    /// The resource the delivery `event` is about, as the look-up reads it.
    pub fn resource_of(&self, event: &Value) -> Option<String> {
        self.effect_fields.read(event).0
    }

    /// The operations of an answer, by the configured paths. An id too long
    /// to be one (see [`MAX_SEARCHABLE`]) makes the whole answer unusable:
    /// leaving its operation out would count one operation fewer, and a
    /// duplicate could be confirmed on it.
    fn map(&self, body: &Value) -> Result<Vec<Operation>, String> {
        // A 2xx whose body holds no list (an error in another shape, an API
        // changed) is no answer: read as an empty list, a window with losses
        // in it would be taken as reconciled.
        if let Some(list) = &self.list
            && !list.query(body).first().is_some_and(Value::is_array)
        {
            return Err(format!(
                "the answer holds no list where `{list}` reads: an error, or not the shape configured"
            ));
        }
        let first = |path: &JsonPath, value: &Value| path.query(value).first().cloned();
        let operations: Vec<Operation> = self
            .operations
            .query(body)
            .all()
            .into_iter()
            .filter_map(|op| {
                let id = match first(&self.id, op)? {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                let optional = |path: &Option<JsonPath>| path.as_ref().and_then(|p| first(p, op));
                Some(Operation {
                    id,
                    amount: first(&self.amount, op),
                    currency: first(&self.currency, op),
                    status: optional(&self.status).and_then(|v| v.as_str().map(str::to_owned)),
                    resource: self
                        .resource
                        .iter()
                        .find_map(|p| first(p, op).and_then(|v| text(&v))),
                    created_at: optional(&self.created_at).and_then(|v| list::instant(&v)),
                })
            })
            .collect();
        match operations.iter().find(|op| searchable(&op.id).is_none()) {
            Some(op) => Err(format!(
                "the provider listed an operation id of {} bytes: an id has 1 to {MAX_SEARCHABLE}",
                op.id.len()
            )),
            None => Ok(operations),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn operations_are_read_by_the_configured_paths() {
        let file = LookupFile {
            provider: "p".into(),
            effect_type: "refund.*".into(),
            preset: None,
            url: Some("http://x".into()),
            operations: Some("$.data[*]".into()),
            id: Some("$.id".into()),
            amount: Some("$.amount".into()),
            currency: Some("$.currency".into()),
            status: Some("$.status".into()),
            auth_env: None,
            timeout_ms: 100,
            resource: None,
            created_at: None,
            list_url: None,
            cursor: None,
            cursor_param: None,
            has_more: None,
            effect_resource: None,
            effect_amount: None,
            effect_currency: None,
            compare: BTreeMap::new(),
        };
        let lookup = file.resolve(|_| None).unwrap();
        let body = json!({"data": [
            {"id": "re_1", "amount": 700, "currency": "EUR", "status": "succeeded"},
            {"amount": 1},
            {"id": 42, "amount": 700, "currency": "EUR"}
        ]});
        let ops = lookup.map(&body).expect("ids");
        assert_eq!(ops.len(), 2, "an operation without an id is no operation");
        // An empty list is an answer; no list at all is none.
        assert_eq!(lookup.map(&json!({"data": []})), Ok(Vec::new()));
        let error = lookup.map(&json!({"error": "rate limited"})).unwrap_err();
        assert!(error.contains("holds no list"), "{error}");
        assert_eq!(ops[0].id, "re_1");
        assert_eq!(ops[0].status.as_deref(), Some("succeeded"));
        assert_eq!(ops[1].id, "42");
        // An id too long to be one makes the answer unusable, not shorter.
        let long = "r".repeat(MAX_SEARCHABLE + 1);
        let body = json!({"data": [
            {"id": "re_1", "amount": 700, "currency": "EUR"},
            {"id": long, "amount": 700, "currency": "EUR"}
        ]});
        let refused = lookup.map(&body).expect_err("an id of 201 bytes");
        assert!(refused.contains("201 bytes"), "{refused}");
    }

    #[test]
    fn the_stripe_preset_asks_for_the_refunds_of_the_events_charge() {
        let file: LookupFile = toml::from_str(
            "provider = \"stripe\"\neffect_type = \"refund.*\"\npreset = \"stripe-refunds\"\nauth_env = \"STRIPE_KEY\"",
        )
        .unwrap();
        let lookup = file
            .resolve(|name| (name == "STRIPE_KEY").then(|| "sk_test_x".to_owned()))
            .unwrap();
        assert!(
            format!("{lookup:?}").contains("[redacted]"),
            "the key never prints"
        );
        let event = json!({"type": "refund.created", "data": {"object": {"object": "refund", "payment_intent": null, "charge": "ch_123"}}});
        assert_eq!(
            fill(&lookup.url, &event).unwrap(),
            "https://api.stripe.com/v1/refunds?charge=ch_123&limit=100"
        );
        // Stripe's documented Refund object, in a list as its API answers:
        // a refund of a charge made through the Charges API, which names no
        // payment intent, belongs to its charge on both sides.
        let refund: Value = serde_json::from_str(
            &std::fs::read_to_string(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/vectors/stripe/openapi-fixtures3/refund.json"
            ))
            .unwrap(),
        )
        .unwrap();
        assert_eq!(refund["payment_intent"], Value::Null);
        let webhook = json!({"type": "refund.created", "data": {"object": refund.clone()}});
        assert_eq!(
            lookup.resource_of(&webhook).as_deref(),
            Some("ch_1PgafuB7WZ01zgkWXYmPNZs8")
        );
        let ops = lookup
            .map(&json!({"object": "list", "data": [refund], "has_more": false}))
            .expect("ids");
        assert_eq!(ops.len(), 1);
        assert_eq!(
            ops[0].resource.as_deref(),
            Some("ch_1PgafuB7WZ01zgkWXYmPNZs8")
        );
        assert_eq!(ops[0].id, "re_1Pgc72B7WZ01zgkWqPvrRrPE");
        assert_eq!(ops[0].amount, Some(json!(100)));
        assert_eq!(ops[0].currency, Some(json!("usd")));
        assert_eq!(ops[0].status.as_deref(), Some("succeeded"));
        // Without the secret the configuration is refused.
        assert!(file.resolve(|_| None).is_err());
    }
}
