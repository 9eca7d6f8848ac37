//! The access guard: for every request, the row of `routes::TABLE` its
//! method and matched route give, then who is asking (bearer token, else
//! session) and whether their role allows the row's action. The caller is
//! left in the request for handlers (`Principal` extractor). A matched route
//! without a row is refused to everyone.
//!
//! Refusals: under `/api/`, JSON `401 unauthenticated` / `403 forbidden`;
//! elsewhere, `303` to `/login` when nobody is signed in, else the HTML 403.

use actix_session::SessionExt;
use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header;
use actix_web::middleware::Next;
use actix_web::{HttpMessage, ResponseError, web};

use super::error::{ApiError, UiError};
use super::{Access, row};
use crate::auth::Principal;
use crate::auth::sessions::OPERATOR_KEY;
use crate::services::access;
use crate::state::AppState;

enum Refusal {
    Unauthenticated,
    Forbidden,
    NoRoute,
    Storage,
}

pub async fn guard(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let Some(pattern) = req.match_pattern() else {
        // No route matched: the default 404.
        return Ok(next.call(req).await?.map_into_boxed_body());
    };
    let Some(route) = row(req.method(), &pattern) else {
        return Ok(refuse(req, Refusal::NoRoute));
    };
    let Access::Requires(action) = route.access else {
        return Ok(next.call(req).await?.map_into_boxed_body());
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
        Some(caller) => {
            req.extensions_mut().insert(caller);
            Ok(next.call(req).await?.map_into_boxed_body())
        }
    }
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
    match session.get::<String>(OPERATOR_KEY) {
        Ok(Some(id)) => access::operator(state.db(), &id).await,
        _ => Ok(None),
    }
}

fn refuse(req: ServiceRequest, refusal: Refusal) -> ServiceResponse<BoxBody> {
    let api = req.path().starts_with("/api/");
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
        (true, Refusal::Storage) => ApiError::storage_unavailable().error_response(),
        (false, Refusal::Unauthenticated) => super::ui::see_other("/login"),
        (false, Refusal::Forbidden) => UiError::forbidden().error_response(),
        (false, Refusal::Storage) => UiError::internal("access check unavailable").error_response(),
    };
    req.into_response(response)
}
