//! TEMPORARY stub with the agreed API; replaced by the real module.
use secrecy::SecretString;
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(tag = "scheme", rename_all = "snake_case", deny_unknown_fields)]
pub enum SchemeConfig {
    StandardWebhooks,
    Stripe,
    Github,
    Hmac {
        header: String,
        encoding: Option<String>,
    },
    Adyen,
    None,
}
pub struct Verified {
    pub secret_index: Option<usize>,
    pub signed_at: Option<i64>,
}
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SignatureError {
    #[error("invalid signature")]
    InvalidSignature,
}
impl SignatureError {
    pub fn code(&self) -> &'static str {
        "invalid_signature"
    }
}
pub fn verify(
    _scheme: &SchemeConfig,
    _secrets: &[SecretString],
    _headers: &[(String, String)],
    _body: &[u8],
    _now_unix: i64,
    _tolerance_secs: u64,
) -> Result<Verified, SignatureError> {
    Ok(Verified {
        secret_index: None,
        signed_at: None,
    })
}
pub fn sign(
    _scheme: &SchemeConfig,
    _secret: &str,
    _msg_id: &str,
    _timestamp: i64,
    _body: &[u8],
) -> Result<Vec<(String, String)>, SignatureError> {
    Ok(vec![])
}
pub fn sensitive_headers(_scheme: &SchemeConfig) -> Vec<String> {
    vec!["authorization".into()]
}
