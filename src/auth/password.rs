//! Passwords: argon2id with argon2 0.6's defaults (m=19456 KiB, t=2, p=1),
//! hashed and verified on the blocking pool, never on an async worker. A name
//! that matches no operator is verified against a dummy hash so that it costs
//! the same time as a wrong password.

use std::sync::OnceLock;

use argon2::Argon2;
use argon2::password_hash::{PasswordHasher, PasswordVerifier, phc::PasswordHash};
use secrecy::{ExposeSecret, SecretString};

pub const MIN_LENGTH: usize = 12;
pub const MAX_LENGTH: usize = 128;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PasswordRule {
    #[error("a password has at least {MIN_LENGTH} characters")]
    TooShort,
    #[error("a password has at most {MAX_LENGTH} characters")]
    TooLong,
}

/// Length is the only rule: no composition rules.
pub fn check(password: &SecretString) -> Result<(), PasswordRule> {
    let length = password.expose_secret().chars().count();
    if length < MIN_LENGTH {
        Err(PasswordRule::TooShort)
    } else if length > MAX_LENGTH {
        Err(PasswordRule::TooLong)
    } else {
        Ok(())
    }
}

/// The PHC string of `password` (argon2id, random salt).
pub async fn hash(password: SecretString) -> anyhow::Result<String> {
    tokio::task::spawn_blocking(move || hash_now(&password)).await?
}

fn hash_now(password: &SecretString) -> anyhow::Result<String> {
    Argon2::default()
        .hash_password(password.expose_secret().as_bytes())
        .map(|h| h.to_string())
        .map_err(|e| anyhow::anyhow!("cannot hash a password: {e}"))
}

/// Whether `password` matches `stored`; with `None` (no such operator) a
/// dummy hash is verified instead and the answer is false.
pub async fn verify(password: SecretString, stored: Option<String>) -> anyhow::Result<bool> {
    tokio::task::spawn_blocking(move || {
        let dummy;
        let phc = match &stored {
            Some(phc) => phc.as_str(),
            None => {
                dummy = dummy_hash()?;
                dummy
            }
        };
        let parsed =
            PasswordHash::new(phc).map_err(|e| anyhow::anyhow!("unreadable password hash: {e}"))?;
        let matches = Argon2::default()
            .verify_password(password.expose_secret().as_bytes(), &parsed)
            .is_ok();
        Ok(matches && stored.is_some())
    })
    .await?
}

fn dummy_hash() -> anyhow::Result<&'static str> {
    static DUMMY: OnceLock<String> = OnceLock::new();
    if let Some(hash) = DUMMY.get() {
        return Ok(hash);
    }
    let hash = hash_now(&SecretString::from(super::secrets::random_hex()))?;
    Ok(DUMMY.get_or_init(|| hash))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_hash_verifies_its_password_only() {
        let phc = hash(SecretString::from("correct horse battery"))
            .await
            .unwrap();
        assert!(phc.starts_with("$argon2id$"), "{phc}");
        assert!(
            verify(
                SecretString::from("correct horse battery"),
                Some(phc.clone())
            )
            .await
            .unwrap()
        );
        assert!(
            !verify(SecretString::from("correct horse batterY"), Some(phc))
                .await
                .unwrap()
        );
        assert!(
            !verify(SecretString::from("anything at all"), None)
                .await
                .unwrap()
        );
    }

    #[test]
    fn length_is_the_only_rule() {
        assert_eq!(
            check(&SecretString::from("short")),
            Err(PasswordRule::TooShort)
        );
        assert_eq!(check(&SecretString::from("a".repeat(12))), Ok(()));
        assert_eq!(check(&SecretString::from("a".repeat(128))), Ok(()));
        assert_eq!(
            check(&SecretString::from("a".repeat(129))),
            Err(PasswordRule::TooLong)
        );
    }
}
