//! Operator access: accounts, API tokens, sign-in and the first-run setup
//! link. Every change is journaled (an audit event naming who acted) in the
//! transaction that writes it; passwords are hashed before the transaction
//! begins, so none is held open across an argon2 computation.

mod errors;
mod links;
mod operators;
mod setup;
mod sign_in;
mod tokens;

pub use errors::{AccessError, LoginError, PASSWORD_LINK_VALIDITY, SETUP_LINK_VALIDITY};
pub use links::{invite_operator, link_holder, password_link, set_password_by_link};
pub use operators::{
    check_password, create_operator, disable_operator, operators, set_password, set_role,
};
pub use setup::{complete_setup, open_setup, setup_open};
pub use sign_in::{SignedIn, login, logout, operator, session_operator};
pub use tokens::{issue_token, revoke_token, token, tokens};

use sea_orm::ConnectionTrait;

use crate::auth::{Principal, PrincipalKind};
use crate::store::access as store;

/// `caller` as it stands now: its current role, or `None` once the
/// operator is disabled or the token revoked or expired. For an action
/// decided after the request was let in (a case's resolution, each case of
/// a bulk one), where the guard's reading may be out of date: read in the
/// transaction that acts, the row held there on PostgreSQL, the action
/// commits before a demotion or sees it.
pub async fn still<C: ConnectionTrait>(
    conn: &C,
    caller: &Principal,
) -> Result<Option<Principal>, AccessError> {
    let id = caller.id.to_string();
    match caller.kind {
        PrincipalKind::Operator => {
            let row = store::operator_held(conn, &id).await?;
            sign_in::enabled(row)
        }
        PrincipalKind::Token => tokens::live(store::token_held(conn, &id).await?),
    }
}
