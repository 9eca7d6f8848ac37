//! CSRF protection of every form: a synchronizer token kept in the session
//! and echoed in a hidden `csrf` field. `CsrfForm<T>` checks it before the
//! form is even parsed, so a post without a valid token (403) changes nothing.
//! A post a browser says comes from another site (`Sec-Fetch-Site`,
//! `Origin`) is refused the same way, token or not; which host a request
//! was sent to is believed from a forwarding header only when a trusted
//! proxy sends it (`routes::client`).

use actix_session::{Session, SessionExt};
use actix_web::dev::Payload;
use actix_web::{FromRequest, HttpRequest, web};
use futures_util::future::LocalBoxFuture;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::auth::secrets;
use crate::auth::sessions::CSRF_KEY;
use crate::routes::client;
use crate::routes::error::UiError;
use crate::state::AppState;

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

#[derive(Deserialize, Default)]
struct Field {
    csrf: Option<String>,
}

impl<T: DeserializeOwned + 'static> FromRequest for CsrfForm<T> {
    type Error = UiError;
    type Future = LocalBoxFuture<'static, Result<Self, UiError>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let body = web::Bytes::from_request(req, payload);
        let session = req.get_session();
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
            let expected = session.get::<String>(CSRF_KEY).ok().flatten();
            match (expected, submitted) {
                (Some(expected), Some(submitted)) if secrets::same(&expected, &submitted) => {}
                _ => return Err(UiError::csrf()),
            }
            serde_urlencoded::from_bytes(&body)
                .map(CsrfForm)
                .map_err(|_| UiError::bad_request("This form is incomplete."))
        })
    }
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
