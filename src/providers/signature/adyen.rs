//! Adyen. The secret is the hex HMAC key (hex-decoded into the key bytes).
//! - Classic notifications `{"notificationItems":[{"NotificationRequestItem":{..}}]}`: every item
//!   carries base64 HMAC-SHA256 of `pspReference:originalReference:merchantAccountCode:
//!   merchantReference:amount.value:amount.currency:eventCode:success` (missing = empty, values
//!   not escaped) in `additionalData.hmacSignature`; all items must verify, with one key.
//! - Platform / management webhooks: when an `HmacSignature` header is present, it holds the
//!   base64 HMAC-SHA256 of the raw body, and that is what is verified instead.
//!
//! Body that is not JSON (and no header): `MalformedHeader` (the signature's carrier is
//! unreadable). JSON without items, or an item without `hmacSignature`: `MissingSignature`.

use base64::Engine as _;
use secrecy::SecretString;
use serde_json::Value;

use super::common::{self, Key};
use super::hmac_body::{self, BodyHmac};
use super::{Encoding, SignatureError, Verified};
use crate::domain::strict_json;

pub(super) const HEADER: &str = "hmacsignature";

/// Secret -> key: hex-decoded (either case); empty or not hex is refused.
pub(super) fn key(secret: &str) -> Result<Key, SignatureError> {
    match hex::decode(secret) {
        Ok(bytes) if !bytes.is_empty() => Ok(Key::from(bytes)),
        _ => Err(SignatureError::InvalidSecret),
    }
}

fn raw_body() -> BodyHmac<'static> {
    BodyHmac {
        header: HEADER,
        encoding: Encoding::Base64,
        prefix: None,
        derive: key,
    }
}

/// The text Adyen signs for one `NotificationRequestItem`.
pub(super) fn data_to_sign(item: &Value) -> String {
    fn text(value: Option<&Value>) -> String {
        match value {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            Some(Value::Bool(b)) => b.to_string(),
            _ => String::new(),
        }
    }
    let amount = item.get("amount");
    [
        text(item.get("pspReference")),
        text(item.get("originalReference")),
        text(item.get("merchantAccountCode")),
        text(item.get("merchantReference")),
        text(amount.and_then(|a| a.get("value"))),
        text(amount.and_then(|a| a.get("currency"))),
        text(item.get("eventCode")),
        text(item.get("success")),
    ]
    .join(":")
}

/// Whether `item`'s signed fields are in the one form Adyen sends them, the
/// only one a key may read: the signed text cannot tell `"true"` from
/// `true`, `"1500"` from `1500`, a missing field from `""`, nor where a colon
/// inside a field ends it. So every signed field present is a string but
/// `amount.value`, an integer; `success` is `"true"` or `"false"`;
/// no string field present is empty (absent and `""` sign alike); and no
/// field but `merchantReference` (the merchant's own text) holds a colon,
/// which leaves one way to split the signed text.
fn in_sent_form(item: &Value) -> bool {
    let amount = item.get("amount");
    let strings = [
        item.get("pspReference"),
        item.get("originalReference"),
        item.get("merchantAccountCode"),
        amount.and_then(|a| a.get("currency")),
        item.get("eventCode"),
        item.get("success"),
    ];
    let plain = strings.iter().flatten().all(|v| {
        v.as_str()
            .is_some_and(|s| !s.is_empty() && !s.contains(':'))
    });
    plain
        && item
            .get("merchantReference")
            .is_none_or(|v| v.as_str().is_some_and(|s| !s.is_empty()))
        && amount
            .and_then(|a| a.get("value"))
            .is_none_or(|v| v.as_i64().is_some())
        && item
            .get("success")
            .is_none_or(|v| matches!(v.as_str(), Some("true" | "false")))
}

/// The item objects of a classic notification.
fn items(doc: &Value) -> Result<Vec<&Value>, SignatureError> {
    let list = doc
        .get("notificationItems")
        .and_then(Value::as_array)
        .filter(|l| !l.is_empty())
        .ok_or(SignatureError::MissingSignature)?;
    list.iter()
        .map(|entry| {
            entry
                .get("NotificationRequestItem")
                .filter(|item| item.is_object())
                .ok_or(SignatureError::MalformedHeader)
        })
        .collect()
}

pub(super) fn verify(
    secrets: &[SecretString],
    headers: &[(String, String)],
    body: &[u8],
) -> Result<Verified, SignatureError> {
    if common::header_values(headers, HEADER).next().is_some() {
        return hmac_body::verify(&raw_body(), secrets, headers, body);
    }
    let keys = common::keys(secrets, key)?;
    // Only eight fields of each item are signed: a body the ingest could not
    // read as strict JSON (a member twice, U+0000, nesting past the limit)
    // would verify whatever was added, and each variant be kept and held
    // for a person. Refused here, it leaves a refusal's bounded trace.
    let strict = std::str::from_utf8(body)
        .ok()
        .and_then(|text| strict_json::parse(text, strict_json::Limits::BODY).ok());
    let Some(doc) = strict else {
        return Err(
            match serde_json::from_slice::<serde::de::IgnoredAny>(body) {
                Ok(_) => SignatureError::AmbiguousSignedField,
                Err(_) => SignatureError::MalformedHeader,
            },
        );
    };
    let mut signed = Vec::new();
    let signed_items = items(&doc)?;
    for item in signed_items.iter().copied() {
        let tag = item
            .get("additionalData")
            .and_then(|a| a.get("hmacSignature"))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or(SignatureError::MissingSignature)?;
        let candidates: Vec<Vec<u8>> = common::B64.decode(tag.trim()).ok().into_iter().collect();
        signed.push((data_to_sign(item), candidates));
    }
    for (index, key) in keys.iter().enumerate() {
        let mut all = true;
        for (data, candidates) in &signed {
            let expected = common::hmac_sha256(key, &[data.as_bytes()])?;
            all &= common::matches_any(&expected, candidates);
        }
        if all {
            // Checked once the items are known to be Adyen's: a forged body
            // is refused as such, whatever its fields.
            if !signed_items.iter().all(|item| in_sent_form(item)) {
                return Err(SignatureError::AmbiguousSignedField);
            }
            return Ok(Verified {
                secret_index: Some(index),
                signed_at: None,
            });
        }
    }
    Err(SignatureError::InvalidSignature)
}

/// Platform-webhook style: `hmacsignature` header over the raw body.
pub(super) fn sign(secret: &str, body: &[u8]) -> Result<Vec<(String, String)>, SignatureError> {
    hmac_body::sign(&raw_body(), secret, body)
}

/// Sign every item of a classic notification body, writing `additionalData.hmacSignature`,
/// and return the re-serialised body (object keys come out sorted). Structural problems
/// (not JSON, no items, non-object item or additionalData) are `MalformedHeader`.
pub fn sign_notification(secret: &str, body: &[u8]) -> Result<Vec<u8>, SignatureError> {
    let key = key(secret)?;
    let mut doc: Value =
        serde_json::from_slice(body).map_err(|_| SignatureError::MalformedHeader)?;
    let list = doc
        .get_mut("notificationItems")
        .and_then(Value::as_array_mut)
        .filter(|l| !l.is_empty())
        .ok_or(SignatureError::MalformedHeader)?;
    for entry in list {
        let item = entry
            .get_mut("NotificationRequestItem")
            .and_then(Value::as_object_mut)
            .ok_or(SignatureError::MalformedHeader)?;
        let data = data_to_sign(&Value::Object(item.clone()));
        let tag = common::B64.encode(common::hmac_sha256(&key, &[data.as_bytes()])?);
        let extra = item
            .entry("additionalData")
            .or_insert_with(|| Value::Object(serde_json::Map::new()))
            .as_object_mut()
            .ok_or(SignatureError::MalformedHeader)?;
        extra.insert("hmacSignature".to_owned(), Value::String(tag));
    }
    serde_json::to_vec(&doc).map_err(|_| SignatureError::MalformedHeader)
}
