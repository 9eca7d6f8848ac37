//! Operator access: accounts, API tokens, sign-in and the first-run setup
//! link. Every change is journaled (an audit event naming who acted) in the
//! transaction that writes it; passwords are hashed before the transaction
//! begins, so none is held open across an argon2 computation.

use chrono::{DateTime, Utc};
use sea_orm::{DatabaseConnection, DbErr};
use secrecy::SecretString;
use uuid::Uuid;

use crate::auth::password::{self, PasswordRule};
use crate::auth::{Principal, PrincipalKind, Role, secrets};
use crate::domain::journal::{
    Actor, JournalEvent, LoginFailed, OperatorCreated, OperatorDisabled, OperatorLoggedIn,
    OperatorLoggedOut, OperatorPasswordChanged, OperatorRoleChanged, SetupCompleted, TokenIssued,
    TokenRevoked,
};
use crate::store::access::{self as store, OperatorRow, TokenRow};
use crate::store::{Tx, transaction};

/// How long a first-run setup link stays valid.
pub const SETUP_LINK_VALIDITY: chrono::Duration = chrono::Duration::hours(1);
const MAX_NAME: usize = 64;

/// Why an access operation was refused.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    #[error("a name has 1 to {MAX_NAME} characters: letters, digits, '.', '-', '_' or '@'")]
    InvalidName,
    #[error(transparent)]
    Password(#[from] PasswordRule),
    #[error("the name {0:?} is taken")]
    NameTaken(String),
    #[error("no operator named {0:?}")]
    UnknownOperator(String),
    #[error("no token named {0:?}")]
    UnknownToken(String),
    #[error("the setup link is invalid, expired or already used")]
    SetupClosed,
    #[error("storage: {0}")]
    Storage(#[from] anyhow::Error),
}

impl From<DbErr> for AccessError {
    fn from(error: DbErr) -> Self {
        Self::Storage(error.into())
    }
}

/// A sign-in that did not open a session: one answer whatever the reason.
#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    #[error("unknown name or wrong password")]
    Refused,
    #[error("storage: {0}")]
    Storage(#[from] anyhow::Error),
}

impl From<DbErr> for LoginError {
    fn from(error: DbErr) -> Self {
        Self::Storage(error.into())
    }
}

fn check_name(name: &str) -> Result<(), AccessError> {
    let fine = !name.is_empty()
        && name.chars().count() <= MAX_NAME
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '.' | '-' | '_' | '@'));
    fine.then_some(()).ok_or(AccessError::InvalidName)
}

fn role_of(text: &str) -> Result<Role, AccessError> {
    text.parse()
        .map_err(|e: crate::auth::roles::UnknownRole| AccessError::Storage(e.into()))
}

fn uuid_of(text: &str) -> Result<Uuid, AccessError> {
    text.parse()
        .map_err(|e: uuid::Error| AccessError::Storage(e.into()))
}

fn taken(error: DbErr, name: &str) -> AccessError {
    if store::is_unique_violation(&error) {
        AccessError::NameTaken(name.to_owned())
    } else {
        error.into()
    }
}

/// Creates an enabled operator.
pub async fn create_operator(
    db: &DatabaseConnection,
    name: &str,
    role: Role,
    password: SecretString,
    by: Actor,
) -> Result<Uuid, AccessError> {
    check_name(name)?;
    password::check(&password)?;
    let hash = password::hash(password).await?;
    transaction(db, async |tx| {
        insert_operator(tx, name, role, hash, by).await
    })
    .await
}

async fn insert_operator(
    tx: &mut Tx<'_>,
    name: &str,
    role: Role,
    password_hash: String,
    by: Actor,
) -> Result<Uuid, AccessError> {
    let now = Utc::now();
    let id = Uuid::now_v7();
    let row = OperatorRow {
        id: id.to_string(),
        name: name.to_owned(),
        role: role.as_str().to_owned(),
        password_hash,
        enabled: true,
        created_at: now,
        last_login_at: None,
    };
    store::insert_operator(tx.connection(), row)
        .await
        .map_err(|e| taken(e, name))?;
    let event = JournalEvent::OperatorCreated(OperatorCreated {
        operator_id: id,
        name: name.to_owned(),
        role: role.as_str().to_owned(),
        by,
    });
    tx.record(None, event, now).await?;
    Ok(id)
}

async fn existing<C: sea_orm::ConnectionTrait>(
    conn: &C,
    name: &str,
) -> Result<OperatorRow, AccessError> {
    store::operator_by_name(conn, name)
        .await?
        .ok_or_else(|| AccessError::UnknownOperator(name.to_owned()))
}

/// Disables an operator and ends their sessions. Disabling a disabled
/// operator changes nothing and journals nothing.
pub async fn disable_operator(
    db: &DatabaseConnection,
    name: &str,
    by: Actor,
) -> Result<bool, AccessError> {
    transaction(db, async |tx| {
        let operator = existing(tx.connection(), name).await?;
        if !operator.enabled {
            return Ok(false);
        }
        store::disable_operator(tx.connection(), &operator.id).await?;
        store::delete_sessions_of(tx.connection(), &operator.id).await?;
        let event = JournalEvent::OperatorDisabled(OperatorDisabled {
            operator_id: uuid_of(&operator.id)?,
            name: operator.name,
            by,
        });
        tx.record(None, event, Utc::now()).await?;
        Ok(true)
    })
    .await
}

/// Changes an operator's role; returns the previous one.
pub async fn set_role(
    db: &DatabaseConnection,
    name: &str,
    role: Role,
    by: Actor,
) -> Result<Role, AccessError> {
    transaction(db, async |tx| {
        let operator = existing(tx.connection(), name).await?;
        let from = role_of(&operator.role)?;
        if from != role {
            store::set_role(tx.connection(), &operator.id, role.as_str()).await?;
            let event = JournalEvent::OperatorRoleChanged(OperatorRoleChanged {
                operator_id: uuid_of(&operator.id)?,
                name: operator.name,
                from: from.as_str().to_owned(),
                to: role.as_str().to_owned(),
                by,
            });
            tx.record(None, event, Utc::now()).await?;
        }
        Ok(from)
    })
    .await
}

/// Sets an operator's password and ends every session they have.
pub async fn set_password(
    db: &DatabaseConnection,
    name: &str,
    password: SecretString,
    by: Actor,
) -> Result<(), AccessError> {
    password::check(&password)?;
    let hash = password::hash(password).await?;
    transaction(db, async |tx| {
        let operator = existing(tx.connection(), name).await?;
        store::set_password_hash(tx.connection(), &operator.id, &hash).await?;
        store::delete_sessions_of(tx.connection(), &operator.id).await?;
        let event = JournalEvent::OperatorPasswordChanged(OperatorPasswordChanged {
            operator_id: uuid_of(&operator.id)?,
            name: operator.name,
            by,
        });
        tx.record(None, event, Utc::now()).await?;
        Ok(())
    })
    .await
}

/// Whether `password` is the current password of `operator`.
pub async fn check_password(
    db: &DatabaseConnection,
    operator: Uuid,
    password: SecretString,
) -> Result<bool, AccessError> {
    let stored = store::operator_by_id(db, &operator.to_string())
        .await?
        .map(|o| o.password_hash);
    Ok(password::verify(password, stored).await?)
}

pub async fn operators(db: &DatabaseConnection) -> Result<Vec<OperatorRow>, AccessError> {
    Ok(store::operators(db).await?)
}

pub async fn tokens(db: &DatabaseConnection) -> Result<Vec<TokenRow>, AccessError> {
    Ok(store::tokens(db).await?)
}

/// Checks a name and password. Every outcome costs one argon2 verification;
/// a refusal is journaled with its reason (never the password).
pub async fn login(
    db: &DatabaseConnection,
    name: &str,
    password: SecretString,
    client: Option<String>,
) -> Result<Principal, LoginError> {
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
                Ok(principal)
            }
            (operator, reason) => {
                let event = JournalEvent::LoginFailed(LoginFailed {
                    name: name.chars().take(MAX_NAME).collect(),
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
    let Some(row) = store::operator_by_id(db, id).await? else {
        return Ok(None);
    };
    if !row.enabled {
        return Ok(None);
    }
    Ok(Some(Principal {
        kind: PrincipalKind::Operator,
        id: uuid_of(&row.id)?,
        name: row.name,
        role: role_of(&row.role)?,
    }))
}

/// Issues an API token; returns it (shown once, only its hash is kept).
pub async fn issue_token(
    db: &DatabaseConnection,
    name: &str,
    role: Role,
    expires_in_days: Option<u32>,
    by: Actor,
) -> Result<String, AccessError> {
    check_name(name)?;
    let token = secrets::new_api_token();
    let now = Utc::now();
    let id = Uuid::now_v7();
    let expires_at = expires_in_days.map(|d| now + chrono::Duration::days(i64::from(d)));
    let row = TokenRow {
        id: id.to_string(),
        name: name.to_owned(),
        role: role.as_str().to_owned(),
        token_hash: secrets::digest(&token),
        created_at: now,
        expires_at,
        revoked_at: None,
    };
    transaction(db, async |tx| {
        store::insert_token(tx.connection(), row)
            .await
            .map_err(|e| taken(e, name))?;
        let event = JournalEvent::TokenIssued(TokenIssued {
            token_id: id,
            name: name.to_owned(),
            role: role.as_str().to_owned(),
            expires_at,
            by,
        });
        tx.record(None, event, now).await?;
        Ok::<_, AccessError>(())
    })
    .await?;
    Ok(token)
}

/// Revokes a token; false when it already was.
pub async fn revoke_token(
    db: &DatabaseConnection,
    name: &str,
    by: Actor,
) -> Result<bool, AccessError> {
    let now = Utc::now();
    transaction(db, async |tx| {
        let token = store::token_by_name(tx.connection(), name)
            .await?
            .ok_or_else(|| AccessError::UnknownToken(name.to_owned()))?;
        if !store::revoke_token(tx.connection(), &token.id, now).await? {
            return Ok(false);
        }
        let event = JournalEvent::TokenRevoked(TokenRevoked {
            token_id: uuid_of(&token.id)?,
            name: token.name,
            by,
        });
        tx.record(None, event, now).await?;
        Ok(true)
    })
    .await
}

/// The caller a bearer token stands for, if it is live.
pub async fn token(db: &DatabaseConnection, token: &str) -> Result<Option<Principal>, AccessError> {
    let Some(row) = store::token_by_hash(db, &secrets::digest(token)).await? else {
        return Ok(None);
    };
    let now = Utc::now();
    if row.revoked_at.is_some() || row.expires_at.is_some_and(|at| at <= now) {
        return Ok(None);
    }
    Ok(Some(Principal {
        kind: PrincipalKind::Token,
        id: uuid_of(&row.id)?,
        name: row.name,
        role: role_of(&row.role)?,
    }))
}

/// When no enabled admin exists: a new one-time setup token (replacing any
/// unused one), valid `SETUP_LINK_VALIDITY`. Its hash only is stored.
pub async fn open_setup(db: &DatabaseConnection) -> Result<Option<String>, AccessError> {
    if store::any_enabled_admin(db).await? {
        return Ok(None);
    }
    let token = secrets::random_hex();
    let now = Utc::now();
    store::replace_setup_token(db, secrets::digest(&token), now, now + SETUP_LINK_VALIDITY).await?;
    Ok(Some(token))
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
