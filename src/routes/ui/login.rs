//! `GET/POST /login`, `POST /logout`. Showing the form stores nothing (its
//! CSRF token is signed, not kept: `csrf::LoginForm`); a session is made at
//! sign-in only, with a new id (no fixation) and a new CSRF token. A name
//! longer than any operator's is refused outright; then sign-in is throttled
//! per client address and per (name, address) failures before any password
//! is checked (`auth::throttle`).

use actix_session::Session;
use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, get, post, web};
use askama::Template;
use secrecy::SecretString;
use serde::Deserialize;

use super::csrf::{self, CsrfForm};
use super::next::safe;
use super::{html, see_other};
use crate::auth::sessions::{CREDENTIAL_KEY, CSRF_KEY, OPERATOR_KEY};
use crate::auth::throttle::MAX_NAME_BYTES;
use crate::auth::{Principal, secrets};
use crate::routes::client;
use crate::routes::error::UiError;
use crate::services::access::{self, LoginError, SignedIn};
use crate::state::AppState;

/// `templates/login.html`.
#[derive(Template)]
#[template(path = "login.html")]
pub struct LoginPage<'a> {
    pub csrf: &'a str,
    pub name: &'a str,
    pub error: Option<&'a str>,
    /// The page to go back to after sign-in (`next`), when safe.
    pub next: Option<&'a str>,
}

/// The sign-in page with a fresh form token, its cookie set.
fn page(
    state: &AppState,
    status: StatusCode,
    name: &str,
    error: Option<&str>,
    next: Option<&str>,
) -> HttpResponse {
    let (csrf, cookie) = csrf::login_token(state);
    let page = LoginPage {
        csrf: &csrf,
        name,
        error,
        next: next.and_then(safe),
    };
    let mut response = HttpResponse::build(status);
    response.cookie(cookie);
    html(response, &page)
}

/// `GET /login` query: the page asked for before signing in.
#[derive(Deserialize)]
pub struct Next {
    next: Option<String>,
}

#[get("/login")]
pub async fn show(state: web::Data<AppState>, query: web::Query<Next>) -> HttpResponse {
    page(&state, StatusCode::OK, "", None, query.next.as_deref())
}

#[derive(Deserialize)]
pub struct LoginFields {
    name: String,
    password: SecretString,
    #[serde(default)]
    next: Option<String>,
}

#[post("/login")]
pub async fn submit(
    state: web::Data<AppState>,
    req: HttpRequest,
    session: Session,
    form: csrf::LoginForm<LoginFields>,
) -> Result<HttpResponse, UiError> {
    let LoginFields {
        name,
        password,
        next,
    } = form.0;
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
    match access::login(
        state.db(),
        &state.engine.key_secret,
        &name,
        password,
        client,
    )
    .await
    {
        Ok(SignedIn {
            principal: operator,
            credential,
        }) => {
            throttle.succeeded(&name, address);
            tracing::info!(operator.id = %operator.id, "operator signed in");
            session
                .insert(OPERATOR_KEY, operator.id.to_string())
                .and_then(|()| session.insert(CREDENTIAL_KEY, credential))
                .and_then(|()| session.insert(CSRF_KEY, secrets::random_hex()))
                .map_err(UiError::internal)?;
            // Last: a new id for the session's state, the old one deleted.
            session.renew();
            let mut response = see_other(next.as_deref().and_then(safe).unwrap_or("/"));
            response
                .add_removal_cookie(&csrf::login_cookie_removal())
                .map_err(UiError::internal)?;
            Ok(response)
        }
        Err(LoginError::Refused) => {
            throttle.failed(&name, address);
            tracing::info!("sign-in refused");
            let error = Some("Unknown name or wrong password.");
            Ok(page(
                &state,
                StatusCode::UNAUTHORIZED,
                &name,
                error,
                next.as_deref(),
            ))
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
