//! Stripe: `stripe-signature: t=<unix>,v1=<hex>[,v1=<hex>...][,v0=<hex>]`, signed payload
//! `{t}.{body}`, HMAC-SHA256 keyed with the whole secret string (`whsec_...` included, no
//! decoding). Only `v1` counts; any matching `v1` passes.

use secrecy::SecretString;

use super::common::{self, Key};
use super::{SignatureError, Verified};

pub(super) const HEADER: &str = "stripe-signature";

/// Secret -> key: its bytes. Empty or containing whitespace is refused (stripe-node refuses
/// whitespace too: a pasted secret with a trailing space would never match).
pub(super) fn key(secret: &str) -> Result<Key, SignatureError> {
    if secret.chars().any(char::is_whitespace) {
        return Err(SignatureError::InvalidSecret);
    }
    common::raw_key(secret)
}

struct Parsed {
    signed_at: i64,
    candidates: Vec<Vec<u8>>,
}

/// Parse `k=v` pairs separated by commas (blank pairs skipped, whitespace around pairs
/// trimmed). A pair without `=` or a non-numeric / repeated-and-different `t` is
/// `MalformedHeader`; no `t`: `MissingTimestamp`; no `v1`: `MissingSignature`.
fn parse(header: &str) -> Result<Parsed, SignatureError> {
    let mut raw_t: Option<&str> = None;
    let mut any_v1 = false;
    let mut candidates = Vec::new();
    for pair in header.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, value) = pair
            .split_once('=')
            .ok_or(SignatureError::MalformedHeader)?;
        match name.trim() {
            "t" => match raw_t {
                Some(prev) if prev != value.trim() => return Err(SignatureError::MalformedHeader),
                _ => raw_t = Some(value.trim()),
            },
            "v1" => {
                any_v1 = true;
                candidates.extend(hex::decode(value.trim()).ok());
            }
            _ => {}
        }
    }
    let signed_at = common::parse_unix(raw_t.ok_or(SignatureError::MissingTimestamp)?)?;
    if !any_v1 {
        return Err(SignatureError::MissingSignature);
    }
    Ok(Parsed {
        signed_at,
        candidates,
    })
}

/// Errors, in order: secrets, `MissingSignature` (no header), header parse errors,
/// `InvalidSignature`, then `TimestampOutOfTolerance` (both directions, unlike Stripe's
/// SDKs which only refuse old timestamps). Several differing `stripe-signature` headers
/// are `MalformedHeader`.
pub(super) fn verify(
    secrets: &[SecretString],
    headers: &[(String, String)],
    body: &[u8],
    now: i64,
    tolerance_secs: u64,
) -> Result<Verified, SignatureError> {
    let keys = common::keys(secrets, key)?;
    let header = common::single_header(headers, HEADER)?.ok_or(SignatureError::MissingSignature)?;
    let parsed = parse(header)?;
    let ts = parsed.signed_at.to_string();
    let parts: [&[u8]; 3] = [ts.as_bytes(), b".", body];
    let index = common::first_matching_key(&keys, &parts, &parsed.candidates)?
        .ok_or(SignatureError::InvalidSignature)?;
    common::check_tolerance(parsed.signed_at, now, tolerance_secs)?;
    Ok(Verified {
        secret_index: Some(index),
        signed_at: Some(parsed.signed_at),
    })
}

/// `stripe-signature: t={timestamp},v1={hex}`; a negative timestamp is `InvalidTimestamp`.
pub(super) fn sign(
    secret: &str,
    timestamp: i64,
    body: &[u8],
) -> Result<Vec<(String, String)>, SignatureError> {
    let key = key(secret)?;
    if timestamp < 0 {
        return Err(SignatureError::InvalidTimestamp);
    }
    let ts = timestamp.to_string();
    let tag = common::hmac_sha256(&key, &[ts.as_bytes(), b".", body])?;
    Ok(vec![(
        HEADER.to_owned(),
        format!("t={ts},v1={}", hex::encode(tag)),
    )])
}
