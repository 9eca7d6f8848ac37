//! Standard Webhooks (symmetric `v1`): signed content `{webhook-id}.{webhook-timestamp}.{body}`,
//! HMAC-SHA256 keyed with the base64-decoded secret (`whsec_` prefix optional, padding optional),
//! `webhook-signature` = space-separated `version,base64` entries; any `v1` match passes.
//!
//! Svix signs the same way under `svix-id`, `svix-timestamp` and `svix-signature`. One family is
//! read as a whole, never a mix: `webhook-*` when any of its headers was sent, else `svix-*`.
//! The identity preset reads the delivery id in the same order.

use base64::Engine as _;
use secrecy::SecretString;

use super::common::{self, Key};
use super::{SignatureError, Verified};

/// The three headers of one naming.
pub(super) struct Family {
    pub(super) id: &'static str,
    pub(super) timestamp: &'static str,
    pub(super) signature: &'static str,
}

pub(super) const STANDARD: Family = Family {
    id: "webhook-id",
    timestamp: "webhook-timestamp",
    signature: "webhook-signature",
};

pub(super) const SVIX: Family = Family {
    id: "svix-id",
    timestamp: "svix-timestamp",
    signature: "svix-signature",
};

const PREFIX: &str = "whsec_";

/// `webhook-*` when any of its headers was sent, else `svix-*` when any of those was, else
/// `webhook-*` (whose missing id is then the error).
fn family(headers: &[(String, String)]) -> &'static Family {
    let sent = |f: &Family| {
        [f.id, f.timestamp, f.signature]
            .iter()
            .any(|name| common::header_values(headers, name).next().is_some())
    };
    if !sent(&STANDARD) && sent(&SVIX) {
        &SVIX
    } else {
        &STANDARD
    }
}

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

/// Reads the headers of the family [`family`] picks. Errors, in order: secrets
/// (`NoSecretConfigured`, `InvalidSecret`), `MissingMessageId`, `MissingTimestamp`,
/// `MalformedHeader` (timestamp not unix digits, entry without comma, differing repeated
/// id/timestamp), `MissingSignature` (no header or no `v1` entry), `InvalidSignature`, then
/// `TimestampOutOfTolerance`.
pub(super) fn verify(
    secrets: &[SecretString],
    headers: &[(String, String)],
    body: &[u8],
    now: i64,
    tolerance_secs: u64,
) -> Result<Verified, SignatureError> {
    let keys = common::keys(secrets, key)?;
    let names = family(headers);
    let id = common::single_header(headers, names.id)?.ok_or(SignatureError::MissingMessageId)?;
    let raw_ts =
        common::single_header(headers, names.timestamp)?.ok_or(SignatureError::MissingTimestamp)?;
    let signed_at = common::parse_unix(raw_ts)?;
    let candidates = v1_candidates(common::header_values(headers, names.signature))?
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
        (STANDARD.id.to_owned(), msg_id.to_owned()),
        (STANDARD.timestamp.to_owned(), ts),
        (
            STANDARD.signature.to_owned(),
            format!("v1,{}", common::B64.encode(tag)),
        ),
    ])
}
