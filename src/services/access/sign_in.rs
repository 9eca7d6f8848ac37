//! Signing in and out, and the operator a session stands for. Every sign-in
//! costs one argon2 verification, known name or not; a refusal is journaled
//! with its reason, never the password, and a name no operator has only as
//! its keyed tag: people type their password into the name field.

use chrono::Utc;
use sea_orm::DatabaseConnection;
use secrecy::SecretString;

use super::errors::{AccessError, LoginError, MAX_NAME, role_of, uuid_of};
use crate::auth::password::{self};
use crate::auth::{Principal, PrincipalKind, secrets};
use crate::domain::identity::KeySecret;
use crate::domain::journal::{JournalEvent, LoginFailed, OperatorLoggedIn, OperatorLoggedOut};
use crate::store::access::{self as store};
use crate::store::transaction;

/// Who signed in, and the credential their password was checked against
/// (see `credential`), for the session to keep.
pub struct SignedIn {
    pub principal: Principal,
    pub credential: String,
}

/// What stands for an operator's password in a session: a digest of its
/// stored hash. A session opened with another than the operator's current
/// one is refused (`operator`), so a password change ends every session
/// opened before it, including one whose sign-in was checked against the
/// old password while the change committed.
fn credential(password_hash: &str) -> String {
    secrets::digest(password_hash)
}

/// Checks a name and password. Every outcome costs one argon2 verification;
/// a refusal is journaled with its reason (never the password), an unknown
/// name as its tag under `secret` (see `unknown_name`).
pub async fn login(
    db: &DatabaseConnection,
    secret: &KeySecret,
    name: &str,
    password: SecretString,
    client: Option<String>,
) -> Result<SignedIn, LoginError> {
    let operator = store::operator_by_name(db, name).await?;
    let stored = operator.as_ref().map(|o| o.password_hash.clone());
    let matches = password::verify(password, stored).await?;
    let now = Utc::now();
    let refusal = match &operator {
        None => Some("unknown_name"),
        Some(_) if !matches => Some("wrong_password"),
        Some(o) if !o.enabled => Some("disabled"),
        Some(_) => None,
    };
    // A refusal is journaled too: the transaction commits either way.
    transaction(db, async |tx| {
        Ok::<_, LoginError>(match (operator, refusal) {
            (Some(operator), None) => {
                let principal = Principal {
                    kind: PrincipalKind::Operator,
                    id: operator.id.parse().map_err(anyhow::Error::from)?,
                    name: operator.name,
                    role: operator.role.parse().map_err(anyhow::Error::from)?,
                };
                store::touch_login(tx.connection(), &operator.id, now).await?;
                let event = JournalEvent::OperatorLoggedIn(OperatorLoggedIn {
                    operator_id: principal.id,
                    name: principal.name.clone(),
                    client,
                });
                tx.record(None, event, now).await?;
                Ok(SignedIn {
                    principal,
                    credential: credential(&operator.password_hash),
                })
            }
            (operator, reason) => {
                let name = match &operator {
                    Some(operator) => operator.name.clone(),
                    None => unknown_name(secret, name),
                };
                let event = JournalEvent::LoginFailed(LoginFailed {
                    name,
                    operator_id: operator.and_then(|o| o.id.parse().ok()),
                    reason: reason.unwrap_or("unknown_name").to_owned(),
                    client,
                });
                tx.record(None, event, now).await?;
                Err(LoginError::Refused)
            }
        })
    })
    .await?
}

/// What the journal keeps of a name no operator has: its HMAC under the
/// server's secret (`hmac:<64 hex>`), so the same name typed again is
/// recognisable in the audit trail while a password typed into the name
/// field never reaches the append-only journal.
pub fn unknown_name(secret: &KeySecret, typed: &str) -> String {
    let typed: String = typed.chars().take(MAX_NAME).collect();
    secret.sealed(&serde_json::Value::String(typed))
}

pub async fn logout(db: &DatabaseConnection, principal: &Principal) -> Result<(), AccessError> {
    let event = JournalEvent::OperatorLoggedOut(OperatorLoggedOut {
        operator_id: principal.id,
        name: principal.name.clone(),
    });
    transaction(db, async |tx| tx.record(None, event, Utc::now()).await).await?;
    Ok(())
}

/// The enabled operator with this id, as a caller.
pub async fn operator(db: &DatabaseConnection, id: &str) -> Result<Option<Principal>, AccessError> {
    operator_with(db, id, None).await
}

/// The enabled operator a session stands for, if the password it was
/// opened with is still theirs.
pub async fn session_operator(
    db: &DatabaseConnection,
    id: &str,
    opened_with: &str,
) -> Result<Option<Principal>, AccessError> {
    operator_with(db, id, Some(opened_with)).await
}

async fn operator_with(
    db: &DatabaseConnection,
    id: &str,
    opened_with: Option<&str>,
) -> Result<Option<Principal>, AccessError> {
    let row = store::operator_by_id(db, id).await?.filter(|row| {
        row.enabled
            && opened_with
                .is_none_or(|opened| secrets::same(opened, &credential(&row.password_hash)))
    });
    enabled(row)
}

/// The principal an enabled operator's row stands for.
pub(super) fn enabled(row: Option<store::OperatorRow>) -> Result<Option<Principal>, AccessError> {
    let Some(row) = row.filter(|row| row.enabled) else {
        return Ok(None);
    };
    Ok(Some(Principal {
        kind: PrincipalKind::Operator,
        id: uuid_of(&row.id)?,
        name: row.name,
        role: role_of(&row.role)?,
    }))
}
