//! Roles and the one role × action table that decides access. Nothing else
//! grants or refuses: routes name the action they need (`routes::TABLE`),
//! the access guard asks `allows`.

use std::fmt;
use std::str::FromStr;

/// What an operator (or API token) is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    Support,
    Finance,
    Engineer,
    Admin,
}

impl Role {
    pub const ALL: [Role; 4] = [Role::Support, Role::Finance, Role::Engineer, Role::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Support => "support",
            Role::Finance => "finance",
            Role::Engineer => "engineer",
            Role::Admin => "admin",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown role {0:?}: support, finance, engineer or admin")]
pub struct UnknownRole(pub String);

impl FromStr for Role {
    type Err = UnknownRole;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| UnknownRole(s.to_owned()))
    }
}

/// Everything an operator can be allowed to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// Their own account: the account page, own password, sign out.
    OwnAccount,
    /// Deliveries, explanations, cases, dashboard.
    ReadDeliveries,
    /// A delivery's raw body, unmasked (when `[engine] raw_body_reads` is
    /// on): what engineers need to turn a delivery into a fixture.
    ReadRawBodies,
    CommentCases,
    /// Reach the resolution of a case at all; which cases then depends on
    /// the two actions below.
    ResolveSomeCases,
    /// Resolve a case whose effect is critical (money).
    ResolveCriticalCases,
    /// Resolve a case whose effect is not critical.
    ResolveCases,
    ViewStrategies,
    ResetBreakers,
    Replay,
    ExportFixtures,
    ManageOperators,
    ManageTokens,
    /// The Prometheus metrics (`/metrics`): counts, never ids or amounts.
    ReadMetrics,
    /// The audit trail: who signed in, resolved, read a raw body, changed
    /// an operator or a token.
    ReadAudit,
}

const S: Role = Role::Support;
const F: Role = Role::Finance;
const E: Role = Role::Engineer;
const A: Role = Role::Admin;

/// The authorization table: each action and the roles allowed it.
pub const TABLE: &[(Action, &[Role])] = &[
    (Action::OwnAccount, &[S, F, E, A]),
    (Action::ReadDeliveries, &[S, F, E, A]),
    (Action::ReadRawBodies, &[E, A]),
    (Action::CommentCases, &[S, F, E, A]),
    (Action::ResolveSomeCases, &[F, E, A]),
    (Action::ResolveCriticalCases, &[F, A]),
    (Action::ResolveCases, &[E, A]),
    (Action::ViewStrategies, &[E, A]),
    (Action::ResetBreakers, &[E, A]),
    (Action::Replay, &[E, A]),
    (Action::ExportFixtures, &[E, A]),
    (Action::ManageOperators, &[A]),
    (Action::ManageTokens, &[A]),
    (Action::ReadMetrics, &[S, F, E, A]),
    (Action::ReadAudit, &[E, A]),
];

/// Whether `role` may perform `action`. An action missing from the table is
/// allowed to nobody.
pub fn allows(role: Role, action: Action) -> bool {
    TABLE
        .iter()
        .find(|(a, _)| *a == action)
        .is_some_and(|(_, roles)| roles.contains(&role))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_read_back_from_their_names() {
        for role in Role::ALL {
            assert_eq!(role.as_str().parse::<Role>(), Ok(role));
        }
        assert!("root".parse::<Role>().is_err());
    }

    #[test]
    fn money_cases_are_finance_and_admin_only_and_other_cases_engineer_and_admin() {
        let who = |action| -> Vec<Role> {
            Role::ALL
                .into_iter()
                .filter(|r| allows(*r, action))
                .collect()
        };
        assert_eq!(who(Action::ResolveCriticalCases), [F, A]);
        assert_eq!(who(Action::ResolveCases), [E, A]);
        assert_eq!(who(Action::ManageTokens), [A]);
        assert_eq!(who(Action::CommentCases), Role::ALL);
    }
}
