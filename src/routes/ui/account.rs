//! `GET /account`, `POST /account/password`: the signed-in operator's own
//! account. A password change ends every session of the operator, this one
//! included: they sign in again with the new password.

use actix_session::Session;
use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, get, post, web};
use askama::Template;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use super::csrf::CsrfForm;
use super::format::Nav;
use super::{html, see_other};
use crate::auth::{Principal, PrincipalKind};
use crate::routes::client;
use crate::routes::error::UiError;
use crate::services::access::{self, AccessError};
use crate::state::AppState;

/// `templates/account.html`.
#[derive(Template)]
#[template(path = "account.html")]
pub struct AccountPage {
    pub nav: Nav,
    pub error: Option<String>,
}

fn page(
    session: &Session,
    operator: &Principal,
    status: StatusCode,
    error: Option<String>,
) -> Result<HttpResponse, UiError> {
    let page = AccountPage {
        nav: Nav::new(session, operator, "account")?,
        error,
    };
    Ok(html(HttpResponse::build(status), &page))
}

#[get("/account")]
pub async fn show(session: Session, operator: Principal) -> Result<HttpResponse, UiError> {
    page(&session, &operator, StatusCode::OK, None)
}

#[derive(Deserialize)]
pub struct PasswordForm {
    current: SecretString,
    password: SecretString,
    confirm: SecretString,
}

#[post("/account/password")]
pub async fn change_password(
    req: HttpRequest,
    state: web::Data<AppState>,
    session: Session,
    operator: Principal,
    form: CsrfForm<PasswordForm>,
) -> Result<HttpResponse, UiError> {
    let PasswordForm {
        current,
        password,
        confirm,
    } = form.0;
    if operator.kind != PrincipalKind::Operator {
        return Err(UiError::forbidden());
    }
    let refuse = |message: &str| {
        page(
            &session,
            &operator,
            StatusCode::BAD_REQUEST,
            Some(message.to_owned()),
        )
    };
    if password.expose_secret() != confirm.expose_secret() {
        return refuse("The two new passwords differ.");
    }
    // A sign-in of its own: throttled and journaled as one.
    let address = client::address(&req);
    let throttle = &state.access.throttle;
    throttle
        .attempt(&operator.name, address)
        .map_err(UiError::throttled)?;
    let from = address.map(|ip| ip.to_string());
    if !access::check_password(state.db(), &operator, current, from).await? {
        throttle.failed(&operator.name, address);
        return refuse("The current password is wrong.");
    }
    throttle.succeeded(&operator.name, address);
    match access::set_password(state.db(), &operator.name, password, operator.actor()).await {
        Ok(()) => {
            session.purge();
            Ok(see_other("/login"))
        }
        Err(error @ AccessError::Password(_)) => refuse(&error.to_string()),
        Err(error) => Err(error.into()),
    }
}
