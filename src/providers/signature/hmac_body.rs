//! Generic HMAC-SHA256 of the raw body carried in one header (scheme `Hmac`), also the
//! engine behind GitHub and Adyen platform webhooks.

use secrecy::SecretString;

use super::common::{self, Key};
use super::{Encoding, SignatureError, Verified};

/// How a body HMAC is carried and keyed.
pub(super) struct BodyHmac<'a> {
    pub header: &'a str,
    pub encoding: Encoding,
    pub prefix: Option<&'a str>,
    pub derive: fn(&str) -> Result<Key, SignatureError>,
}

impl<'a> BodyHmac<'a> {
    /// Keyed with the secret string's bytes (generic `Hmac`, GitHub).
    pub fn plain(header: &'a str, encoding: Encoding, prefix: Option<&'a str>) -> Self {
        Self {
            header: header.trim(),
            encoding,
            prefix: prefix.filter(|p| !p.is_empty()),
            derive: common::raw_key,
        }
    }
}

/// `value` without `prefix` (ASCII case-insensitive), if it starts with it.
fn strip_prefix_ci<'v>(value: &'v str, prefix: &str) -> Option<&'v str> {
    let head = value.get(..prefix.len())?;
    if head.eq_ignore_ascii_case(prefix) {
        value.get(prefix.len()..)
    } else {
        None
    }
}

/// Decode a received tag; undecodable text yields `None` (it simply cannot match).
pub(super) fn decode_tag(encoding: Encoding, text: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    match encoding {
        Encoding::Hex => hex::decode(text).ok(),
        Encoding::Base64 => common::B64.decode(text).ok(),
    }
}

pub(super) fn encode_tag(encoding: Encoding, tag: &[u8]) -> String {
    use base64::Engine as _;
    match encoding {
        Encoding::Hex => hex::encode(tag),
        Encoding::Base64 => common::B64.encode(tag),
    }
}

/// Missing header: `MissingSignature`; a value without the configured prefix:
/// `MalformedHeader`; no candidate matching any key: `InvalidSignature`.
/// Repeated headers are all candidates.
pub(super) fn verify(
    cfg: &BodyHmac<'_>,
    secrets: &[SecretString],
    headers: &[(String, String)],
    body: &[u8],
) -> Result<Verified, SignatureError> {
    let keys = common::keys(secrets, cfg.derive)?;
    let mut seen = false;
    let mut candidates = Vec::new();
    for value in common::header_values(headers, cfg.header) {
        seen = true;
        let text = match cfg.prefix {
            Some(prefix) => {
                strip_prefix_ci(value, prefix).ok_or(SignatureError::MalformedHeader)?
            }
            None => value,
        };
        candidates.extend(decode_tag(cfg.encoding, text));
    }
    if !seen {
        return Err(SignatureError::MissingSignature);
    }
    match common::first_matching_key(&keys, &[body], &candidates)? {
        Some(index) => Ok(Verified {
            secret_index: Some(index),
            signed_at: None,
        }),
        None => Err(SignatureError::InvalidSignature),
    }
}

pub(super) fn sign(
    cfg: &BodyHmac<'_>,
    secret: &str,
    body: &[u8],
) -> Result<Vec<(String, String)>, SignatureError> {
    if cfg.header.is_empty() {
        return Err(SignatureError::MalformedHeader);
    }
    let key = (cfg.derive)(secret)?;
    let tag = common::hmac_sha256(&key, &[body])?;
    let value = format!(
        "{}{}",
        cfg.prefix.unwrap_or_default(),
        encode_tag(cfg.encoding, &tag)
    );
    Ok(vec![(cfg.header.to_ascii_lowercase(), value)])
}
