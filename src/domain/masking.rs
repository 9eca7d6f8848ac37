//! What no view may show in clear: secret header values and the body values
//! strategies declare `sensitive`.
//!
//! Headers are masked before they are journaled (the journal is append-only: a
//! secret that reached it could never be removed). Sensitive body values stay
//! in the raw body, which lives apart from the journal; every view masks them
//! as `hmac:<8 hex>…`, the keyed-hash tag the identity's material already uses,
//! so equal values show equal tags without showing the value.

use serde_json::Value;

use crate::domain::delivery::{Headers, REDACTED};
use crate::domain::identity::normalize::map_all;
use crate::domain::identity::pattern;
use crate::domain::identity::{FieldRef, KeySecret, mask as masked_tag};
use crate::domain::uri;

/// A header whose name holds one of these words (case-insensitive, `-` and
/// `_` alike) is masked on every source: credentials, keys, tokens, session
/// cookies and signatures, whatever the vendor calls its header. The rule
/// errs towards masking: a value hidden by mistake costs a look at the raw
/// body store, a secret shown by mistake cannot be taken back.
pub const SECRET_WORDS: &[&str] = &[
    "auth",
    "key",
    "secret",
    "token",
    "password",
    "signature",
    "cookie",
];

/// Header names masked on every source that hold none of [`SECRET_WORDS`]
/// (lower-case, `-` for `_`; `*` matches any run of characters): provider
/// signatures and identity assertions named otherwise.
pub const DEFAULT_MASKED_HEADERS: &[&str] = &[
    "x-goog-iap-jwt-assertion",
    "x-shopify-hmac-sha256",
    "paypal-transmission-sig",
];

/// Whether a header (or any other named value: a query parameter, a path
/// segment) named `name` holds a secret by [`SECRET_WORDS`] alone.
pub fn is_secret_name(name: &str) -> bool {
    holds_secret_word(&normalized(name))
}

fn holds_secret_word(normalized_name: &str) -> bool {
    SECRET_WORDS
        .iter()
        .any(|word| normalized_name.contains(word))
}

/// A name as the rule compares it: lower-case, `_` read as `-`.
fn normalized(name: &str) -> String {
    name.trim()
        .chars()
        .map(|c| match c {
            '_' => '-',
            c => c.to_ascii_lowercase(),
        })
        .collect()
}

/// The header names a source masks: every name [`is_secret_name`] calls
/// secret, the defaults, its signature scheme's own, and the ones it
/// configures. Names match case-insensitively, `-` and `_` alike. Every view
/// and the journal mask through [`HeaderMask::apply`]: this is the one rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderMask {
    patterns: Vec<String>,
    /// Names the secret words alone do not mask (`keeping`).
    kept: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("masked header pattern {0:?} must be a header name, with `*` as a wildcard")]
pub struct InvalidHeaderPattern(pub String);

impl Default for HeaderMask {
    /// The defaults alone.
    fn default() -> Self {
        Self {
            patterns: DEFAULT_MASKED_HEADERS
                .iter()
                .map(|p| (*p).to_owned())
                .collect(),
            kept: Vec::new(),
        }
    }
}

impl HeaderMask {
    /// The defaults plus `extra` (trimmed, lower-cased, checked).
    pub fn with<S: AsRef<str>>(extra: &[S]) -> Result<Self, InvalidHeaderPattern> {
        let mut patterns = Self::default().patterns;
        for raw in extra {
            let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'+-.^_`|~*".contains(c);
            if raw.as_ref().trim().is_empty() || !raw.as_ref().trim().chars().all(token) {
                return Err(InvalidHeaderPattern(raw.as_ref().to_owned()));
            }
            let p = normalized(raw.as_ref());
            if !patterns.contains(&p) {
                patterns.push(p);
            }
        }
        Ok(Self {
            patterns,
            kept: Vec::new(),
        })
    }

    /// This mask, except that `keyed` (the headers a source's strategies key
    /// on: `Catalog::keyed_headers`) are not masked for holding a secret
    /// word alone: an `Idempotency-Key` a strategy keys on is journaled as
    /// it came, so a replay keys as the live decision did. A default or
    /// configured pattern still masks them (`masked_by_pattern` tells which).
    pub fn keeping<S: AsRef<str>>(mut self, keyed: &[S]) -> Self {
        // Kept by the name the strategy reads, as a header is found: in
        // any case, `_` and `-` apart.
        self.kept = keyed
            .iter()
            .map(|name| name.as_ref().trim().to_ascii_lowercase())
            .collect();
        self
    }

    /// Whether a default or configured pattern (not the secret words
    /// alone) masks `name`.
    pub fn masked_by_pattern(&self, name: &str) -> bool {
        let name = normalized(name);
        self.patterns.iter().any(|p| pattern::matches(p, &name))
    }

    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    pub fn matches(&self, name: &str) -> bool {
        let kept = self.kept.contains(&name.trim().to_ascii_lowercase());
        let name = normalized(name);
        (holds_secret_word(&name) && !kept)
            || self.patterns.iter().any(|p| pattern::matches(p, &name))
    }

    /// The headers with every masked value replaced by [`REDACTED`].
    pub fn apply(&self, headers: &[(String, String)]) -> Headers {
        headers
            .iter()
            .map(|(name, value)| {
                let value = if self.matches(name) {
                    REDACTED.to_owned()
                } else {
                    value.clone()
                };
                (name.clone(), value)
            })
            .collect()
    }
}

/// Masks the sensitive values of one delivery wherever a view shows them.
#[derive(Debug, Default)]
pub struct SensitiveMask {
    /// Each clear leaf value found at a sensitive path, with its tag.
    found: Vec<(Value, Value)>,
}

/// Clear text shorter than this is masked only where it is a whole value,
/// never inside longer text (a two-letter value would shred every word).
pub const MIN_EMBEDDED_LEN: usize = 6;

/// `text` with every run of exactly the digits `digits` (no digit on
/// either side: `100000` is not inside `evt_1000004`) replaced by `with`;
/// `None` when there is none.
pub fn replace_digits(text: &str, digits: &str, with: &str) -> Option<String> {
    if digits.is_empty() || !text.contains(digits) {
        return None;
    }
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let (mut from, mut replaced) = (0, false);
    for (at, _) in text.match_indices(digits) {
        let end = at + digits.len();
        let alone = (at == 0 || !bytes[at - 1].is_ascii_digit())
            && bytes.get(end).is_none_or(|b| !b.is_ascii_digit());
        if alone && at >= from {
            out.push_str(&text[from..at]);
            out.push_str(with);
            from = end;
            replaced = true;
        }
    }
    if !replaced {
        return None;
    }
    out.push_str(&text[from..]);
    Some(out)
}

impl SensitiveMask {
    /// Replaces, in `body`, every node a path selects with its tag, and
    /// remembers the clear values so that other views of the same delivery
    /// can be scrubbed of them.
    pub fn mask_body(body: &mut Value, paths: &[&FieldRef], secret: &KeySecret) -> Self {
        let mut found = Vec::new();
        for path in paths {
            if let Some(clear) = path.resolve(&[], Some(body)) {
                collect_leaves(&clear, secret, &mut found);
            }
            map_all(body, path, &|v| masked_tag(&secret.seal(v)));
        }
        Self { found }
    }

    /// A mask of values found elsewhere (a fixture's bodies), each with what
    /// replaces it, that scrubs as the views do.
    pub fn of(found: Vec<(Value, Value)>) -> Self {
        Self { found }
    }

    /// Also hides `digest`, an unkeyed hash of the body these values came
    /// from (its raw hash, its canonical fingerprint): shown beside the rest
    /// of the body, it would confirm a guess of them offline. It is replaced
    /// by its keyed tag (equal digests keep equal tags). Nothing to hide in
    /// a body without sensitive values.
    pub fn hide_digest(&mut self, digest: &str, secret: &KeySecret) {
        if self.found.is_empty() || digest.is_empty() {
            return;
        }
        let clear = Value::String(digest.to_owned());
        let tag = masked_tag(&secret.seal(&clear));
        self.found.push((clear, tag));
    }

    /// Also hides `digest` whatever this body holds: a fingerprint of
    /// another body (a collision's, journaled before 2026-12-07), shown
    /// where that body's values are not, replaced by its keyed tag.
    pub fn hide_fingerprint(&mut self, digest: &str, secret: &KeySecret) {
        let clear = Value::String(digest.to_owned());
        let tag = masked_tag(&secret.seal(&clear));
        self.found.push((clear, tag));
    }

    /// Each clear value known, with what replaces it.
    pub fn found(&self) -> &[(Value, Value)] {
        &self.found
    }

    pub fn is_empty(&self) -> bool {
        self.found.is_empty()
    }

    /// `text` with the clear sensitive values replaced by their tags
    /// (`scrub`).
    pub fn scrub_text(&self, text: &str) -> String {
        let mut value = Value::String(text.to_owned());
        self.scrub(&mut value);
        match value {
            Value::String(text) => text,
            other => other.to_string(),
        }
    }

    /// Replaces every clear sensitive value in `value`: whole values by their
    /// tag, text embedded in a longer string (a number as its digits) by the
    /// tag's text, and so is its percent-encoded form (as a look-up's URL
    /// carries it).
    pub fn scrub(&self, value: &mut Value) {
        if self.found.is_empty() {
            return;
        }
        if let Some((_, tag)) = self.found.iter().find(|(clear, _)| clear == value) {
            *value = tag.clone();
            return;
        }
        match value {
            Value::String(text) => {
                for (clear, tag) in &self.found {
                    // A number reaches text as its digits (a URL's path, a
                    // downstream's answer), as canonical JSON writes it
                    // however the body did (`1.2345678901e10`).
                    let c = match clear {
                        Value::String(c) => std::borrow::Cow::Borrowed(c.as_str()),
                        Value::Number(_) => {
                            std::borrow::Cow::Owned(crate::domain::identity::jcs::key_string(
                                &crate::domain::identity::jcs::canonical_numbers(clear),
                            ))
                        }
                        _ => continue,
                    };
                    // A fixture masks a number as another number: its
                    // digits replace the clear ones.
                    let t = match tag {
                        Value::String(t) => std::borrow::Cow::Borrowed(t.as_str()),
                        Value::Number(n) => std::borrow::Cow::Owned(n.to_string()),
                        _ => continue,
                    };
                    if c.chars().count() < MIN_EMBEDDED_LEN {
                        continue;
                    }
                    if let Value::Number(_) = clear {
                        if let Some(replaced) = replace_digits(text, &c, &t) {
                            *text = replaced;
                        }
                    } else if text.contains(c.as_ref()) {
                        *text = text.replace(c.as_ref(), &t);
                    }
                    let encoded = uri::encode(&c);
                    if encoded != c && text.contains(&encoded) {
                        *text = text.replace(&encoded, &t);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.scrub(v)),
            Value::Object(map) => map.values_mut().for_each(|v| self.scrub(v)),
            _ => {}
        }
    }
}

fn collect_leaves(value: &Value, secret: &KeySecret, out: &mut Vec<(Value, Value)>) {
    match value {
        Value::Array(items) => items.iter().for_each(|v| collect_leaves(v, secret, out)),
        Value::Object(map) => map.values().for_each(|v| collect_leaves(v, secret, out)),
        Value::Null | Value::Bool(_) => {}
        Value::String(s) if s.is_empty() => {}
        leaf => out.push((leaf.clone(), masked_tag(&secret.seal(leaf)))),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn secret() -> KeySecret {
        KeySecret::from_bytes(&[7; 32]).unwrap()
    }

    #[test]
    fn defaults_mask_keys_tokens_and_provider_signatures_whatever_the_case() {
        let mask = HeaderMask::with::<&str>(&[]).unwrap();
        for name in [
            "Authorization",
            "X-API-Key",
            "x-auth-token",
            "x-access-token",
            "x-goog-channel-token",
            "x-amz-security-token",
            "x-csrf-token",
            "x-hub-signature-256",
            "x-shopify-hmac-sha256",
            "x-twilio-signature",
            "x-gitlab-token",
            "x-signature-ed25519",
            "stripe-signature",
            "paypal-transmission-sig",
            "x-goog-iap-jwt-assertion",
        ] {
            assert!(mask.matches(name), "{name}");
        }
        for name in [
            "content-type",
            "x-github-delivery",
            "x-github-event",
            "webhook-id",
            "svix-id",
            "user-agent",
            "keep-alive",
        ] {
            assert!(!mask.matches(name), "{name}");
        }
    }

    #[test]
    fn a_header_a_strategy_keys_on_is_kept_unless_a_pattern_masks_it() {
        let mask = HeaderMask::with(&["x-partner-pin"])
            .unwrap()
            .keeping(&["idempotency-key", "x-partner-pin"]);
        assert!(!mask.matches("Idempotency-KEY"));
        assert!(mask.matches("Idempotency_Key"), "not the header read");
        assert!(
            mask.matches("x-partner-pin"),
            "a configured pattern still masks"
        );
        assert!(mask.masked_by_pattern("x-partner-pin"));
        assert!(mask.matches("x-api-key"), "a name not kept still masks");
        assert!(HeaderMask::default().matches("idempotency-key"));
    }

    #[test]
    fn any_name_holding_a_secret_word_is_masked_whatever_its_case_and_separators() {
        let mask = HeaderMask::default();
        for name in [
            "x-authorization",
            "X-Access-Key",
            "x-password",
            "x-api_key",
            "X_API_KEY",
            "x-client-secret-key",
            "x-session-cookie",
            "x-amz-content-signature",
            "x_refresh_token",
            "proxy-authenticate",
            // Not a secret, but a key: masked too rather than guessed at.
            "idempotency-key",
        ] {
            assert!(mask.matches(name), "{name}");
            assert!(is_secret_name(name), "{name}");
        }
        assert!(!is_secret_name("x-shopify-hmac-sha256"), "a default name");
        assert!(mask.matches("X_Shopify_Hmac_Sha256"));
    }

    #[test]
    fn a_configured_name_matches_with_dashes_or_underscores() {
        let mask = HeaderMask::with(&["x_partner_pin"]).unwrap();
        assert!(mask.matches("x-partner-pin"));
        assert!(mask.matches("X_Partner-Pin"));
        assert!(!mask.matches("x-partner-id"));
    }

    #[test]
    fn a_source_adds_names_and_prefix_patterns_to_the_defaults() {
        let mask = HeaderMask::with(&[" X-Partner-Pin ", "x-acme-*"]).unwrap();
        assert!(mask.matches("x-partner-pin"));
        assert!(mask.matches("X-Acme-Anything"));
        assert!(mask.matches("x-api-key"));
        let headers = vec![
            ("x-partner-pin".to_owned(), "1234".to_owned()),
            ("content-type".to_owned(), "application/json".to_owned()),
        ];
        let masked = mask.apply(&headers);
        assert_eq!(masked[0], ("x-partner-pin".to_owned(), REDACTED.to_owned()));
        assert_eq!(masked[1].1, "application/json");
    }

    #[test]
    fn a_pattern_that_is_not_a_header_name_is_refused() {
        assert!(HeaderMask::with(&[""]).is_err());
        assert!(HeaderMask::with(&["x api key"]).is_err());
        assert!(HeaderMask::with(&["x-key:"]).is_err());
    }

    #[test]
    fn sensitive_values_are_tagged_in_the_body_and_scrubbed_elsewhere() {
        let mut body = json!({"customer_email": "ann@example.com", "amount": 1500});
        let path = FieldRef::parse("$.customer_email").unwrap();
        let mask = SensitiveMask::mask_body(&mut body, &[&path], &secret());
        let tag = body["customer_email"].as_str().unwrap().to_owned();
        assert!(tag.starts_with("hmac:") && tag.ends_with('…'), "{tag}");
        assert_eq!(body["amount"], 1500);

        let mut other =
            json!({"note": "mail ann@example.com", "to": "ann@example.com", "n": [1500]});
        mask.scrub(&mut other);
        let text = other.to_string();
        assert!(!text.contains("ann@example.com"), "{text}");
        assert_eq!(other["to"], tag.as_str());
        assert_eq!(other["n"][0], 1500);
    }

    #[test]
    fn a_sensitive_number_is_scrubbed_inside_text_as_its_digits() {
        let mut body = json!({"customer_number": 12345678901_u64, "amount": 1500});
        let path = FieldRef::parse("$.customer_number").unwrap();
        let mask = SensitiveMask::mask_body(&mut body, &[&path], &secret());
        let tag = body["customer_number"].as_str().unwrap().to_owned();
        let mut other = json!({
            "url": "https://psp.example/customers/12345678901/refunds?c=12345678901",
            "number": 12345678901_u64,
        });
        mask.scrub(&mut other);
        let text = other.to_string();
        assert!(!text.contains("12345678901"), "{text}");
        assert!(other["url"].as_str().unwrap().contains(&tag), "{text}");
        assert_eq!(other["number"], tag.as_str());
    }

    #[test]
    fn a_sensitive_number_written_as_a_double_is_scrubbed_by_its_canonical_digits() {
        let mut body: Value = serde_json::from_str(r#"{"n": 1.2345678901e10}"#).unwrap();
        let path = FieldRef::parse("$.n").unwrap();
        let mask = SensitiveMask::mask_body(&mut body, &[&path], &secret());
        let note = mask.scrub_text("customer 12345678901 called");
        assert!(!note.contains("12345678901"), "{note}");
    }

    #[test]
    fn digits_are_replaced_only_where_they_stand_alone() {
        assert_eq!(
            replace_digits("c 100000, evt_1000004, 100000", "100000", "X").as_deref(),
            Some("c X, evt_1000004, X")
        );
        assert_eq!(replace_digits("evt_1000004", "100000", "X"), None);
        assert_eq!(
            replace_digits("/c/123456/r", "123456", "9").as_deref(),
            Some("/c/9/r")
        );
    }

    #[test]
    fn a_number_masked_as_a_number_is_scrubbed_inside_text_as_its_digits() {
        // As a fixture masks one: the masked number's digits replace them.
        let mask = SensitiveMask::of(vec![(json!(12345678901_u64), json!(40_917_263_385_u64))]);
        let note = mask.scrub_text("refunded customer 12345678901 twice, see /c/12345678901/r");
        assert_eq!(
            note,
            "refunded customer 40917263385 twice, see /c/40917263385/r"
        );
        let mut whole = json!({"n": 12345678901_u64});
        mask.scrub(&mut whole);
        assert_eq!(whole["n"], json!(40_917_263_385_u64));
    }

    #[test]
    fn the_tag_is_stable_for_one_secret_and_differs_across_secrets() {
        let path = FieldRef::parse("$.e").unwrap();
        let tag = |s: &KeySecret| {
            let mut body = json!({"e": "x@example.com"});
            SensitiveMask::mask_body(&mut body, &[&path], s);
            body["e"].clone()
        };
        assert_eq!(tag(&secret()), tag(&secret()));
        assert_ne!(
            tag(&secret()),
            tag(&KeySecret::from_bytes(&[8; 32]).unwrap())
        );
    }
}
