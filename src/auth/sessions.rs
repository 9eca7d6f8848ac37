//! actix-session's store, on the database (both backends): a session is a
//! row addressed by the SHA-256 of the random id in its cookie, so a copy of
//! the table opens no session. A session ends when idle past its time to live
//! (pushed back on every request), past its absolute lifetime from sign-in,
//! at logout (row deleted), or when its operator is disabled or changes
//! password (rows deleted by operator id).

use std::collections::HashMap;

use actix_session::storage::{LoadError, SaveError, SessionKey, SessionStore, UpdateError};
use actix_web::cookie::time::Duration;
use chrono::Utc;
use sea_orm::DatabaseConnection;

use super::secrets;
use crate::store::access::{self as store, SessionRow};

/// The session key holding the signed-in operator's id.
pub const OPERATOR_KEY: &str = "operator";
/// The session key holding the credential the session was opened with
/// (`access::credential`): a password changed since ends it, even one
/// changed while its sign-in was being checked.
pub const CREDENTIAL_KEY: &str = "credential";
/// The session key holding the CSRF token of the session's forms.
pub const CSRF_KEY: &str = "csrf";

#[derive(Clone)]
pub struct DbSessionStore {
    db: DatabaseConnection,
    absolute: chrono::Duration,
}

impl DbSessionStore {
    pub fn new(db: DatabaseConnection, absolute: chrono::Duration) -> Self {
        Self { db, absolute }
    }
}

type State = HashMap<String, String>;

fn operator_of(state: &State) -> Option<String> {
    state
        .get(OPERATOR_KEY)
        .and_then(|v| serde_json::from_str::<String>(v).ok())
}

fn expiry(ttl: &Duration) -> chrono::DateTime<Utc> {
    Utc::now() + chrono::Duration::seconds(ttl.whole_seconds())
}

impl DbSessionStore {
    async fn insert(&self, state: &State, ttl: &Duration) -> anyhow::Result<SessionKey> {
        store::delete_expired_sessions(&self.db, Utc::now()).await?;
        let key = secrets::random_hex();
        let row = SessionRow {
            id_hash: secrets::digest(&key),
            operator_id: operator_of(state),
            state: serde_json::to_string(state)?,
            created_at: Utc::now(),
            expires_at: expiry(ttl),
        };
        store::insert_session(&self.db, row).await?;
        Ok(SessionKey::try_from(key)?)
    }
}

impl SessionStore for DbSessionStore {
    async fn load(&self, key: &SessionKey) -> Result<Option<State>, LoadError> {
        let hash = secrets::digest(key.as_ref());
        let row = store::session(&self.db, &hash)
            .await
            .map_err(|e| LoadError::Other(e.into()))?;
        let Some(row) = row else { return Ok(None) };
        let now = Utc::now();
        if row.expires_at <= now || row.created_at + self.absolute <= now {
            store::delete_session(&self.db, &hash)
                .await
                .map_err(|e| LoadError::Other(e.into()))?;
            return Ok(None);
        }
        serde_json::from_str(&row.state)
            .map(Some)
            .map_err(|e| LoadError::Deserialization(e.into()))
    }

    async fn save(&self, state: State, ttl: &Duration) -> Result<SessionKey, SaveError> {
        self.insert(&state, ttl).await.map_err(SaveError::Other)
    }

    async fn update(
        &self,
        key: SessionKey,
        state: State,
        ttl: &Duration,
    ) -> Result<SessionKey, UpdateError> {
        let text =
            serde_json::to_string(&state).map_err(|e| UpdateError::Serialization(e.into()))?;
        let hash = secrets::digest(key.as_ref());
        let updated =
            store::update_session(&self.db, &hash, operator_of(&state), text, expiry(ttl))
                .await
                .map_err(|e| UpdateError::Other(e.into()))?;
        if updated {
            return Ok(key);
        }
        // Revoked meanwhile: whatever was signed in stays signed out.
        let mut state = state;
        state.remove(OPERATOR_KEY);
        self.insert(&state, ttl).await.map_err(UpdateError::Other)
    }

    async fn update_ttl(&self, key: &SessionKey, ttl: &Duration) -> anyhow::Result<()> {
        let hash = secrets::digest(key.as_ref());
        Ok(store::extend_session(&self.db, &hash, expiry(ttl)).await?)
    }

    async fn delete(&self, key: &SessionKey) -> anyhow::Result<()> {
        let hash = secrets::digest(key.as_ref());
        Ok(store::delete_session(&self.db, &hash).await?)
    }
}
