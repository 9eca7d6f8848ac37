//! `GET/POST /password/{token}`: the one-time link an admin hands an
//! operator (added from the admin page, or with a forgotten password). The
//! operator chooses their password there; the link is then used up and they
//! sign in.

use actix_session::Session;
use actix_web::http::StatusCode;
use actix_web::{HttpResponse, get, post, web};
use askama::Template;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use super::csrf::{self, CsrfForm};
use super::{html, see_other};
use crate::routes::error::UiError;
use crate::services::access::{self, AccessError};
use crate::state::AppState;

/// `templates/password.html`.
#[derive(Template)]
#[template(path = "password.html")]
pub struct PasswordPage<'a> {
    pub csrf: &'a str,
    pub token: &'a str,
    pub name: &'a str,
    pub error: Option<String>,
}

fn closed() -> UiError {
    UiError::new(StatusCode::NOT_FOUND, AccessError::LinkClosed.to_string())
}

#[get("/password/{token}")]
pub async fn show(
    state: web::Data<AppState>,
    session: Session,
    token: web::Path<String>,
) -> Result<HttpResponse, UiError> {
    let Some(operator) = access::link_holder(state.db(), &token).await? else {
        return Err(closed());
    };
    let csrf = csrf::token(&session)?;
    let page = PasswordPage {
        csrf: &csrf,
        token: &token,
        name: &operator.name,
        error: None,
    };
    Ok(html(HttpResponse::Ok(), &page))
}

#[derive(Deserialize)]
pub struct PasswordForm {
    password: SecretString,
    confirm: SecretString,
}

#[post("/password/{token}")]
pub async fn submit(
    state: web::Data<AppState>,
    session: Session,
    token: web::Path<String>,
    form: CsrfForm<PasswordForm>,
) -> Result<HttpResponse, UiError> {
    let PasswordForm { password, confirm } = form.0;
    let Some(operator) = access::link_holder(state.db(), &token).await? else {
        return Err(closed());
    };
    let again = |error: String| -> Result<HttpResponse, UiError> {
        let csrf = csrf::token(&session)?;
        let page = PasswordPage {
            csrf: &csrf,
            token: &token,
            name: &operator.name,
            error: Some(error),
        };
        Ok(html(HttpResponse::build(StatusCode::BAD_REQUEST), &page))
    };
    if password.expose_secret() != confirm.expose_secret() {
        return again("The two passwords differ.".to_owned());
    }
    match access::set_password_by_link(state.db(), &token, password).await {
        Ok(name) => {
            tracing::info!(operator.name = %name, "password set through a link");
            Ok(see_other("/login"))
        }
        Err(AccessError::LinkClosed) => Err(closed()),
        Err(error @ AccessError::Password(_)) => again(error.to_string()),
        Err(error) => Err(error.into()),
    }
}
