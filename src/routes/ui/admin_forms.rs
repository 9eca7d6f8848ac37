//! The admin page's forms: each changes one operator or token through
//! `services::access` (which journals it with who acted) and answers with the
//! admin page saying what was done — with the set-password link or the token
//! shown this once. An admin's own account is changed on `/account`, never
//! here: an admin who disabled or demoted themselves could lock everyone out.

use actix_session::Session;
use actix_web::http::StatusCode;
use actix_web::{HttpResponse, post, web};
use serde::Deserialize;

use super::admin::{Notice, page};
use super::csrf::CsrfForm;
use crate::auth::{Principal, Role};
use crate::routes::error::UiError;
use crate::services::access::{self, AccessError};
use crate::state::AppState;

#[derive(Deserialize)]
pub struct NameForm {
    name: String,
}

#[derive(Deserialize)]
pub struct NameRoleForm {
    name: String,
    role: String,
}

#[derive(Deserialize)]
pub struct TokenForm {
    name: String,
    role: String,
    #[serde(default)]
    expires_days: String,
}

/// The admin page after a form: 200 with what was done, 400/404/409 with why not.
async fn answer(
    state: &AppState,
    session: &Session,
    admin: &Principal,
    outcome: Result<Notice, AccessError>,
) -> Result<HttpResponse, UiError> {
    let (status, notice) = match outcome {
        Ok(notice) => (StatusCode::OK, notice),
        Err(error @ AccessError::Storage(_)) => return Err(error.into()),
        Err(error) => {
            let message = error.to_string();
            (UiError::from(error).status, Notice::Refused(message))
        }
    };
    page(state, session, admin, status, Some(notice)).await
}

fn role(text: &str) -> Result<Role, AccessError> {
    text.parse()
        .map_err(|_| AccessError::UnknownRole(text.to_owned()))
}

/// Refuses a change to the admin's own account.
fn not_yourself(admin: &Principal, name: &str) -> Result<(), AccessError> {
    if admin.name == name {
        return Err(AccessError::Yourself);
    }
    Ok(())
}

#[post("/admin/operators")]
pub async fn add_operator(
    state: web::Data<AppState>,
    session: Session,
    admin: Principal,
    form: CsrfForm<NameRoleForm>,
) -> Result<HttpResponse, UiError> {
    let NameRoleForm { name, role: asked } = form.0;
    let outcome = async {
        let (_, token) = access::invite_operator(state.db(), &name, role(&asked)?, admin.actor()).await?;
        Ok(Notice::Secret(
            format!("{name} was added as {asked}. Send them this link to choose their password (valid 72 hours, once):"),
            format!("{}/password/{token}", state.access.public_url),
        ))
    }
    .await;
    answer(&state, &session, &admin, outcome).await
}

#[post("/admin/operators/role")]
pub async fn change_role(
    state: web::Data<AppState>,
    session: Session,
    admin: Principal,
    form: CsrfForm<NameRoleForm>,
) -> Result<HttpResponse, UiError> {
    let NameRoleForm { name, role: asked } = form.0;
    let outcome = async {
        not_yourself(&admin, &name)?;
        let to = role(&asked)?;
        let changed = access::set_role(state.db(), &name, to, admin.actor()).await?;
        Ok(Notice::Done(if changed.from == to {
            format!("{name} already was {asked}: nothing changed.")
        } else {
            format!(
                "{name} is now {asked} (was {}).{}",
                changed.from.as_str(),
                changed.withdrawn.sentence("they")
            )
        }))
    }
    .await;
    answer(&state, &session, &admin, outcome).await
}

#[post("/admin/operators/disable")]
pub async fn disable_operator(
    state: web::Data<AppState>,
    session: Session,
    admin: Principal,
    form: CsrfForm<NameForm>,
) -> Result<HttpResponse, UiError> {
    let name = form.0.name;
    let outcome = async {
        not_yourself(&admin, &name)?;
        let changed = access::disable_operator(state.db(), &name, admin.actor()).await?;
        Ok(Notice::Done(match changed {
            Some(withdrawn) => format!(
                "{name} is disabled: their sessions ended and they cannot sign in.{}",
                withdrawn.sentence("they")
            ),
            None => format!("{name} already was disabled."),
        }))
    }
    .await;
    answer(&state, &session, &admin, outcome).await
}

#[post("/admin/operators/link")]
pub async fn password_link(
    state: web::Data<AppState>,
    session: Session,
    admin: Principal,
    form: CsrfForm<NameForm>,
) -> Result<HttpResponse, UiError> {
    let name = form.0.name;
    let outcome = async {
        not_yourself(&admin, &name)?;
        let token = access::password_link(state.db(), &name, admin.actor()).await?;
        Ok(Notice::Secret(
            format!("A new link for {name} to choose a password (valid 72 hours, once; any older link stops working):"),
            format!("{}/password/{token}", state.access.public_url),
        ))
    }
    .await;
    answer(&state, &session, &admin, outcome).await
}

#[post("/admin/tokens")]
pub async fn issue_token(
    state: web::Data<AppState>,
    session: Session,
    admin: Principal,
    form: CsrfForm<TokenForm>,
) -> Result<HttpResponse, UiError> {
    let TokenForm {
        name,
        role: asked,
        expires_days,
    } = form.0;
    let outcome = async {
        let days = match expires_days.trim() {
            "" => None,
            text => Some(
                text.parse::<u32>()
                    .ok()
                    .filter(|d| (1..=3650).contains(d))
                    .ok_or(AccessError::InvalidExpiry)?,
            ),
        };
        let token =
            access::issue_token(state.db(), &name, role(&asked)?, days, admin.actor()).await?;
        Ok(Notice::Secret(
            format!("Token {name} ({asked}) issued. Send it as `Authorization: Bearer <token>`:"),
            token,
        ))
    }
    .await;
    answer(&state, &session, &admin, outcome).await
}

#[post("/admin/tokens/revoke")]
pub async fn revoke_token(
    state: web::Data<AppState>,
    session: Session,
    admin: Principal,
    form: CsrfForm<NameForm>,
) -> Result<HttpResponse, UiError> {
    let name = form.0.name;
    let outcome = async {
        let revoked = access::revoke_token(state.db(), &name, admin.actor()).await?;
        Ok(Notice::Done(match revoked {
            Some(withdrawn) => format!(
                "Token {name} is revoked: it is refused from now on.{}",
                withdrawn.sentence("it")
            ),
            None => format!("Token {name} already was revoked."),
        }))
    }
    .await;
    answer(&state, &session, &admin, outcome).await
}
