//! Random tokens (API tokens, session ids, setup links, CSRF tokens) and the
//! SHA-256 under which they are stored: they carry 256 bits of entropy, so a
//! fast hash is enough; passwords use argon2id (`password`).

use sha2::{Digest, Sha256};

/// The prefix that makes an API token recognisable (in logs, in secret scanners).
pub const TOKEN_PREFIX: &str = "uni_";

/// 32 random bytes, hex-encoded.
pub fn random_hex() -> String {
    let mut bytes = [0u8; 32];
    // The OS random source failing leaves no safe way to go on.
    #[expect(
        clippy::expect_used,
        reason = "no secret can be made without the OS random source"
    )]
    getrandom::fill(&mut bytes).expect("the OS random source is available");
    hex::encode(bytes)
}

/// A new API token: `uni_` and 64 hex digits.
pub fn new_api_token() -> String {
    format!("{TOKEN_PREFIX}{}", random_hex())
}

/// The stored form of a token.
pub fn digest(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// Compares two strings in time independent of where they differ.
pub fn same(a: &str, b: &str) -> bool {
    use subtle::ConstantTimeEq;
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}
