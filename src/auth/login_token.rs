//! The sign-in form's CSRF token, kept nowhere: a random nonce and an expiry,
//! signed with a server key (HMAC-SHA256). The login page sends it twice,
//! in a short-lived `SameSite=Strict` cookie and in the form's hidden field;
//! a sign-in is checked only when both are present, equal, signed by this
//! server and unexpired (signed double-submit). So showing the form stores
//! nothing: a session is made at sign-in, not for every stranger.

use chrono::{DateTime, Utc};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use super::secrets;

/// How long a login form may be filled in.
pub const LIFETIME: chrono::Duration = chrono::Duration::hours(1);

/// Signs and checks login form tokens; the key never leaves it.
pub struct LoginTokens {
    key: Vec<u8>,
}

impl LoginTokens {
    pub fn new(key: &[u8]) -> Self {
        Self { key: key.to_vec() }
    }

    fn mac(&self, signed: &str) -> String {
        // HMAC takes keys of any length: this cannot fail.
        match Hmac::<Sha256>::new_from_slice(&self.key) {
            Ok(mut mac) => {
                mac.update(b"unicity login form\0");
                mac.update(signed.as_bytes());
                hex::encode(mac.finalize().into_bytes())
            }
            Err(_) => String::new(),
        }
    }

    /// A new token: `<expiry unix seconds>.<nonce>.<signature>`.
    pub fn issue(&self, now: DateTime<Utc>) -> String {
        let signed = format!("{}.{}", (now + LIFETIME).timestamp(), secrets::random_hex());
        let mac = self.mac(&signed);
        format!("{signed}.{mac}")
    }

    /// Whether `token` was issued by this key and has not expired at `now`.
    pub fn valid(&self, token: &str, now: DateTime<Utc>) -> bool {
        let Some((signed, mac)) = token.rsplit_once('.') else {
            return false;
        };
        let expiry = signed
            .split_once('.')
            .and_then(|(expiry, _)| expiry.parse::<i64>().ok());
        let expected = self.mac(signed);
        !expected.is_empty()
            && secrets::same(&expected, mac)
            && expiry.is_some_and(|e| now.timestamp() < e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_valid_until_it_expires_and_only_for_its_key() {
        let tokens = LoginTokens::new(b"a server key of some length");
        let now = Utc::now();
        let token = tokens.issue(now);
        assert!(tokens.valid(&token, now));
        assert!(tokens.valid(&token, now + LIFETIME - chrono::Duration::seconds(1)));
        assert!(!tokens.valid(&token, now + LIFETIME));
        assert!(!LoginTokens::new(b"another key").valid(&token, now));
        assert_ne!(tokens.issue(now), token, "a fresh nonce each time");
    }

    #[test]
    fn a_changed_expiry_or_nonce_breaks_the_signature() {
        let tokens = LoginTokens::new(b"k");
        let now = Utc::now();
        let token = tokens.issue(now);
        let (expiry, rest) = token.split_once('.').unwrap();
        let later: i64 = expiry.parse::<i64>().unwrap() + 86_400;
        assert!(!tokens.valid(&format!("{later}.{rest}"), now));
        let other = if rest.starts_with('0') { "1" } else { "0" };
        assert!(!tokens.valid(&format!("{expiry}.{other}{}", &rest[1..]), now));
        for junk in ["", ".", "..", "1.2.3", &token[..token.len() - 1]] {
            assert!(!tokens.valid(junk, now), "{junk:?}");
        }
    }
}
