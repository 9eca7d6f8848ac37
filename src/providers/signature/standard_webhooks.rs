//! Standard Webhooks (symmetric `v1`): signed content `{webhook-id}.{webhook-timestamp}.{body}`,
//! HMAC-SHA256 keyed with the base64-decoded secret (`whsec_` prefix optional, padding optional),
//! `webhook-signature` = space-separated `version,base64` entries; any `v1` match passes.

use base64::Engine as _;
use secrecy::SecretString;

use super::common::{self, Key};
use super::{SignatureError, Verified};

pub(super) const ID: &str = "webhook-id";
pub(super) const TIMESTAMP: &str = "webhook-timestamp";
pub(super) const SIGNATURE: &str = "webhook-signature";
const PREFIX: &str = "whsec_";

/// Secret -> key: optional `whsec_` prefix, then lenient base64; empty is refused.
pub(super) fn key(secret: &str) -> Result<Key, SignatureError> {
    let encoded = secret.strip_prefix(PREFIX).unwrap_or(secret);
    if encoded.is_empty() {
        return Err(SignatureError::InvalidSecret);
    }
    match common::B64_LENIENT.decode(encoded) {
        Ok(bytes) if !bytes.is_empty() => Ok(Key::from(bytes)),
        _ => Err(SignatureError::InvalidSecret),
    }
}

/// The `v1` tags in the signature header(s). An entry without a comma is `MalformedHeader`;
/// other versions (`v1a`, unknown) are skipped; an undecodable `v1` tag cannot match.
/// Returns `None` when no `v1` entry exists at all.
fn v1_candidates<'a>(
    values: impl Iterator<Item = &'a str>,
) -> Result<Option<Vec<Vec<u8>>>, SignatureError> {
    let mut any_v1 = false;
    let mut candidates = Vec::new();
    for entry in values.flat_map(str::split_ascii_whitespace) {
        let (version, tag) = entry
            .split_once(',')
            .ok_or(SignatureError::MalformedHeader)?;
        if version == "v1" {
            any_v1 = true;
            candidates.extend(common::B64.decode(tag).ok());
        }
    }
    Ok(any_v1.then_some(candidates))
}

/// Errors, in order: secrets (`NoSecretConfigured`, `InvalidSecret`), `MissingMessageId`,
/// `MissingTimestamp`, `MalformedHeader` (timestamp not unix digits, entry without comma,
/// differing repeated id/timestamp), `MissingSignature` (no header or no `v1` entry),
/// `InvalidSignature`, then `TimestampOutOfTolerance`.
pub(super) fn verify(
    secrets: &[SecretString],
    headers: &[(String, String)],
    body: &[u8],
    now: i64,
    tolerance_secs: u64,
) -> Result<Verified, SignatureError> {
    let keys = common::keys(secrets, key)?;
    let id = common::single_header(headers, ID)?.ok_or(SignatureError::MissingMessageId)?;
    let raw_ts =
        common::single_header(headers, TIMESTAMP)?.ok_or(SignatureError::MissingTimestamp)?;
    let signed_at = common::parse_unix(raw_ts)?;
    let candidates = v1_candidates(common::header_values(headers, SIGNATURE))?
        .ok_or(SignatureError::MissingSignature)?;
    let ts = signed_at.to_string();
    let parts: [&[u8]; 5] = [id.as_bytes(), b".", ts.as_bytes(), b".", body];
    let index = common::first_matching_key(&keys, &parts, &candidates)?
        .ok_or(SignatureError::InvalidSignature)?;
    common::check_tolerance(signed_at, now, tolerance_secs)?;
    Ok(Verified {
        secret_index: Some(index),
        signed_at: Some(signed_at),
    })
}

/// Headers for one attempt. A negative timestamp is `InvalidTimestamp`, an empty id
/// `MissingMessageId`.
pub(super) fn sign(
    secret: &str,
    msg_id: &str,
    timestamp: i64,
    body: &[u8],
) -> Result<Vec<(String, String)>, SignatureError> {
    let key = key(secret)?;
    if msg_id.is_empty() {
        return Err(SignatureError::MissingMessageId);
    }
    if timestamp < 0 {
        return Err(SignatureError::InvalidTimestamp);
    }
    let ts = timestamp.to_string();
    let tag = common::hmac_sha256(&key, &[msg_id.as_bytes(), b".", ts.as_bytes(), b".", body])?;
    Ok(vec![
        (ID.to_owned(), msg_id.to_owned()),
        (TIMESTAMP.to_owned(), ts),
        (
            SIGNATURE.to_owned(),
            format!("v1,{}", common::B64.encode(tag)),
        ),
    ])
}
