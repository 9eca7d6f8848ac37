//! Helpers shared by the schemes: header look-up, key derivation over the configured
//! secrets, HMAC-SHA256, constant-time tag matching, timestamp parsing and tolerance.

use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use hmac::{Hmac, KeyInit, Mac};
use secrecy::{ExposeSecret, SecretSlice, SecretString};
use sha2::Sha256;
use subtle::{Choice, ConstantTimeEq};

use super::SignatureError;

/// Strict standard base64 (canonical padding and trailing bits): used for received tags,
/// so that decoding-then-comparing equals comparing the canonical text.
pub(super) const B64: GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// Lenient standard base64 for configured secrets: padding optional, non-zero trailing
/// bits allowed (the Standard Webhooks vectors need both).
pub(super) const B64_LENIENT: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true),
);

/// A decoded HMAC key, zeroized on drop.
pub(super) type Key = SecretSlice<u8>;

/// The secret string's bytes as key (Stripe, GitHub, generic HMAC). Empty is refused.
pub(super) fn raw_key(secret: &str) -> Result<Key, SignatureError> {
    if secret.is_empty() {
        return Err(SignatureError::InvalidSecret);
    }
    Ok(Key::from(secret.as_bytes().to_vec()))
}

/// Derive every configured secret's key; fails closed if none is configured or any is invalid.
pub(super) fn keys(
    secrets: &[SecretString],
    derive: impl Fn(&str) -> Result<Key, SignatureError>,
) -> Result<Vec<Key>, SignatureError> {
    if secrets.is_empty() {
        return Err(SignatureError::NoSecretConfigured);
    }
    secrets.iter().map(|s| derive(s.expose_secret())).collect()
}

/// HMAC-SHA256 over the concatenation of `parts`.
pub(super) fn hmac_sha256(key: &Key, parts: &[&[u8]]) -> Result<[u8; 32], SignatureError> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key.expose_secret())
        .map_err(|_| SignatureError::InvalidSecret)?;
    for part in parts {
        mac.update(part);
    }
    let tag = mac.finalize().into_bytes();
    let mut out = [0u8; 32];
    out.copy_from_slice(&tag);
    Ok(out)
}

/// True when `expected` equals any candidate; each comparison is constant time and all
/// candidates are always compared.
pub(super) fn matches_any(expected: &[u8], candidates: &[Vec<u8>]) -> bool {
    let mut found = Choice::from(0);
    for candidate in candidates {
        found |= expected.ct_eq(candidate.as_slice());
    }
    found.into()
}

/// Index of the first key whose tag over `parts` matches a candidate.
pub(super) fn first_matching_key(
    keys: &[Key],
    parts: &[&[u8]],
    candidates: &[Vec<u8>],
) -> Result<Option<usize>, SignatureError> {
    for (index, key) in keys.iter().enumerate() {
        if matches_any(&hmac_sha256(key, parts)?, candidates) {
            return Ok(Some(index));
        }
    }
    Ok(None)
}

/// All non-empty (trimmed) values of a header, name matched case-insensitively.
pub(super) fn header_values<'a>(
    headers: &'a [(String, String)],
    name: &'a str,
) -> impl Iterator<Item = &'a str> + 'a {
    headers
        .iter()
        .filter(move |(n, _)| n.trim().eq_ignore_ascii_case(name))
        .map(|(_, v)| v.trim())
        .filter(|v| !v.is_empty())
}

/// The one value of a single-valued header: repeated identical values are tolerated,
/// differing ones are `MalformedHeader`.
pub(super) fn single_header<'a>(
    headers: &'a [(String, String)],
    name: &'a str,
) -> Result<Option<&'a str>, SignatureError> {
    let mut found: Option<&str> = None;
    for value in header_values(headers, name) {
        match found {
            Some(prev) if prev != value => return Err(SignatureError::MalformedHeader),
            _ => found = Some(value),
        }
    }
    Ok(found)
}

/// Unix seconds as sent: ASCII digits only (no sign, no fraction), fitting an i64.
pub(super) fn parse_unix(text: &str) -> Result<i64, SignatureError> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(SignatureError::MalformedHeader);
    }
    text.parse::<i64>()
        .map_err(|_| SignatureError::MalformedHeader)
}

/// `|now - signed_at| <= tolerance`, computed without overflow.
pub(super) fn check_tolerance(
    signed_at: i64,
    now: i64,
    tolerance_secs: u64,
) -> Result<(), SignatureError> {
    let skew = (i128::from(now) - i128::from(signed_at)).unsigned_abs();
    if skew > u128::from(tolerance_secs) {
        Err(SignatureError::TimestampOutOfTolerance)
    } else {
        Ok(())
    }
}
