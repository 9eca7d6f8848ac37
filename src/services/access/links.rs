//! Operators added from the back-office: the admin picks a name and a role,
//! and hands the new operator a one-time link where they choose their own
//! password — no admin ever types or sees it. The same link resets a
//! forgotten password. A link works once, for `PASSWORD_LINK_VALIDITY`, and
//! a newer link for the same operator replaces it.

use chrono::Utc;
use sea_orm::DatabaseConnection;
use secrecy::SecretString;
use uuid::Uuid;

use super::errors::{AccessError, PASSWORD_LINK_VALIDITY, check_name, uuid_of};
use super::operators::{insert_operator, still_admin};
use crate::auth::password::{self};
use crate::auth::{Role, secrets};
use crate::domain::journal::{Actor, JournalEvent, OperatorPasswordChanged, PasswordLinkIssued};
use crate::store::access::{self as store, OperatorRow};
use crate::store::transaction;

/// Adds an enabled operator who cannot sign in until they set a password
/// through the link returned (its token; only the hash is kept).
pub async fn invite_operator(
    db: &DatabaseConnection,
    name: &str,
    role: Role,
    by: Actor,
) -> Result<(Uuid, String), AccessError> {
    check_name(name)?;
    // A password nobody knows: the account is closed until the link is used.
    let unusable = password::hash(SecretString::from(secrets::random_hex())).await?;
    let token = secrets::random_hex();
    let now = Utc::now();
    let issued_by = by.issuer().map(|id| id.to_string());
    let id = transaction(db, async |tx| {
        let id = insert_operator(tx, name, role, unusable, by).await?;
        let link = secrets::digest(&token);
        store::replace_password_link(
            tx.connection(),
            &id.to_string(),
            link,
            now,
            now + PASSWORD_LINK_VALIDITY,
            issued_by,
        )
        .await?;
        Ok::<_, AccessError>(id)
    })
    .await?;
    Ok((id, token))
}

/// A new set-password link for an existing operator (a forgotten
/// password); their current password keeps working until the link is used.
/// Journaled with who handed it out (whoever holds a link can set the
/// password), in the transaction that replaces any older link.
pub async fn password_link(
    db: &DatabaseConnection,
    name: &str,
    by: Actor,
) -> Result<String, AccessError> {
    let token = secrets::random_hex();
    let now = Utc::now();
    transaction(db, async |tx| {
        still_admin(tx.connection(), &by).await?;
        let operator = store::operator_by_name(tx.connection(), name)
            .await?
            .ok_or_else(|| AccessError::UnknownOperator(name.to_owned()))?;
        store::replace_password_link(
            tx.connection(),
            &operator.id,
            secrets::digest(&token),
            now,
            now + PASSWORD_LINK_VALIDITY,
            by.issuer().map(|id| id.to_string()),
        )
        .await?;
        let event = JournalEvent::PasswordLinkIssued(PasswordLinkIssued {
            operator_id: uuid_of(&operator.id)?,
            name: operator.name,
            by,
        });
        tx.record(None, event, now).await?;
        Ok::<_, AccessError>(())
    })
    .await?;
    Ok(token)
}

/// The enabled operator a live link is for.
pub async fn link_holder(
    db: &DatabaseConnection,
    token: &str,
) -> Result<Option<OperatorRow>, AccessError> {
    let Some(link) = store::password_link(db, &secrets::digest(token)).await? else {
        return Ok(None);
    };
    if link.used_at.is_some() || link.expires_at <= Utc::now() {
        return Ok(None);
    }
    Ok(store::operator_by_id(db, &link.operator_id)
        .await?
        .filter(|o| o.enabled))
}

/// Sets the link holder's password, uses the link up and ends any session
/// they had; returns their name, to sign in with.
pub async fn set_password_by_link(
    db: &DatabaseConnection,
    token: &str,
    password: SecretString,
) -> Result<String, AccessError> {
    password::check(&password)?;
    let hash = password::hash(password).await?;
    let now = Utc::now();
    let digest = secrets::digest(token);
    transaction(db, async |tx| {
        let link = store::password_link(tx.connection(), &digest)
            .await?
            .ok_or(AccessError::LinkClosed)?;
        let operator = store::operator_by_id(tx.connection(), &link.operator_id)
            .await?
            .filter(|o| o.enabled)
            .ok_or(AccessError::LinkClosed)?;
        if !store::claim_password_link(tx.connection(), &digest, now).await? {
            return Err(AccessError::LinkClosed);
        }
        store::set_password_hash(tx.connection(), &operator.id, &hash).await?;
        store::delete_sessions_of(tx.connection(), &operator.id).await?;
        let id = uuid_of(&operator.id)?;
        let event = JournalEvent::OperatorPasswordChanged(OperatorPasswordChanged {
            operator_id: id,
            name: operator.name.clone(),
            // They chose it themselves, through the link.
            by: Actor::Operator {
                id,
                name: operator.name.clone(),
            },
        });
        tx.record(None, event, now).await?;
        Ok(operator.name)
    })
    .await
}
