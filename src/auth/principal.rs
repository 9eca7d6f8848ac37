//! Who is asking: an operator signed in through a session, or an API token.

use uuid::Uuid;

use super::roles::{Action, Role, allows};
use crate::domain::journal::Actor;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrincipalKind {
    Operator,
    Token,
}

/// An authenticated caller and its role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub kind: PrincipalKind,
    pub id: Uuid,
    pub name: String,
    pub role: Role,
}

impl Principal {
    pub fn may(&self, action: Action) -> bool {
        allows(self.role, action)
    }

    /// How a case's journal names this caller: kind, name, role and id.
    pub fn signature(&self) -> String {
        let kind = match self.kind {
            PrincipalKind::Operator => "operator",
            PrincipalKind::Token => "token",
        };
        format!("{kind}:{} ({}, {})", self.name, self.role, self.id)
    }

    /// How the journal names this caller.
    pub fn actor(&self) -> Actor {
        match self.kind {
            PrincipalKind::Operator => Actor::Operator {
                id: self.id,
                name: self.name.clone(),
            },
            PrincipalKind::Token => Actor::Token {
                id: self.id,
                name: self.name.clone(),
            },
        }
    }
}
