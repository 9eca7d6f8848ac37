//! What no view may show in clear: secret header values.
//!
//! Headers are masked before they are journaled (the journal is append-only: a
//! secret that reached it could never be removed).

use crate::domain::delivery::{Headers, REDACTED};
use crate::domain::identity::pattern;

/// Header names masked on every source, whatever it adds (lower-case; `*`
/// matches any run of characters). Auth headers, API keys and tokens, and the
/// signature or shared-secret headers of common providers.
pub const DEFAULT_MASKED_HEADERS: &[&str] = &[
    // HTTP authentication and sessions
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
    // API keys and tokens, whatever the vendor prefix
    "api-key",
    "apikey",
    "x-apikey",
    "*-api-key",
    "*-token",
    "*-secret",
    "x-amz-security-token",
    "x-goog-iap-jwt-assertion",
    // provider signatures and shared secrets sent in clear
    "*-signature",
    "*-signature-*",
    "x-hub-signature*",
    "x-shopify-hmac-sha256",
    "x-square-hmacsha256-signature",
    "paypal-transmission-sig",
    "hmacsignature",
    "x-hook-secret",
];

/// The header names a source masks: the defaults, its signature scheme's own,
/// and the ones it configures. Names match case-insensitively.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderMask {
    patterns: Vec<String>,
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
        }
    }
}

impl HeaderMask {
    /// The defaults plus `extra` (trimmed, lower-cased, checked).
    pub fn with<S: AsRef<str>>(extra: &[S]) -> Result<Self, InvalidHeaderPattern> {
        let mut patterns = Self::default().patterns;
        for raw in extra {
            let p = raw.as_ref().trim().to_ascii_lowercase();
            let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'+-.^_`|~*".contains(c);
            if p.is_empty() || !p.chars().all(token) {
                return Err(InvalidHeaderPattern(raw.as_ref().to_owned()));
            }
            if !patterns.contains(&p) {
                patterns.push(p);
            }
        }
        Ok(Self { patterns })
    }

    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    pub fn matches(&self, name: &str) -> bool {
        let name = name.to_ascii_lowercase();
        self.patterns.iter().any(|p| pattern::matches(p, &name))
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

#[cfg(test)]
mod tests {
    use super::*;

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
            "idempotency-key",
        ] {
            assert!(!mask.matches(name), "{name}");
        }
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
}
