//! API tokens: issued (shown once, only the hash kept), revoked, and the
//! caller a live token stands for.

use chrono::Utc;
use sea_orm::DatabaseConnection;
use uuid::Uuid;

use super::errors::{AccessError, check_name, role_of, taken, uuid_of};
use super::operators::still_admin;
use super::withdraw::{Withdrawn, withdraw_issued};
use crate::auth::{Principal, PrincipalKind, Role, secrets};
use crate::domain::journal::{Actor, JournalEvent, TokenIssued, TokenRevoked};
use crate::store::access::{self as store, TokenRow};
use crate::store::transaction;

pub async fn tokens(db: &DatabaseConnection) -> Result<Vec<TokenRow>, AccessError> {
    Ok(store::tokens(db).await?)
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
        issued_by: by.issuer().map(|id| id.to_string()),
    };
    transaction(db, async |tx| {
        still_admin(tx.connection(), &by).await?;
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

/// Revokes a token and what it issued (`withdraw`); `None` when it
/// already was revoked.
pub async fn revoke_token(
    db: &DatabaseConnection,
    name: &str,
    by: Actor,
) -> Result<Option<Withdrawn>, AccessError> {
    let now = Utc::now();
    transaction(db, async |tx| {
        still_admin(tx.connection(), &by).await?;
        let token = store::token_by_name(tx.connection(), name)
            .await?
            .ok_or_else(|| AccessError::UnknownToken(name.to_owned()))?;
        if !store::revoke_token(tx.connection(), &token.id, now).await? {
            return Ok(None);
        }
        let token_id = uuid_of(&token.id)?;
        let event = JournalEvent::TokenRevoked(TokenRevoked {
            token_id,
            name: token.name.clone(),
            by: by.clone(),
            issuer_withdrawn: None,
        });
        tx.record(None, event, now).await?;
        let revoked = Actor::Token {
            id: token_id,
            name: token.name,
        };
        Ok(Some(withdraw_issued(tx, revoked, &by, now).await?))
    })
    .await
}

/// The caller a bearer token stands for, if it is live.
pub async fn token(db: &DatabaseConnection, token: &str) -> Result<Option<Principal>, AccessError> {
    let row = store::token_by_hash(db, &secrets::digest(token)).await?;
    live(row)
}

pub(super) fn live(row: Option<store::TokenRow>) -> Result<Option<Principal>, AccessError> {
    let Some(row) = row else {
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
