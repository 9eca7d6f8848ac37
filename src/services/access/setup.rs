//! The first-run setup link: while no enabled admin exists, a one-time token
//! that creates the first one, then is used up.

use chrono::{DateTime, Utc};
use sea_orm::DatabaseConnection;
use secrecy::SecretString;
use uuid::Uuid;

use super::errors::{AccessError, SETUP_LINK_VALIDITY, check_name};
use super::operators::insert_operator;
use crate::auth::password::{self};
use crate::auth::{Role, secrets};
use crate::domain::journal::{Actor, JournalEvent, SetupCompleted};
use crate::store::access::{self as store};
use crate::store::transaction;

/// When no enabled admin exists: a new one-time setup token (replacing any
/// unused one), valid `SETUP_LINK_VALIDITY`. Its hash only is stored.
pub async fn open_setup(db: &DatabaseConnection) -> Result<Option<String>, AccessError> {
    let token = secrets::random_hex();
    let now = Utc::now();
    transaction(db, async |tx| {
        let conn = tx.connection();
        store::lock_setup(conn).await?;
        if store::any_enabled_admin(conn).await? {
            return Ok(None);
        }
        let expires = now + SETUP_LINK_VALIDITY;
        store::replace_setup_token(conn, secrets::digest(&token), now, expires).await?;
        Ok(Some(token))
    })
    .await
}

/// Whether a setup token may still be used.
pub async fn setup_open(db: &DatabaseConnection, token: &str) -> Result<bool, AccessError> {
    let row = store::setup_token(db, &secrets::digest(token)).await?;
    let live = row.is_some_and(|r| r.used_at.is_none() && Utc::now() < r.expires_at);
    Ok(live && !store::any_enabled_admin(db).await?)
}

/// Creates the first admin through the setup link, which is then used up.
pub async fn complete_setup(
    db: &DatabaseConnection,
    token: &str,
    name: &str,
    password: SecretString,
) -> Result<Uuid, AccessError> {
    if !setup_open(db, token).await? {
        return Err(AccessError::SetupClosed);
    }
    check_name(name)?;
    password::check(&password)?;
    let hash = password::hash(password).await?;
    let now: DateTime<Utc> = Utc::now();
    transaction(db, async |tx| {
        store::lock_setup(tx.connection()).await?;
        if store::any_enabled_admin(tx.connection()).await?
            || !store::claim_setup_token(tx.connection(), &secrets::digest(token), now).await?
        {
            return Err(AccessError::SetupClosed);
        }
        let id = insert_operator(tx, name, Role::Admin, hash, Actor::Setup).await?;
        let event = JournalEvent::SetupCompleted(SetupCompleted {
            operator_id: id,
            name: name.to_owned(),
        });
        tx.record(None, event, now).await?;
        Ok(id)
    })
    .await
}
