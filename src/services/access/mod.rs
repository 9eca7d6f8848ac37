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
mod withdraw;

pub use errors::{AccessError, LoginError, PASSWORD_LINK_VALIDITY, SETUP_LINK_VALIDITY};
pub use links::{invite_operator, link_holder, password_link, set_password_by_link};
pub use operators::{
    RoleChanged, check_password, create_operator, disable_operator, operators, set_password,
    set_role,
};
pub use setup::{complete_setup, open_setup, setup_open};
pub use sign_in::{SignedIn, login, logout, operator, session_operator, unknown_name};
pub use tokens::{issue_token, revoke_token, token, tokens};
pub use withdraw::{Withdrawn, withdraw_untrusted};

use futures_util::future::BoxFuture;
use sea_orm::{ConnectionTrait, DbErr};

use crate::auth::{Action, Principal, PrincipalKind};
use crate::store::Tx;
use crate::store::access as store;
use crate::store::writer::WriteJob;

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

/// A writer job done only if its caller, read again in the job's own
/// transaction (`still`), may still do `needs`: an operator disabled, or a
/// token revoked, after the request was let in writes nothing more. `None`
/// when refused.
pub struct AsCaller<J> {
    pub caller: Principal,
    pub needs: Action,
    pub job: J,
}

impl<J: WriteJob> WriteJob for AsCaller<J> {
    type Output = Option<J::Output>;

    fn keys(&self) -> Option<crate::store::key_index::IndexKeys> {
        self.job.keys()
    }

    fn owns_every_key(&self) -> bool {
        self.job.owns_every_key()
    }

    fn run<'a>(self, tx: &'a mut Tx<'_>) -> BoxFuture<'a, Result<Self::Output, DbErr>> {
        Box::pin(async move {
            let now = still(tx.connection(), &self.caller)
                .await
                .map_err(|error| DbErr::Custom(error.to_string()))?;
            if !now.is_some_and(|caller| caller.may(self.needs)) {
                return Ok(None);
            }
            self.job.run(tx).await.map(Some)
        })
    }
}
