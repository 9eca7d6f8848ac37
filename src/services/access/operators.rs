//! Operator accounts: created, disabled, their role and password changed —
//! each change journaled with who made it, in the transaction that writes it;
//! a disabled operator or a new password ends their sessions.

use chrono::Utc;
use sea_orm::DatabaseConnection;
use secrecy::SecretString;
use uuid::Uuid;

use super::errors::{AccessError, check_name, role_of, taken, uuid_of};
use crate::auth::password::{self};
use crate::auth::{Principal, Role};
use crate::domain::journal::{
    Actor, JournalEvent, LoginFailed, OperatorCreated, OperatorDisabled, OperatorPasswordChanged,
    OperatorRoleChanged,
};
use crate::store::access::{self as store, OperatorRow};
use crate::store::{Tx, transaction};

use super::withdraw::{Withdrawn, withdraw_issued};

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

pub(super) async fn insert_operator(
    tx: &mut Tx<'_>,
    name: &str,
    role: Role,
    password_hash: String,
    by: Actor,
) -> Result<Uuid, AccessError> {
    still_admin(tx.connection(), &by).await?;
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

/// Refuses what an operator or a token no longer an enabled admin's asks
/// for: read in the transaction that acts, admins locked as a demotion locks
/// them (`store::enabled_admins`), so that a request let in as an admin's
/// while an admin demoted or disabled its author does nothing. The host's
/// command line and the first-run setup act as themselves.
pub(super) async fn still_admin<C: sea_orm::ConnectionTrait>(
    conn: &C,
    by: &Actor,
) -> Result<(), AccessError> {
    let admin = match by {
        Actor::Operator { id, .. } => store::enabled_admins(conn).await?.contains(&id.to_string()),
        // Held: a revocation of this token waits for what it issues here,
        // then withdraws it too.
        Actor::Token { id, .. } => {
            store::token_held(conn, &id.to_string())
                .await?
                .is_some_and(|t| {
                    t.revoked_at.is_none()
                        && t.expires_at.is_none_or(|at| at > Utc::now())
                        && t.role == Role::Admin.as_str()
                })
        }
        _ => true,
    };
    if admin {
        Ok(())
    } else {
        Err(AccessError::NoLongerAdmin)
    }
}

/// Refuses a change to operator `changed` (a new `role`, or `None`:
/// disabled) that an operator or a token no longer an enabled admin's asks
/// for (`still_admin`), or that would leave no enabled admin. Read in the
/// changing transaction, admins locked (`store::enabled_admins`): two
/// admins demoting each other at once cannot both succeed.
async fn keeps_an_admin<C: sea_orm::ConnectionTrait>(
    conn: &C,
    by: &Actor,
    changed: &str,
    role: Option<Role>,
) -> Result<(), AccessError> {
    let admins = store::enabled_admins(conn).await?;
    match by {
        Actor::Operator { id, .. } if !admins.contains(&id.to_string()) => {
            return Err(AccessError::NoLongerAdmin);
        }
        Actor::Token { .. } => still_admin(conn, by).await?,
        _ => {}
    }
    let stays_admin = role == Some(Role::Admin);
    if !stays_admin && admins.iter().all(|admin| admin == changed) && !admins.is_empty() {
        return Err(AccessError::LastAdmin);
    }
    Ok(())
}

/// Disables an operator, ends their sessions and withdraws what they
/// issued (`withdraw`). Disabling a disabled operator changes nothing and
/// journals nothing (`None`).
pub async fn disable_operator(
    db: &DatabaseConnection,
    name: &str,
    by: Actor,
) -> Result<Option<Withdrawn>, AccessError> {
    transaction(db, async |tx| {
        let operator = existing(tx.connection(), name).await?;
        if !operator.enabled {
            return Ok(None);
        }
        keeps_an_admin(tx.connection(), &by, &operator.id, None).await?;
        store::disable_operator(tx.connection(), &operator.id).await?;
        store::delete_sessions_of(tx.connection(), &operator.id).await?;
        let now = Utc::now();
        let operator_id = uuid_of(&operator.id)?;
        let event = JournalEvent::OperatorDisabled(OperatorDisabled {
            operator_id,
            name: operator.name.clone(),
            by: by.clone(),
        });
        tx.record(None, event, now).await?;
        let issuer = Actor::Operator {
            id: operator_id,
            name: operator.name,
        };
        Ok(Some(withdraw_issued(tx, issuer, &by, now).await?))
    })
    .await
}

/// A role change: the role before, and what was withdrawn when it took an
/// admin's role away (`withdraw`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleChanged {
    pub from: Role,
    pub withdrawn: Withdrawn,
}

/// Changes an operator's role. An admin made anything else no longer
/// issues, so what they issued is withdrawn with the change.
pub async fn set_role(
    db: &DatabaseConnection,
    name: &str,
    role: Role,
    by: Actor,
) -> Result<RoleChanged, AccessError> {
    transaction(db, async |tx| {
        let operator = existing(tx.connection(), name).await?;
        let from = role_of(&operator.role)?;
        let mut withdrawn = Withdrawn::default();
        if from != role {
            keeps_an_admin(tx.connection(), &by, &operator.id, Some(role)).await?;
            store::set_role(tx.connection(), &operator.id, role.as_str()).await?;
            let now = Utc::now();
            let operator_id = uuid_of(&operator.id)?;
            let event = JournalEvent::OperatorRoleChanged(OperatorRoleChanged {
                operator_id,
                name: operator.name.clone(),
                from: from.as_str().to_owned(),
                to: role.as_str().to_owned(),
                by: by.clone(),
            });
            tx.record(None, event, now).await?;
            if from == Role::Admin {
                let issuer = Actor::Operator {
                    id: operator_id,
                    name: operator.name,
                };
                withdrawn = withdraw_issued(tx, issuer, &by, now).await?;
            }
        }
        Ok(RoleChanged { from, withdrawn })
    })
    .await
}

/// Sets an operator's password, ends every session they have, and voids
/// the set-password links handed out for them.
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
        store::delete_unused_password_links(tx.connection(), &operator.id).await?;
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
/// Whether `password` is `operator`'s, asked again by a signed-in session
/// (a password change): a wrong one is journaled as a failed sign-in
/// (`wrong_current_password`, from `client`), as it is one.
pub async fn check_password(
    db: &DatabaseConnection,
    operator: &Principal,
    password: SecretString,
    client: Option<String>,
) -> Result<bool, AccessError> {
    let stored = store::operator_by_id(db, &operator.id.to_string())
        .await?
        .map(|o| o.password_hash);
    if password::verify(password, stored).await? {
        return Ok(true);
    }
    let event = JournalEvent::LoginFailed(LoginFailed {
        name: operator.name.clone(),
        operator_id: Some(operator.id),
        reason: "wrong_current_password".to_owned(),
        client,
    });
    transaction(db, async |tx| tx.record(None, event, Utc::now()).await).await?;
    Ok(false)
}

pub async fn operators(db: &DatabaseConnection) -> Result<Vec<OperatorRow>, AccessError> {
    Ok(store::operators(db).await?)
}
