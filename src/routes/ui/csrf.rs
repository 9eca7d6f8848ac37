//! CSRF protection of every form: a synchronizer token kept in the session
//! and echoed in a hidden `csrf` field. `CsrfForm<T>` checks it before the
//! form is even parsed, so a post without a valid token (403) changes nothing.
//! The sign-in form has no session yet: `LoginForm<T>` checks a signed token
//! sent both as the `unicity_login` cookie and as the field instead
//! (`auth::login_token`). A post a browser says comes from another site
//! (`Sec-Fetch-Site`, `Origin`) is refused the same way, token or not;
//! which host a request was sent to is believed from a forwarding header
//! only when a trusted proxy sends it (`routes::client`). The same proof
//! guards a session's state changes on `/api` (`api_proof`).

use actix_session::{Session, SessionExt};
use actix_web::cookie::{Cookie, SameSite};
use actix_web::dev::Payload;
use actix_web::{FromRequest, HttpRequest, web};
use chrono::Utc;
use futures_util::future::LocalBoxFuture;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::auth::login_token::LIFETIME;
use crate::auth::secrets;
use crate::auth::sessions::CSRF_KEY;
use crate::routes::client;
use crate::routes::error::UiError;
use crate::state::AppState;

/// The cookie carrying the sign-in form's token, sent to `/login` only.
pub const LOGIN_COOKIE: &str = "unicity_login";
/// The header a signed-in session's `/api` state change carries its token in.
pub const API_HEADER: &str = "x-csrf-token";

/// The session's CSRF token, made on first use.
pub fn token(session: &Session) -> Result<String, UiError> {
    if let Ok(Some(token)) = session.get::<String>(CSRF_KEY) {
        return Ok(token);
    }
    let token = secrets::random_hex();
    session
        .insert(CSRF_KEY, &token)
        .map_err(UiError::internal)?;
    Ok(token)
}

/// A form whose `csrf` field matched the session's token.
pub struct CsrfForm<T>(pub T);

/// The sign-in form, its `csrf` field equal to the `unicity_login` cookie and
/// signed by this server, unexpired.
pub struct LoginForm<T>(pub T);

#[derive(Deserialize, Default)]
struct Field {
    csrf: Option<String>,
}

type Check = Box<dyn FnOnce(&str) -> bool>;

/// Reads the form once its origin and its `csrf` field passed `check`.
fn checked<T: DeserializeOwned + 'static>(
    req: &HttpRequest,
    payload: &mut Payload,
    check: Check,
) -> LocalBoxFuture<'static, Result<T, UiError>> {
    let body = web::Bytes::from_request(req, payload);
    let foreign = foreign_origin(req);
    Box::pin(async move {
        if foreign {
            return Err(UiError::csrf());
        }
        let body = body
            .await
            .map_err(|_| UiError::bad_request("This form could not be read."))?;
        let submitted = serde_urlencoded::from_bytes::<Field>(&body)
            .unwrap_or_default()
            .csrf;
        if !submitted.is_some_and(|s| check(&s)) {
            return Err(UiError::csrf());
        }
        serde_urlencoded::from_bytes(&body)
            .map_err(|_| UiError::bad_request("This form is incomplete."))
    })
}

fn matches(expected: Option<String>) -> Check {
    Box::new(move |submitted| expected.is_some_and(|e| secrets::same(&e, submitted)))
}

impl<T: DeserializeOwned + 'static> FromRequest for CsrfForm<T> {
    type Error = UiError;
    type Future = LocalBoxFuture<'static, Result<Self, UiError>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let expected = req.get_session().get::<String>(CSRF_KEY).ok().flatten();
        let form = checked(req, payload, matches(expected));
        Box::pin(async move { form.await.map(CsrfForm) })
    }
}

impl<T: DeserializeOwned + 'static> FromRequest for LoginForm<T> {
    type Error = UiError;
    type Future = LocalBoxFuture<'static, Result<Self, UiError>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let state = req.app_data::<web::Data<AppState>>().cloned();
        let cookie = req.cookie(LOGIN_COOKIE).map(|c| c.value().to_owned());
        let same = matches(cookie);
        let check: Check = Box::new(move |submitted| {
            state.is_some_and(|s| s.access.login_tokens.valid(submitted, Utc::now()))
                && same(submitted)
        });
        let form = checked(req, payload, check);
        Box::pin(async move { form.await.map(LoginForm) })
    }
}

/// A fresh token for the sign-in form, and the cookie that must come back with it.
pub fn login_token(state: &AppState) -> (String, Cookie<'static>) {
    let token = state.access.login_tokens.issue(Utc::now());
    let cookie = Cookie::build(LOGIN_COOKIE, token.clone())
        .path("/login")
        .http_only(true)
        .same_site(SameSite::Strict)
        .secure(state.access.secure)
        .max_age(actix_web::cookie::time::Duration::seconds(
            LIFETIME.num_seconds(),
        ))
        .finish();
    (token, cookie)
}

/// The sign-in form's cookie, to remove once signed in.
pub fn login_cookie_removal() -> Cookie<'static> {
    Cookie::build(LOGIN_COOKIE, "").path("/login").finish()
}

/// Whether a signed-in session's request carries the proof a form would: it
/// does not come from another site, and `X-CSRF-Token` is the session's token.
pub fn api_proof(req: &HttpRequest) -> bool {
    if foreign_origin(req) {
        return false;
    }
    let expected = req.get_session().get::<String>(CSRF_KEY).ok().flatten();
    let submitted = req.headers().get(API_HEADER).and_then(|v| v.to_str().ok());
    submitted.is_some_and(|s| matches(expected)(s))
}

/// Whether a browser says the request comes from another site: its
/// `Sec-Fetch-Site` is `cross-site` or `same-site` (a sibling subdomain), or
/// its `Origin` names another host than the one it was sent to (its own
/// `Host`, or a trusted proxy's `X-Forwarded-Host`; `client::host`) and than
/// the configured public URL's. `Origin:
/// null` is not proof either way (browsers send it for this site's own forms
/// under `Referrer-Policy: no-referrer`), nor is a request without either
/// header (a client that is not a browser): the token alone decides then.
pub fn foreign_origin(req: &HttpRequest) -> bool {
    let header = |name| {
        req.headers()
            .get(name)
            .map(|v| v.to_str().unwrap_or("unreadable"))
    };
    if let Some(site) = header("sec-fetch-site") {
        return site != "same-origin" && site != "none";
    }
    match header("origin") {
        None | Some("null") => false,
        Some(origin) => {
            let Some((_, authority)) = origin.split_once("://") else {
                return true;
            };
            let state = req.app_data::<web::Data<AppState>>();
            let public = state
                .and_then(|s| s.access.public_url.split_once("://"))
                .and_then(|(_, rest)| rest.split('/').next());
            client::host(req).as_deref() != Some(authority) && public != Some(authority)
        }
    }
}
