//! Audit events of operator access. Each names who acted (`by`): an operator,
//! an API token, the command line on the host, or the first-run setup link.
//! No payload ever holds a password, a token or a hash of either.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Who performed an audited action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Actor {
    Operator {
        id: Uuid,
        name: String,
    },
    Token {
        id: Uuid,
        name: String,
    },
    /// `unicity users ...` / `unicity tokens ...` on the host.
    Cli,
    /// The one-time first-run setup link.
    Setup,
    /// The server itself, applying a rule as it starts: what an issuer no
    /// longer trusted issued before 2026-12-08, withdrawn.
    Server,
}

impl Actor {
    /// The id an issued token or link records as its issuer: an operator's
    /// or a token's; `None` for the host and the setup link, which nobody
    /// can disable.
    pub fn issuer(&self) -> Option<Uuid> {
        match self {
            Actor::Operator { id, .. } | Actor::Token { id, .. } => Some(*id),
            Actor::Cli | Actor::Setup | Actor::Server => None,
        }
    }
}

/// An operator signed in; a new session was opened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OperatorLoggedIn {
    pub operator_id: Uuid,
    pub name: String,
    pub client: Option<String>,
}

/// A sign-in was refused. `operator_id` is absent for an unknown name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoginFailed {
    pub name: String,
    pub operator_id: Option<Uuid>,
    /// `unknown_name`, `wrong_password` or `disabled`; `wrong_current_password`
    /// when a signed-in operator changing their password gave a wrong one.
    pub reason: String,
    pub client: Option<String>,
}

/// An operator signed out; the session was deleted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OperatorLoggedOut {
    pub operator_id: Uuid,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OperatorCreated {
    pub operator_id: Uuid,
    pub name: String,
    pub role: String,
    pub by: Actor,
}

/// An operator was disabled; their sessions were deleted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OperatorDisabled {
    pub operator_id: Uuid,
    pub name: String,
    pub by: Actor,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OperatorRoleChanged {
    pub operator_id: Uuid,
    pub name: String,
    pub from: String,
    pub to: String,
    pub by: Actor,
}

/// A password was changed; the operator's other sessions were deleted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OperatorPasswordChanged {
    pub operator_id: Uuid,
    pub name: String,
    pub by: Actor,
}

/// An admin handed out a new set-password link for an existing operator
/// (whose password keeps working until the link is used).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PasswordLinkIssued {
    pub operator_id: Uuid,
    pub name: String,
    pub by: Actor,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenIssued {
    pub token_id: Uuid,
    pub name: String,
    pub role: String,
    pub expires_at: Option<DateTime<Utc>>,
    pub by: Actor,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenRevoked {
    pub token_id: Uuid,
    pub name: String,
    pub by: Actor,
    /// Set when the token was revoked because its issuer was disabled,
    /// demoted or revoked (`by` made that change): whoever issued a token
    /// holds its secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer_withdrawn: Option<Actor>,
}

/// The first admin was created through the one-time setup link.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SetupCompleted {
    pub operator_id: Uuid,
    pub name: String,
}
