//! What every request handler can reach: the engine (database, writer,
//! catalog), the configured sources, and operator access settings.

use std::collections::HashMap;
use std::sync::Arc;

use sea_orm::DatabaseConnection;

use crate::auth::login_token::LoginTokens;
use crate::auth::throttle::LoginThrottle;
use crate::config::{Source, TrustedProxies};
use crate::services::engine::SharedEngine;

pub struct AppState {
    pub engine: SharedEngine,
    /// The configuration's text, for a candidate's replay (`services::shadow`).
    pub config_text: String,
    pub sources: HashMap<String, Arc<Source>>,
    pub access: AccessState,
}

/// Operator access at run time.
pub struct AccessState {
    /// The URL operators reach the server at, without a trailing slash.
    pub public_url: String,
    /// Whether cookies are `Secure` (the public URL is `https://`).
    pub secure: bool,
    pub throttle: LoginThrottle,
    /// Signs the sign-in form's CSRF token.
    pub login_tokens: LoginTokens,
    /// Peers whose forwarded headers are believed.
    pub trusted_proxies: TrustedProxies,
}

impl AppState {
    pub fn db(&self) -> &DatabaseConnection {
        &self.engine.db
    }
}
