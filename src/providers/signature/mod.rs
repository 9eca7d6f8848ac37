//! Webhook signature verification: public API (scheme config, errors, `verify`, `sign`,
//! `sensitive_headers`) and the dispatch to one file per scheme.
//!
//! Everything is computed on the raw body bytes; tags are compared in constant time
//! (`subtle`). Errors and `Debug` output never carry secret or signature values.

mod adyen;
mod common;
mod github;
mod hmac_body;
mod standard_webhooks;
mod stripe;

#[cfg(test)]
mod tests;

pub use adyen::sign_notification as sign_adyen_notification;

use secrecy::SecretString;

/// How a source's deliveries are authenticated.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(tag = "scheme", rename_all = "snake_case", deny_unknown_fields)]
pub enum SchemeConfig {
    /// Standard Webhooks (`webhook-id`, `webhook-timestamp`, `webhook-signature`; `whsec_` base64 secret),
    /// also as Svix sends it (`svix-id`, `svix-timestamp`, `svix-signature`).
    StandardWebhooks,
    /// Stripe (`stripe-signature: t=..,v1=..`; secret string used as the key).
    Stripe,
    /// GitHub (`x-hub-signature-256: sha256=<hex>`; secret string used as the key).
    Github,
    /// generic HMAC-SHA256 of the raw body
    Hmac {
        /// header carrying the signature (compared case-insensitively)
        header: String,
        /// how the tag is written in the header
        #[serde(default)]
        encoding: Encoding,
        /// stripped from the header value before decoding, e.g. "sha256="
        #[serde(default)]
        prefix: Option<String>,
    },
    /// Adyen: classic notifications (every `NotificationRequestItem` signed in
    /// `additionalData.hmacSignature`) or, when an `HmacSignature` header is present,
    /// platform webhooks (raw body). The secret is the hex HMAC key.
    Adyen,
    /// no verification; only when a source opts in explicitly
    None,
}

impl SchemeConfig {
    /// The scheme's name as written in the configuration (`scheme = "…"`).
    pub fn name(&self) -> &'static str {
        match self {
            SchemeConfig::StandardWebhooks => "standard_webhooks",
            SchemeConfig::Stripe => "stripe",
            SchemeConfig::Github => "github",
            SchemeConfig::Hmac { .. } => "hmac",
            SchemeConfig::Adyen => "adyen",
            SchemeConfig::None => "none",
        }
    }
}

/// Text encoding of a tag in a header.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Encoding {
    /// lower- or upper-case hex (lower-case when signing)
    #[default]
    Hex,
    /// standard alphabet, padded
    Base64,
}

/// A successful verification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verified {
    /// which configured secret matched (rotation); `None` for scheme `None`
    pub secret_index: Option<usize>,
    /// the signed timestamp, for schemes that sign one
    pub signed_at: Option<i64>,
}

/// Why a delivery was not authenticated. Messages are fixed strings: no secret, no signature.
#[derive(Debug, Clone, Copy, thiserror::Error, PartialEq, Eq)]
pub enum SignatureError {
    #[error("signature missing")]
    MissingSignature,
    #[error("signed timestamp missing")]
    MissingTimestamp,
    #[error("message id missing")]
    MissingMessageId,
    #[error("signature header malformed")]
    MalformedHeader,
    #[error("signed timestamp outside the tolerance window")]
    TimestampOutOfTolerance,
    #[error("no signature matched")]
    InvalidSignature,
    #[error(
        "a signed field is not in the form the provider sends it, so the signature cannot tell it from another value"
    )]
    AmbiguousSignedField,
    #[error("no secret configured")]
    NoSecretConfigured,
    #[error("a configured secret is not valid for this scheme")]
    InvalidSecret,
    #[error("timestamp cannot be signed")]
    InvalidTimestamp,
}

impl SignatureError {
    /// Stable snake_case code, for API responses, logs and metrics.
    pub fn code(&self) -> &'static str {
        match self {
            Self::MissingSignature => "missing_signature",
            Self::MissingTimestamp => "missing_timestamp",
            Self::MissingMessageId => "missing_message_id",
            Self::MalformedHeader => "malformed_signature_header",
            Self::TimestampOutOfTolerance => "timestamp_out_of_tolerance",
            Self::InvalidSignature => "invalid_signature",
            Self::AmbiguousSignedField => "ambiguous_signed_field",
            Self::NoSecretConfigured => "no_secret_configured",
            Self::InvalidSecret => "invalid_secret",
            Self::InvalidTimestamp => "invalid_timestamp",
        }
    }
}

/// Verify one delivery. `headers`: lower-cased names with their values, as received
/// (repeated names possible; names are also matched case-insensitively).
/// Every secret must be valid for the scheme (else `InvalidSecret`); any one matching passes.
/// Timestamped schemes fail with `TimestampOutOfTolerance` when `|now - t| > tolerance_secs`
/// (checked after the signature, so that error means "authentic but stale").
pub fn verify(
    scheme: &SchemeConfig,
    secrets: &[SecretString],
    headers: &[(String, String)],
    body: &[u8],
    now_unix: i64,
    tolerance_secs: u64,
) -> Result<Verified, SignatureError> {
    match scheme {
        SchemeConfig::None => Ok(Verified {
            secret_index: None,
            signed_at: None,
        }),
        SchemeConfig::StandardWebhooks => {
            standard_webhooks::verify(secrets, headers, body, now_unix, tolerance_secs)
        }
        SchemeConfig::Stripe => stripe::verify(secrets, headers, body, now_unix, tolerance_secs),
        SchemeConfig::Github => github::verify(secrets, headers, body),
        SchemeConfig::Hmac {
            header,
            encoding,
            prefix,
        } => hmac_body::verify(
            &hmac_body::BodyHmac::plain(header, *encoding, prefix.as_deref()),
            secrets,
            headers,
            body,
        ),
        SchemeConfig::Adyen => adyen::verify(secrets, headers, body),
    }
}

/// Produce the headers a provider would send (tests, README curl examples, benchmark client).
/// `msg_id` is used by Standard Webhooks only, `timestamp` by Standard Webhooks and Stripe.
/// Adyen: returns the platform-webhook `hmacsignature` header over the raw body; to sign
/// classic notification items inside the body use [`sign_adyen_notification`].
/// `None` returns no header.
pub fn sign(
    scheme: &SchemeConfig,
    secret: &str,
    msg_id: &str,
    timestamp: i64,
    body: &[u8],
) -> Result<Vec<(String, String)>, SignatureError> {
    match scheme {
        SchemeConfig::None => Ok(Vec::new()),
        SchemeConfig::StandardWebhooks => standard_webhooks::sign(secret, msg_id, timestamp, body),
        SchemeConfig::Stripe => stripe::sign(secret, timestamp, body),
        SchemeConfig::Github => github::sign(secret, body),
        SchemeConfig::Hmac {
            header,
            encoding,
            prefix,
        } => hmac_body::sign(
            &hmac_body::BodyHmac::plain(header, *encoding, prefix.as_deref()),
            secret,
            body,
        ),
        SchemeConfig::Adyen => adyen::sign(secret, body),
    }
}

/// Check a secret against the scheme's rules (for config-time validation).
pub fn validate_secret(scheme: &SchemeConfig, secret: &str) -> Result<(), SignatureError> {
    match scheme {
        SchemeConfig::None => Ok(()),
        SchemeConfig::StandardWebhooks => standard_webhooks::key(secret).map(drop),
        SchemeConfig::Stripe => stripe::key(secret).map(drop),
        SchemeConfig::Github | SchemeConfig::Hmac { .. } => common::raw_key(secret).map(drop),
        SchemeConfig::Adyen => adyen::key(secret).map(drop),
    }
}

/// Lower-case header names whose values must never be stored or logged for this scheme.
pub fn sensitive_headers(scheme: &SchemeConfig) -> Vec<String> {
    let own: Vec<String> = match scheme {
        SchemeConfig::StandardWebhooks => vec![
            standard_webhooks::STANDARD.signature.into(),
            standard_webhooks::SVIX.signature.into(),
        ],
        SchemeConfig::Stripe => vec![stripe::HEADER.into()],
        // GitHub also sends the legacy SHA-1 HMAC of the body under x-hub-signature.
        SchemeConfig::Github => vec![github::HEADER.into(), "x-hub-signature".into()],
        SchemeConfig::Hmac { header, .. } => vec![header.trim().to_ascii_lowercase()],
        SchemeConfig::Adyen => vec![adyen::HEADER.into()],
        SchemeConfig::None => Vec::new(),
    };
    let mut out = own;
    for always in [
        "authorization",
        "proxy-authorization",
        "cookie",
        "set-cookie",
    ] {
        if !out.iter().any(|h| h == always) {
            out.push(always.into());
        }
    }
    out.retain(|h| !h.is_empty());
    out
}
