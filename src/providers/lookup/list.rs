//! Listing a provider's operations over a time window, page by page, for
//! periodic reconciliation:
//!
//! ```toml
//! [[lookups]]
//! # … the look-up's own url and mapping, plus:
//! list_url = "https://api.example.com/refunds?from={from}&to={to}"
//! cursor = "$.next_cursor"       # the next page's cursor (absent or null: last page)
//! cursor_param = "cursor"        # sent as ?cursor=…
//! has_more = "$.has_more"        # optional: false ends the listing
//! resource = "$.payment_id"      # within one operation (or a list, the first naming one)
//! created_at = "$.created_at"    # RFC 3339 or Unix seconds
//! effect_resource = "payment_id" # where the delivery's body names the resource
//! ```
//!
//! Each page is mapped with the look-up's own paths (`operations`, `id`,
//! `amount`, …). A listing that fails on any page fails as a whole:
//! reconciliation never compares against half a list. With `has_more`, a
//! page that does not say it, or says more follow but names no cursor,
//! fails the listing too.

use std::time::Instant;

use chrono::{DateTime, Utc};
use secrecy::ExposeSecret;
use serde_json::Value;
use serde_json_path::JsonPath;

use super::url::encode;
use super::values::field;
use super::{Lookup, LookupFile, Operation};

/// At most this many pages per listing: a cursor that never ends is an error.
const MAX_PAGES: usize = 1000;

/// The longest page read (a hundred operations take some 200 KiB).
const MOST_READ: usize = 8 * 1024 * 1024;

/// What a preset fills for listing.
pub(super) struct ListingPreset {
    pub list_url: &'static str,
    pub cursor: &'static str,
    pub cursor_param: &'static str,
    pub has_more: Option<&'static str>,
    pub effect_resource: &'static [&'static str],
    pub effect_amount: &'static str,
    pub effect_currency: &'static str,
}

/// How to list a window, ready to run.
#[derive(Debug, Clone)]
pub struct Listing {
    url: String,
    cursor: Option<JsonPath>,
    cursor_param: String,
    has_more: Option<JsonPath>,
}

/// Where an effect's resource, amount and currency are in its delivery's body.
#[derive(Debug, Clone)]
pub struct EffectFields {
    /// Tried in order: the first naming a value is the resource.
    pub resource: Vec<String>,
    pub amount: String,
    pub currency: String,
}

impl EffectFields {
    /// (resource, amount, currency) of a delivery's body.
    pub fn read(&self, body: &Value) -> (Option<String>, Option<Value>, Option<Value>) {
        (
            self.resource
                .iter()
                .find_map(|path| field(body, path).and_then(super::values::text)),
            field(body, &self.amount).cloned(),
            field(body, &self.currency).cloned(),
        )
    }
}

pub(super) fn resolve(
    file: &LookupFile,
    preset: Option<&ListingPreset>,
) -> anyhow::Result<Option<Listing>> {
    let Some(url) = file
        .list_url
        .clone()
        .or_else(|| preset.map(|p| p.list_url.to_owned()))
    else {
        return Ok(None);
    };
    let path =
        |text: &str| JsonPath::parse(text).map_err(|e| anyhow::anyhow!("path {text:?}: {e}"));
    let cursor = file
        .cursor
        .clone()
        .or_else(|| preset.map(|p| p.cursor.to_owned()));
    let has_more = file
        .has_more
        .clone()
        .or_else(|| preset.and_then(|p| p.has_more.map(str::to_owned)));
    Ok(Some(Listing {
        url,
        cursor: cursor.as_deref().map(path).transpose()?,
        cursor_param: file
            .cursor_param
            .clone()
            .or_else(|| preset.map(|p| p.cursor_param.to_owned()))
            .unwrap_or_else(|| "cursor".to_owned()),
        has_more: has_more.as_deref().map(path).transpose()?,
    }))
}

pub(super) fn fields(file: &LookupFile, preset: Option<&ListingPreset>) -> EffectFields {
    let pick = |given: &Option<String>, from: Option<&'static str>, default: &str| {
        given
            .clone()
            .or_else(|| from.map(str::to_owned))
            .unwrap_or_else(|| default.to_owned())
    };
    EffectFields {
        resource: super::Paths::or_preset(
            file.effect_resource.as_ref(),
            preset.map(|p| p.effect_resource),
        ),
        amount: pick(
            &file.effect_amount,
            preset.map(|p| p.effect_amount),
            "amount",
        ),
        currency: pick(
            &file.effect_currency,
            preset.map(|p| p.effect_currency),
            "currency",
        ),
    }
}

/// One page asked (journaled with the run's outcome).
#[derive(Debug, Clone)]
pub struct Page {
    pub url: String,
    pub status: Option<u16>,
    pub latency_ms: u64,
}

impl Lookup {
    /// Every operation the provider made in `[from, to)`, through all pages;
    /// `None` when no listing is configured.
    pub async fn list(
        &self,
        http: &reqwest::Client,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Option<(Vec<Page>, Result<Vec<Operation>, String>)> {
        let listing = self.listing.as_ref()?;
        let first = listing
            .url
            .replace("{from}", &encode(&from.to_rfc3339()))
            .replace("{to}", &encode(&to.to_rfc3339()))
            .replace("{from_unix}", &from.timestamp().to_string())
            .replace("{to_unix}", &to.timestamp().to_string());
        Some(self.pages(http, listing, first).await)
    }

    /// Every operation of the answer at `first` and of the pages that
    /// follow it, as `listing` says they follow. Fails as a whole when any
    /// page does: half a list is never taken for the whole.
    pub(super) async fn pages(
        &self,
        http: &reqwest::Client,
        listing: &Listing,
        first: String,
    ) -> (Vec<Page>, Result<Vec<Operation>, String>) {
        let mut pages = Vec::new();
        let mut operations = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            if pages.len() == MAX_PAGES {
                return (pages, Err(format!("more than {MAX_PAGES} pages")));
            }
            let url = match &cursor {
                None => first.clone(),
                Some(c) => {
                    let glue = if first.contains('?') { '&' } else { '?' };
                    format!("{first}{glue}{}={}", listing.cursor_param, encode(c))
                }
            };
            let (page, answer) = self.page(http, url).await;
            pages.push(page);
            let body = match answer {
                Ok(body) => body,
                Err(error) => return (pages, Err(error)),
            };
            match self.map(&body) {
                Ok(page) => operations.extend(page),
                Err(error) => {
                    let error = format!("page {}: {error}", pages.len());
                    return (pages, Err(error));
                }
            }
            // A listing that says whether more pages follow says it on
            // every page: an answer that does not is no page of it.
            let more = match &listing.has_more {
                None => None,
                Some(path) => match path.query(&body).first().and_then(Value::as_bool) {
                    Some(more) => Some(more),
                    None => {
                        let error =
                            format!("page {} does not say whether more follow", pages.len());
                        return (pages, Err(error));
                    }
                },
            };
            let next = listing
                .cursor
                .as_ref()
                .and_then(|p| p.query(&body).first().and_then(super::values::text))
                .filter(|_| more != Some(false));
            // A provider that ignores the cursor sends the same page again:
            // read as more, it would be asked a thousand times.
            if next.is_some() && next == cursor {
                let error = format!("page {} names the cursor it was asked with", pages.len());
                return (pages, Err(error));
            }
            cursor = next;
            if cursor.is_none() {
                if more == Some(true) {
                    let error =
                        format!("page {} says more follow but names no cursor", pages.len());
                    return (pages, Err(error));
                }
                return (pages, Ok(operations));
            }
        }
    }

    pub(super) async fn page(
        &self,
        http: &reqwest::Client,
        url: String,
    ) -> (Page, Result<Value, String>) {
        let started = Instant::now();
        let mut request = http.get(&url).timeout(self.timeout);
        if let Some(token) = &self.auth {
            request = request.bearer_auth(token.expose_secret());
        }
        let response = request.send().await;
        let mut page = Page {
            url,
            status: None,
            latency_ms: started.elapsed().as_millis() as u64,
        };
        let answer = match response {
            Err(error) => Err(format!("request failed: {}", error.without_url())),
            Ok(response) => {
                page.status = Some(response.status().as_u16());
                if response.status().is_success() {
                    match crate::providers::answer::json(response, MOST_READ).await {
                        Ok(body) => Ok(body.unwrap_or(Value::Null)),
                        Err(unread) => Err(format!("unreadable answer: {unread}")),
                    }
                } else {
                    Err(format!("the provider answered {}", response.status()))
                }
            }
        };
        (page, answer)
    }
}

/// An instant given as RFC 3339 text or Unix seconds.
pub(super) fn instant(value: &Value) -> Option<DateTime<Utc>> {
    match value {
        Value::String(s) => DateTime::parse_from_rfc3339(s)
            .ok()
            .map(|t| t.with_timezone(&Utc)),
        Value::Number(n) => DateTime::from_timestamp(n.as_i64()?, 0),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn instants_read_from_rfc_3339_or_unix_seconds() {
        assert_eq!(
            instant(&json!("2026-12-01T10:00:00+01:00")),
            DateTime::from_timestamp(1_796_115_600, 0)
        );
        assert_eq!(
            instant(&json!(1_796_115_600)),
            DateTime::from_timestamp(1_796_115_600, 0)
        );
        assert_eq!(instant(&json!(true)), None);
    }

    #[test]
    fn the_stripe_preset_lists_refunds_by_creation_time_after_the_last_id() {
        let file: LookupFile = toml::from_str(
            "provider = \"stripe\"\neffect_type = \"refund.*\"\npreset = \"stripe-refunds\"\nauth_env = \"K\"",
        )
        .unwrap();
        let lookup = file.resolve(|_| Some("sk_test_x".to_owned())).unwrap();
        let listing = lookup.listing.as_ref().expect("the preset lists");
        assert!(listing.url.contains("created[gte]={from_unix}"));
        assert_eq!(listing.cursor_param, "starting_after");
        let page = json!({"object": "list", "has_more": true, "data": [
            {"id": "re_1", "amount": 100, "currency": "usd", "payment_intent": "pi_1", "created": 1_796_115_600, "status": "succeeded"},
            {"id": "re_2", "amount": 200, "currency": "usd", "payment_intent": "pi_2", "created": 1_796_115_601, "status": "succeeded"}
        ]});
        let cursor = listing.cursor.as_ref().unwrap().query(&page);
        assert_eq!(cursor.first(), Some(&json!("re_2")));
        let ops = lookup.map(&page).expect("ids");
        assert_eq!(ops[0].resource.as_deref(), Some("pi_1"));
        assert_eq!(
            ops[1].created_at,
            DateTime::from_timestamp(1_796_115_601, 0)
        );
        let event = json!({"data": {"object": {"payment_intent": "pi_1", "charge": "ch_1", "amount": 100, "currency": "usd"}}});
        assert_eq!(
            lookup.effect_fields.read(&event),
            (Some("pi_1".into()), Some(json!(100)), Some(json!("usd")))
        );
    }

    #[test]
    fn a_resource_given_as_several_paths_is_the_first_naming_a_value() {
        let file: LookupFile = toml::from_str(
            r#"
provider = "p"
effect_type = "refund.*"
url = "http://x/{a}"
operations = "$.data[*]"
id = "$.id"
amount = "$.amount"
currency = "$.currency"
resource = ["$.a", "$.b"]
effect_resource = ["a", "b"]
"#,
        )
        .unwrap();
        let lookup = file.resolve(|_| None).unwrap();
        let ops = lookup
            .map(&json!({"data": [
                {"id": "1", "amount": 1, "currency": "x", "a": "A", "b": "B"},
                {"id": "2", "amount": 1, "currency": "x", "a": null, "b": "B"},
                {"id": "3", "amount": 1, "currency": "x"}
            ]}))
            .expect("ids");
        let resources: Vec<_> = ops.iter().map(|op| op.resource.as_deref()).collect();
        assert_eq!(resources, [Some("A"), Some("B"), None]);
        for (body, expected) in [
            (json!({"a": "A", "b": "B"}), Some("A")),
            (json!({"a": null, "b": "B"}), Some("B")),
            (json!({}), None),
        ] {
            assert_eq!(lookup.effect_fields.read(&body).0.as_deref(), expected);
        }
        // One path as a string reads as before.
        let one: LookupFile = toml::from_str(
            "provider = \"p\"\neffect_type = \"r\"\nurl = \"u\"\noperations = \"$.d\"\nid = \"$.i\"\namount = \"$.a\"\ncurrency = \"$.c\"\nresource = \"$.r\"\neffect_resource = \"r\"",
        )
        .unwrap();
        let one = one.resolve(|_| None).unwrap();
        assert_eq!(one.resource_of(&json!({"r": "R"})).as_deref(), Some("R"));
    }
}
