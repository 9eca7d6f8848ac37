//! `GET/POST /setup/{token}`: the one-time first-run link printed at start
//! while no enabled admin exists. The first admin picks a name and password
//! there; the link is then used up.

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

/// `templates/setup.html`.
#[derive(Template)]
#[template(path = "setup.html")]
pub struct SetupPage<'a> {
    pub csrf: &'a str,
    pub token: &'a str,
    pub name: &'a str,
    pub error: Option<String>,
}

fn closed() -> UiError {
    UiError::new(StatusCode::NOT_FOUND, AccessError::SetupClosed.to_string())
}

#[get("/setup/{token}")]
pub async fn show(
    state: web::Data<AppState>,
    session: Session,
    token: web::Path<String>,
) -> Result<HttpResponse, UiError> {
    if !access::setup_open(state.db(), &token).await? {
        return Err(closed());
    }
    let csrf = csrf::token(&session)?;
    let page = SetupPage {
        csrf: &csrf,
        token: &token,
        name: "",
        error: None,
    };
    Ok(html(HttpResponse::Ok(), &page))
}

#[derive(Deserialize)]
pub struct SetupForm {
    name: String,
    password: SecretString,
    confirm: SecretString,
}

#[post("/setup/{token}")]
pub async fn submit(
    state: web::Data<AppState>,
    session: Session,
    token: web::Path<String>,
    form: CsrfForm<SetupForm>,
) -> Result<HttpResponse, UiError> {
    let SetupForm {
        name,
        password,
        confirm,
    } = form.0;
    let again = |error: String| -> Result<HttpResponse, UiError> {
        let csrf = csrf::token(&session)?;
        let page = SetupPage {
            csrf: &csrf,
            token: &token,
            name: &name,
            error: Some(error),
        };
        Ok(html(HttpResponse::build(StatusCode::BAD_REQUEST), &page))
    };
    if password.expose_secret() != confirm.expose_secret() {
        return again("The two passwords differ.".to_owned());
    }
    match access::complete_setup(state.db(), &token, &name, password).await {
        Ok(id) => {
            tracing::info!(operator.id = %id, "first admin created");
            Ok(see_other("/login"))
        }
        Err(AccessError::SetupClosed) => Err(closed()),
        Err(error @ (AccessError::InvalidName | AccessError::Password(_))) => {
            again(error.to_string())
        }
        Err(error) => Err(error.into()),
    }
}
