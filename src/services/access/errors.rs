//! Why an access operation was refused, and the checks every one shares
//! (a name's shape, a taken name, stored ids and roles read back).

use sea_orm::DbErr;
use uuid::Uuid;

use crate::auth::Role;
use crate::auth::password::PasswordRule;
use crate::store::access::{self as store};

/// How long a first-run setup link stays valid.
pub const SETUP_LINK_VALIDITY: chrono::Duration = chrono::Duration::hours(1);
/// How long a set-password link an admin hands out stays valid.
pub const PASSWORD_LINK_VALIDITY: chrono::Duration = chrono::Duration::hours(72);
pub(super) const MAX_NAME: usize = 64;

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
    #[error("no role named {0:?}: support, finance, engineer or admin")]
    UnknownRole(String),
    #[error("an expiry is a whole number of days from 1 to 3650, or empty for none")]
    InvalidExpiry,
    #[error("your own account is changed on your account page, not here")]
    Yourself,
    #[error("the last enabled admin stays one: make another operator admin first")]
    LastAdmin,
    #[error("only an enabled admin may do this, and you no longer are one")]
    NoLongerAdmin,
    #[error("the setup link is invalid, expired or already used")]
    SetupClosed,
    #[error(
        "this set-password link is invalid, expired or already used: ask an admin for a new one"
    )]
    LinkClosed,
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

pub(super) fn check_name(name: &str) -> Result<(), AccessError> {
    let fine = !name.is_empty()
        && name.chars().count() <= MAX_NAME
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '.' | '-' | '_' | '@'));
    fine.then_some(()).ok_or(AccessError::InvalidName)
}

pub(super) fn role_of(text: &str) -> Result<Role, AccessError> {
    text.parse()
        .map_err(|e: crate::auth::roles::UnknownRole| AccessError::Storage(e.into()))
}

pub(super) fn uuid_of(text: &str) -> Result<Uuid, AccessError> {
    text.parse()
        .map_err(|e: uuid::Error| AccessError::Storage(e.into()))
}

pub(super) fn taken(error: DbErr, name: &str) -> AccessError {
    if store::is_unique_violation(&error) {
        AccessError::NameTaken(name.to_owned())
    } else {
        error.into()
    }
}
