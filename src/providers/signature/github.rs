//! GitHub: `x-hub-signature-256: sha256=<hex HMAC-SHA256 of the raw body>`, keyed with the
//! secret string's bytes. Nothing is timestamped: replay protection is delivery-id dedup.

use secrecy::SecretString;

use super::hmac_body::{self, BodyHmac};
use super::{Encoding, SignatureError, Verified};

pub(super) const HEADER: &str = "x-hub-signature-256";

fn scheme() -> BodyHmac<'static> {
    BodyHmac::plain(HEADER, Encoding::Hex, Some("sha256="))
}

pub(super) fn verify(
    secrets: &[SecretString],
    headers: &[(String, String)],
    body: &[u8],
) -> Result<Verified, SignatureError> {
    hmac_body::verify(&scheme(), secrets, headers, body)
}

pub(super) fn sign(secret: &str, body: &[u8]) -> Result<Vec<(String, String)>, SignatureError> {
    hmac_body::sign(&scheme(), secret, body)
}
