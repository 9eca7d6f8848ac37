//! `GET /api/deliveries`: deliveries found by `q` (delivery id, provider
//! event or delivery id, business key, resource such as a payment id) and
//! filters, or the values starting with `q` when it ends in `*`, newest first,
//! a page at a time (`next_cursor`, `previous_cursor`), with their count and,
//! when nothing matches, the ids near `q` (`suggestions`).
//! `GET /api/deliveries/{id}`: a delivery, its masked headers, its body when
//! parseable (sensitive values masked), and its journal events in order.
//! `GET /api/deliveries/{id}/raw`: the exact bytes received, when enabled,
//! each read journaled.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, get, web};

use crate::auth::Principal;
use crate::domain::delivery::DeliveryId;
use crate::routes::error::ApiError;
use crate::services::deliveries::{self, ShowError};
use crate::services::raw_reads::{self, RawReadError, Reader};
use crate::services::search::{self, Params, SearchError};
use crate::state::AppState;

#[utoipa::path(
    get,
    path = "/api/deliveries",
    tag = "deliveries",
    params(
        ("q" = Option<String>, Query, description = "A delivery id, a provider event id or delivery-id header, a business key, or a resource (payment id), as typed or in lower or upper case; ending in `*`, the values that start with it (at least 6 characters before the `*`; a sensitive resource, stored as its keyed hash, is found only whole)"),
        ("source" = Option<String>, Query, description = "Only this source"),
        ("event_type" = Option<String>, Query, description = "Only this event type"),
        ("decision" = Option<String>, Query, description = "Only this decision (process, ignore, defer, quarantine, reconcile)"),
        ("from" = Option<String>, Query, description = "Received at or after: RFC 3339, `YYYY-MM-DDTHH:MM` (UTC) or `YYYY-MM-DD`"),
        ("to" = Option<String>, Query, description = "Received before, same forms"),
        ("limit" = Option<u32>, Query, description = "At most 200 (default 50)"),
        ("cursor" = Option<String>, Query, description = "A page's `next_cursor`: the page after it"),
        ("before" = Option<String>, Query, description = "A page's `previous_cursor`: the page before it (not with `cursor`)"),
    ),
    responses(
        (status = 200, description = "Deliveries newest first, a page at a time, how many match (up to 1,000), and when nothing matches `q`, stored ids near it", body = crate::services::search::Page),
        (status = 400, description = "A parameter it cannot read (`invalid_search`)", body = ApiError),
        (status = 401, description = "No live bearer token or session (`unauthenticated`)", body = ApiError), (status = 403, description = "The caller's role does not allow it (`forbidden`); a session without its CSRF token (`csrf`)", body = ApiError), (status = 503, description = "The database does not answer (`storage_unavailable`)", body = ApiError),
    ),
    security(("bearer" = []))
)]
#[get("/api/deliveries")]
pub async fn list(
    state: web::Data<AppState>,
    params: web::Query<Params>,
    _caller: Principal,
) -> Result<HttpResponse, ApiError> {
    match search::search(&state.engine, &params).await {
        Ok(page) => Ok(HttpResponse::Ok().json(page)),
        Err(SearchError::Invalid(message)) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_search",
            message,
        )),
        Err(SearchError::Db(error)) => {
            tracing::error!(%error, "cannot search deliveries");
            Err(ApiError::storage_unavailable())
        }
    }
}

#[utoipa::path(
    get,
    path = "/api/deliveries/{id}",
    tag = "deliveries",
    params(("id" = String, Path, description = "The delivery id (a UUID)")),
    responses(
        (status = 200, description = "The delivery: headers (secrets masked), body (sensitive values masked), identity, decision and why, timeline, effects, cases, journal", body = crate::services::deliveries::DeliveryView),
        (status = 400, description = "Not a UUID (`invalid_delivery_id`)", body = ApiError),
        (status = 404, description = "No such delivery (`delivery_not_found`)", body = ApiError),
        (status = 401, description = "No live bearer token or session (`unauthenticated`)", body = ApiError), (status = 403, description = "The caller's role does not allow it (`forbidden`); a session without its CSRF token (`csrf`)", body = ApiError), (status = 503, description = "The database does not answer (`storage_unavailable`)", body = ApiError),
    ),
    security(("bearer" = []))
)]
#[get("/api/deliveries/{id}")]
pub async fn show(
    state: web::Data<AppState>,
    id: web::Path<String>,
    _caller: Principal,
) -> Result<HttpResponse, ApiError> {
    let id = parse_id(&id)?;
    match deliveries::show(&state.engine, &state.sources, id).await {
        Ok(view) => Ok(HttpResponse::Ok().json(view)),
        Err(ShowError::NotFound) => Err(not_found()),
        Err(error) => {
            tracing::error!(delivery.id = %id, %error, "cannot read delivery");
            Err(ApiError::storage_unavailable())
        }
    }
}

#[utoipa::path(
    get,
    path = "/api/deliveries/{id}/raw",
    tag = "deliveries",
    params(("id" = String, Path, description = "The delivery id (a UUID)")),
    responses(
        (status = 200, description = "The exact bytes received, unmasked; the read is journaled first (`RawBodyRead`)", content_type = "application/octet-stream", body = Vec<u8>),
        (status = 400, description = "Not a UUID (`invalid_delivery_id`)", body = ApiError),
        (status = 403, description = "Reads are disabled (`raw_body_reads_disabled`), the role may not read raw bodies (`forbidden`), or, for a session, the browser says another site asked (`csrf`)", body = ApiError),
        (status = 404, description = "No such delivery (`delivery_not_found`), or its body is not stored (`raw_body_not_stored`)", body = ApiError),
        (status = 401, description = "No live bearer token or session (`unauthenticated`)", body = ApiError), (status = 503, description = "The database does not answer (`storage_unavailable`)", body = ApiError),
    ),
    security(("bearer" = []))
)]
#[get("/api/deliveries/{id}/raw")]
pub async fn raw(
    state: web::Data<AppState>,
    id: web::Path<String>,
    request: HttpRequest,
    caller: Principal,
) -> Result<HttpResponse, ApiError> {
    let id = parse_id(&id)?;
    // The socket's peer, or the client a trusted proxy forwards for; never
    // a forwarding header from anyone else.
    let reader = Reader {
        client_address: crate::routes::client::address(&request).map(|a| a.to_string()),
        caller,
    };
    let address = reader.client_address.clone();
    match raw_reads::read(&state.engine, id, reader).await {
        Ok(bytes) => {
            tracing::info!(delivery.id = %id, client = address, "raw body read");
            Ok(HttpResponse::Ok()
                .content_type("application/octet-stream")
                .body(bytes))
        }
        Err(RawReadError::Disabled) => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "raw_body_reads_disabled",
            "raw body reads are disabled ([engine] raw_body_reads)",
        )),
        Err(RawReadError::NotFound) => Err(not_found()),
        Err(error @ RawReadError::NoLongerAllowed) => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            error.to_string(),
        )),
        Err(RawReadError::NotStored) => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "raw_body_not_stored",
            "this delivery's raw body is not stored",
        )),
        Err(error) => {
            tracing::error!(delivery.id = %id, %error, "cannot read raw body");
            Err(ApiError::storage_unavailable())
        }
    }
}

fn parse_id(id: &str) -> Result<DeliveryId, ApiError> {
    id.parse().map_err(|_| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_delivery_id",
            "a delivery id is a UUID",
        )
    })
}

fn not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "delivery_not_found",
        "no delivery with this id",
    )
}
