//! Keys: the SHA-256 of the RFC 8785 form of a *bound* structure that ties
//! the canonical material to its scope (tenant, source, provider,
//! environment, event or effect type, strategy name@version, scope
//! additions). The same JSON from two sources, environments or strategy
//! versions therefore never yields the same key.
//!
//! Sensitive values enter only as `hmac:<hex>` (HMAC-SHA256 under the server
//! [`KeySecret`]); what humans see abbreviates them further (`hmac:3f2a9c1e…`).
//! Rotating the secret changes every key built from a sensitive value.

use super::jcs;
use super::strategy::StrategyRef;
use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::fmt;
use std::str::FromStr;

/// Version of the bound-structure layout below; part of every key.
const KEY_FORMAT: u32 = 1;
const HMAC_PREFIX: &str = "hmac:";

/// Server secret keying the HMAC of sensitive values. Debug never shows it.
#[derive(Clone)]
pub struct KeySecret(Vec<u8>);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("key secret too short: {0} bytes, at least 16 required")]
pub struct KeySecretError(pub usize);

impl KeySecret {
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, KeySecretError> {
        if bytes.len() < 16 {
            return Err(KeySecretError(bytes.len()));
        }
        Ok(Self(bytes.to_vec()))
    }

    /// `hmac:<hex>` of the canonical form of `value`.
    pub fn seal(&self, value: &Value) -> Value {
        Value::String(self.sealed(value))
    }

    /// Whether `text` is a value as `sealed` writes it.
    pub fn is_sealed(text: &str) -> bool {
        text.strip_prefix(HMAC_PREFIX)
            .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
    }

    /// `hmac:<hex>` of the canonical form of `value`, as text.
    pub fn sealed(&self, value: &Value) -> String {
        let text = jcs::key_string(&jcs::canonical_numbers(value));
        // HMAC accepts keys of any length, so this cannot fail.
        let digest = match Hmac::<Sha256>::new_from_slice(&self.0) {
            Ok(mut mac) => {
                mac.update(text.as_bytes());
                hex::encode(mac.finalize().into_bytes())
            }
            Err(_) => hex::encode(Sha256::digest(text.as_bytes())),
        };
        format!("{HMAC_PREFIX}{digest}")
    }
}

impl KeySecret {
    /// What the database records of the secret its keys are sealed with,
    /// to refuse another one (`store::key_secret`): a keyed digest of a
    /// fixed text no JSON value's canonical form can be (it holds a NUL
    /// outside quotes), so it equals no seal.
    pub fn check(&self) -> String {
        const TEXT: &[u8] = b"unicity key secret check\0v1";
        // HMAC accepts keys of any length: the error cannot happen, and
        // would never show the secret.
        let digest = match Hmac::<Sha256>::new_from_slice(&self.0) {
            Ok(mut mac) => {
                mac.update(TEXT);
                hex::encode(mac.finalize().into_bytes())
            }
            Err(_) => hex::encode(Sha256::digest(TEXT)),
        };
        format!("check:{digest}")
    }
}

impl fmt::Debug for KeySecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("KeySecret(<redacted>)")
    }
}

/// A business identity key: `name@version:<64 hex>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IdentityKey {
    strategy: StrategyRef,
    hex: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not an identity key: `{0}` (expected name@version:<64 hex>)")]
pub struct IdentityKeyError(pub String);

impl IdentityKey {
    pub fn strategy(&self) -> &StrategyRef {
        &self.strategy
    }

    /// The 64 hex digits (what the unique index stores alongside the strategy).
    pub fn hex(&self) -> &str {
        &self.hex
    }

    /// Full stored form, `refund-ref@2:9f2c41…(64 hex)`.
    pub fn full(&self) -> String {
        format!("{}:{}", self.strategy, self.hex)
    }

    /// Short form for humans, `refund-ref@2:9f2c41d07a3b…`.
    pub fn printable(&self) -> String {
        format!("{}:{}…", self.strategy, &self.hex[..12.min(self.hex.len())])
    }
}

impl fmt::Display for IdentityKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.full())
    }
}

impl FromStr for IdentityKey {
    type Err = IdentityKeyError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || IdentityKeyError(s.to_owned());
        let (strategy, hex) = s.rsplit_once(':').ok_or_else(err)?;
        let (name, version) = strategy.rsplit_once('@').ok_or_else(err)?;
        let version = version.parse().map_err(|_| err())?;
        let hex_ok = hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit());
        if name.is_empty() || !hex_ok {
            return Err(err());
        }
        Ok(Self {
            strategy: StrategyRef {
                name: name.to_owned(),
                version,
            },
            hex: hex.to_ascii_lowercase(),
        })
    }
}

impl Serialize for IdentityKey {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.full())
    }
}

impl<'de> Deserialize<'de> for IdentityKey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// Everything a key binds. Two keys are equal only if all of it is.
#[derive(Debug, Clone)]
pub struct Binding<'a> {
    pub tenant: &'a str,
    pub source: &'a str,
    pub provider: &'a str,
    pub environment: &'a str,
    /// `None` when the strategy keys the effect across event types.
    pub event_type: Option<&'a str>,
    pub effect_type: &'a str,
    pub strategy: &'a StrategyRef,
    pub kind: &'a str,
    pub scope: &'a Value,
    pub material: &'a Value,
}

impl Binding<'_> {
    pub fn bound(&self) -> Value {
        json!({
            "format": KEY_FORMAT,
            "tenant": self.tenant,
            "source": self.source,
            "provider": self.provider,
            "environment": self.environment,
            "event_type": self.event_type,
            "effect_type": self.effect_type,
            "strategy": self.strategy.to_string(),
            "kind": self.kind,
            "scope": self.scope,
            "material": self.material,
        })
    }

    pub fn key(&self) -> IdentityKey {
        IdentityKey {
            strategy: self.strategy.clone(),
            hex: sha256_hex(jcs::key_string(&self.bound()).as_bytes()),
        }
    }
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// How the seal of a value that held a whole number too large to read
/// exactly begins instead of `hmac:` (a key refuses it; see `derive`).
pub(crate) const INEXACT_SEAL_PREFIX: &str = "hmac-inexact:";

/// Copy of `value` with every sealed value abbreviated for human eyes.
pub fn mask(value: &Value) -> Value {
    match value {
        Value::String(s) => abbreviated(s).map_or_else(|| value.clone(), Value::String),
        Value::Array(items) => Value::Array(items.iter().map(mask).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), mask(v))).collect())
        }
        other => other.clone(),
    }
}

/// `hmac:3f2a9c1e…` for a seal of either kind, `None` for anything else.
fn abbreviated(s: &str) -> Option<String> {
    [HMAC_PREFIX, INEXACT_SEAL_PREFIX]
        .into_iter()
        .find_map(|prefix| {
            let hex = s.strip_prefix(prefix)?;
            let whole = hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit());
            whole.then(|| format!("{prefix}{}…", &hex[..8]))
        })
}

/// Whether `s` is a sealed value (`hmac:<64 hex>`).
pub fn is_sealed(s: &str) -> bool {
    s.strip_prefix(HMAC_PREFIX)
        .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_and_must_be_long_enough() {
        let s = KeySecret::from_bytes(b"0123456789abcdef-secret").unwrap();
        assert_eq!(format!("{s:?}"), "KeySecret(<redacted>)");
        assert_eq!(
            KeySecret::from_bytes(b"short").unwrap_err(),
            KeySecretError(5)
        );
    }

    #[test]
    fn a_secrets_check_tells_secrets_apart_and_is_no_seal() {
        let a = KeySecret::from_bytes(&[1; 32]).unwrap();
        let b = KeySecret::from_bytes(&[2; 32]).unwrap();
        assert_eq!(a.check(), a.clone().check());
        assert_ne!(a.check(), b.check());
        assert!(a.check().starts_with("check:"));
        assert!(!is_sealed(&a.check()));
        assert_ne!(
            a.check(),
            a.sealed(&Value::String("unicity key secret check".into()))
        );
    }

    #[test]
    fn sealing_is_keyed_and_masking_abbreviates() {
        let a = KeySecret::from_bytes(&[1; 32]).unwrap();
        let b = KeySecret::from_bytes(&[2; 32]).unwrap();
        let v = Value::String("4242424242424242".into());
        let sealed = a.seal(&v);
        assert_ne!(sealed, b.seal(&v));
        let text = sealed.as_str().unwrap();
        assert!(text.starts_with("hmac:") && text.len() == 69);
        assert!(!text.contains("4242424242424242"));
        let masked = mask(&sealed);
        assert_eq!(masked.as_str().unwrap(), format!("{}…", &text[..13]));
        let inexact = text.replacen(HMAC_PREFIX, INEXACT_SEAL_PREFIX, 1);
        let masked = mask(&Value::String(inexact.clone()));
        assert_eq!(masked.as_str().unwrap(), format!("{}…", &inexact[..21]));
    }

    #[test]
    fn identity_keys_round_trip_through_their_full_form() {
        let k = IdentityKey {
            strategy: StrategyRef {
                name: "refund-ref".into(),
                version: 2,
            },
            hex: "9f2c41".repeat(10) + "abcd",
        };
        assert_eq!(k.full().parse::<IdentityKey>().unwrap(), k);
        assert_eq!(k.printable(), "refund-ref@2:9f2c419f2c41…");
        assert_eq!(k.to_string(), k.full());
        assert!("refund-ref@x:00".parse::<IdentityKey>().is_err());
    }
}
