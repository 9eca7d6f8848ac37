//! `GET/POST /login`, `POST /logout`. A name longer than any operator's is
//! refused outright; then sign-in is throttled per client address and per
//! (name, address) failures before any password is checked
//! (`auth::throttle`), opens a new session id (no fixation), and rotates the
//! CSRF token.

use actix_session::Session;
use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, get, post, web};
use askama::Template;
use secrecy::SecretString;
use serde::Deserialize;

use super::csrf::{self, CsrfForm};
use super::{html, see_other};
use crate::auth::sessions::{CSRF_KEY, OPERATOR_KEY};
use crate::auth::throttle::MAX_NAME_BYTES;
use crate::auth::{Principal, secrets};
use crate::routes::client;
use crate::routes::error::UiError;
use crate::services::access::{self, LoginError};
use crate::state::AppState;

/// `templates/login.html`.
#[derive(Template)]
#[template(path = "login.html")]
pub struct LoginPage<'a> {
    pub csrf: &'a str,
    pub name: &'a str,
    pub error: Option<&'a str>,
}

#[get("/login")]
pub async fn show(session: Session) -> Result<HttpResponse, UiError> {
    let csrf = csrf::token(&session)?;
    let page = LoginPage {
        csrf: &csrf,
        name: "",
        error: None,
    };
    Ok(html(HttpResponse::Ok(), &page))
}

#[derive(Deserialize)]
pub struct LoginForm {
    name: String,
    password: SecretString,
}

#[post("/login")]
pub async fn submit(
    state: web::Data<AppState>,
    req: HttpRequest,
    session: Session,
    form: CsrfForm<LoginForm>,
) -> Result<HttpResponse, UiError> {
    let LoginForm { name, password } = form.0;
    if name.len() > MAX_NAME_BYTES {
        return Err(UiError::bad_request(
            "This name is too long: no operator's name has more than 64 characters.",
        ));
    }
    let address = client::address(&req);
    let throttle = &state.access.throttle;
    throttle
        .attempt(&name, address)
        .map_err(UiError::throttled)?;
    let client = address.map(|ip| ip.to_string());
    match access::login(state.db(), &name, password, client).await {
        Ok(operator) => {
            throttle.succeeded(&name, address);
            tracing::info!(operator.id = %operator.id, "operator signed in");
            session
                .insert(OPERATOR_KEY, operator.id.to_string())
                .and_then(|()| session.insert(CSRF_KEY, secrets::random_hex()))
                .map_err(UiError::internal)?;
            // Last: a new id for the session's state, the old one deleted.
            session.renew();
            Ok(see_other("/"))
        }
        Err(LoginError::Refused) => {
            throttle.failed(&name, address);
            tracing::info!("sign-in refused");
            let csrf = csrf::token(&session)?;
            let page = LoginPage {
                csrf: &csrf,
                name: &name,
                error: Some("Unknown name or wrong password."),
            };
            Ok(html(HttpResponse::build(StatusCode::UNAUTHORIZED), &page))
        }
        Err(error) => Err(error.into()),
    }
}

#[derive(Deserialize)]
pub struct LogoutForm {}

#[post("/logout")]
pub async fn logout(
    state: web::Data<AppState>,
    session: Session,
    operator: Principal,
    _form: CsrfForm<LogoutForm>,
) -> Result<HttpResponse, UiError> {
    access::logout(state.db(), &operator).await?;
    session.purge();
    Ok(see_other("/login"))
}
