//! The access guard: for every request, the row of `routes::TABLE` its
//! method and route give, then who is asking (bearer token, else session)
//! and whether their role allows the row's action. The caller is left in the
//! request for handlers (`Principal` extractor). A matched route without a
//! row is refused to everyone.
//!
//! The route is found on the path the router routes, never on the raw
//! request path: actix decodes `%65` to `e` before routing, so a guard that
//! matched the raw `/api/d%65liveries` found no route and let through a
//! request the router then gave to the deliveries handler. Handlers check
//! again: the `Principal` extractor answers only with a caller whose role
//! allows the row of the route that was actually matched, so a request that
//! reached a protected handler without passing the guard gets a 401.
//!
//! A signed-in session (not a bearer token) changing state under `/api/`
//! must bring the proof a form does: not from another site, and the
//! session's CSRF token in `X-CSRF-Token` (`csrf_refused`); a browser would
//! otherwise send the cookie for any site's script. A read journaled in the
//! reader's name (a raw body, a fixture) is refused when the browser says
//! another site, or a sibling subdomain, asked for it.
//!
//! A request allowed through that holds U+0000 (`%00` in its path, query or
//! form body, `\u0000` in a JSON body) is refused with a 400 before its
//! handler reads it (`nul`), webhooks apart.
//!
//! Refusals: under `/api/`, JSON `401 unauthenticated` / `403 forbidden` /
//! `403 csrf`; elsewhere, `303` to `/login` when nobody is signed in, else
//! the HTML 403. Every `/api/` answer is `Cache-Control: no-store`: it holds
//! deliveries, cases and raw bodies that no shared or browser cache may keep.

use actix_session::SessionExt;
use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::{Method, header};
use actix_web::middleware::Next;
use actix_web::{HttpMessage, ResponseError, web};

use super::error::{ApiError, UiError};
use super::ui::csrf;
use super::{Access, row};
use crate::auth::sessions::{CREDENTIAL_KEY, OPERATOR_KEY};
use crate::auth::{Principal, PrincipalKind};
use crate::services::access;
use crate::state::AppState;

enum Refusal {
    Unauthenticated,
    Forbidden,
    Csrf,
    NoRoute,
    Storage,
    Nul,
    /// The body could not be read (too large, cut short): its status.
    Unreadable(actix_web::http::StatusCode),
}

pub async fn guard(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let Some(pattern) = routed_pattern(&req) else {
        // No route matches the path the router routes: the same 404 as a
        // route asked with another method, a page with the way back for
        // people, JSON for programs.
        return Ok(refuse(req, Refusal::NoRoute));
    };
    let Some(route) = row(req.method(), &pattern) else {
        return Ok(refuse(req, Refusal::NoRoute));
    };
    let Access::Requires(action) = route.access else {
        return pass(req, next).await;
    };
    let caller = match caller(&req).await {
        Ok(caller) => caller,
        Err(error) => {
            tracing::error!(%error, "cannot check who is asking");
            return Ok(refuse(req, Refusal::Storage));
        }
    };
    match caller {
        None => Ok(refuse(req, Refusal::Unauthenticated)),
        Some(caller) if !caller.may(action) => Ok(refuse(req, Refusal::Forbidden)),
        Some(caller) if csrf_refused(&req, route.path, &caller) => Ok(refuse(req, Refusal::Csrf)),
        Some(caller) => {
            req.extensions_mut().insert(caller);
            pass(req, next).await
        }
    }
}

/// The pattern of the route the router will give `req` to: matched on the
/// path as the router sees it (percent-decoded but for `%`, `/` and `+`),
/// not on the raw request path.
pub(crate) fn routed_pattern(req: &ServiceRequest) -> Option<String> {
    req.resource_map().match_pattern(req.match_info().as_str())
}

/// Lets `req` through, marking what `/api/` answers as never to be cached,
/// unless it holds U+0000 (a body is read for that only here, once the
/// caller may reach the handler).
async fn pass(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    if !is_hook(&req) {
        match super::nul::held(&mut req).await {
            Ok(false) => {}
            Ok(true) => return Ok(refuse(req, Refusal::Nul)),
            // Answered here, so that it passes back through the headers
            // every answer carries.
            Err(error) => {
                let status = error.as_response_error().status_code();
                return Ok(refuse(req, Refusal::Unreadable(status)));
            }
        }
    }
    let api = is_api(&req);
    let mut response = next.call(req).await?.map_into_boxed_body();
    if api {
        no_store(response.headers_mut());
    }
    Ok(response)
}

/// Whether `req` is for a program (the JSON API, the metrics, a provider's
/// webhook), by the routed path: refused with a status and JSON, never sent
/// to sign in.
fn is_api(req: &ServiceRequest) -> bool {
    routed_under(req, "/api") || is_hook(req) || req.match_info().as_str() == "/metrics"
}

/// Whether `req` is a provider's webhook, by the routed path.
fn is_hook(req: &ServiceRequest) -> bool {
    routed_under(req, "/hooks")
}

/// Whether the routed path is `prefix` or below it.
fn routed_under(req: &ServiceRequest, prefix: &str) -> bool {
    req.match_info()
        .as_str()
        .strip_prefix(prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

fn no_store(headers: &mut header::HeaderMap) {
    headers.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
}

/// The bearer token's caller when the request has one (and nobody if it is
/// not live), else the session's operator if still enabled.
async fn caller(req: &ServiceRequest) -> Result<Option<Principal>, access::AccessError> {
    let Some(state) = req.app_data::<web::Data<AppState>>() else {
        return Ok(None);
    };
    if let Some(value) = req.headers().get(header::AUTHORIZATION) {
        let token = value
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        return match token {
            Some(token) => access::token(state.db(), token).await,
            None => Ok(None),
        };
    }
    let session = req.get_session();
    match (
        session.get::<String>(OPERATOR_KEY),
        session.get::<String>(CREDENTIAL_KEY),
    ) {
        (Ok(Some(id)), Ok(Some(credential))) => {
            access::session_operator(state.db(), &id, &credential).await
        }
        _ => Ok(None),
    }
}

/// Reads that are journaled in the reader's name (`RawBodyRead`,
/// `FixtureExported`): a page of another site, a sibling subdomain's too
/// (`SameSite` lets the cookie through), must not make one in a signed-in
/// person's name with an image or a link.
const JOURNALED_READS: [&str; 2] = ["/api/deliveries/{id}/raw", "/cases/{id}/fixture"];

/// Whether this is, for a session (decided on the matched route), a state
/// change under `/api/` without the proof a form would carry, or a
/// journaled read a browser says another site asked for. Bearer tokens are
/// not sent by browsers on their own, so they need none.
fn csrf_refused(req: &ServiceRequest, route: &str, caller: &Principal) -> bool {
    if caller.kind != PrincipalKind::Operator {
        return false;
    }
    match *req.method() {
        Method::GET | Method::HEAD => {
            JOURNALED_READS.contains(&route) && csrf::foreign_origin(req.request())
        }
        _ => route.starts_with("/api/") && !csrf::api_proof(req.request()),
    }
}

fn refuse(req: ServiceRequest, refusal: Refusal) -> ServiceResponse<BoxBody> {
    let api = is_api(&req);
    let response = match (api, refusal) {
        (_, Refusal::NoRoute) if api => ApiError::new(
            actix_web::http::StatusCode::NOT_FOUND,
            "not_found",
            "no such route",
        )
        .error_response(),
        (_, Refusal::NoRoute) => UiError::new(
            actix_web::http::StatusCode::NOT_FOUND,
            "There is no such page.",
        )
        .error_response(),
        (true, Refusal::Unauthenticated) => {
            let mut response = ApiError::unauthenticated().error_response();
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
            response
        }
        (true, Refusal::Forbidden) => ApiError::forbidden().error_response(),
        (true, Refusal::Csrf) => ApiError::csrf().error_response(),
        (true, Refusal::Storage) => ApiError::storage_unavailable().error_response(),
        (true, Refusal::Nul) => ApiError::new(
            actix_web::http::StatusCode::BAD_REQUEST,
            "nul_character",
            "the request holds U+0000 (%00), which Unicity does not accept",
        )
        .error_response(),
        (true, Refusal::Unreadable(status)) => match status {
            actix_web::http::StatusCode::PAYLOAD_TOO_LARGE => ApiError::new(
                status,
                "body_too_large",
                "the request's body is larger than this route reads",
            ),
            _ => ApiError::new(
                status,
                "unreadable_body",
                "the request's body could not be read",
            ),
        }
        .error_response(),
        (false, Refusal::Unreadable(status)) => UiError::new(
            status,
            "The request's body could not be read: is it too large?",
        )
        .error_response(),
        (false, Refusal::Nul) => UiError::new(
            actix_web::http::StatusCode::BAD_REQUEST,
            "The request holds the character U+0000 (%00), which Unicity does not accept.",
        )
        .error_response(),
        // Back to the page asked for after sign-in, when it is one to read.
        (false, Refusal::Unauthenticated) if req.method() == Method::GET => {
            let asked = req.uri().path_and_query().map_or("/", |p| p.as_str());
            super::ui::see_other(&super::ui::next::login_location(asked))
        }
        (false, Refusal::Unauthenticated) => super::ui::see_other("/login"),
        (false, Refusal::Forbidden) => UiError::forbidden().error_response(),
        (false, Refusal::Csrf) => UiError::csrf().error_response(),
        (false, Refusal::Storage) => UiError::internal("access check unavailable").error_response(),
    };
    let mut response = req.into_response(response);
    if api {
        no_store(response.headers_mut());
    }
    response
}

/// Handlers behind the guard read the caller it found, checked again
/// against the row of the route the router matched: a protected handler
/// that takes a `Principal` cannot run for a caller the table refuses, even
/// if the guard was passed by.
impl actix_web::FromRequest for Principal {
    type Error = actix_web::Error;
    type Future = std::future::Ready<Result<Self, Self::Error>>;

    fn from_request(req: &actix_web::HttpRequest, _: &mut actix_web::dev::Payload) -> Self::Future {
        std::future::ready(authorized(req))
    }
}

fn authorized(req: &actix_web::HttpRequest) -> Result<Principal, actix_web::Error> {
    let api = req.match_info().as_str().starts_with("/api/");
    let action = req
        .match_pattern()
        .and_then(|pattern| row(req.method(), &pattern))
        .and_then(|route| match route.access {
            Access::Requires(action) => Some(action),
            Access::Public | Access::Signed => None,
        });
    let caller = req.extensions().get::<Principal>().cloned();
    match (caller, action) {
        (Some(caller), Some(action)) if caller.may(action) => Ok(caller),
        (Some(_), Some(_)) if api => Err(ApiError::forbidden().into()),
        (Some(_), Some(_)) => Err(UiError::forbidden().into()),
        // Nobody found by the guard, or a handler asking for a caller on a
        // route the table does not protect: nobody is vouched for.
        _ if api => Err(ApiError::unauthenticated().into()),
        _ => Err(actix_web::error::InternalError::from_response(
            "unauthenticated",
            super::ui::see_other("/login"),
        )
        .into()),
    }
}
