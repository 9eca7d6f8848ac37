//! `GET /metrics`: the Prometheus text exposition (`services::watch`). On
//! the main listener it is for an operator or API token of any role; with
//! `--metrics-listen`, a listener of its own serves it alone to whoever can
//! reach that address (a scraper on a private network).

use actix_web::http::header;
use actix_web::{HttpResponse, get, web};

use super::error::ApiError;
use crate::auth::Principal;
use crate::services::engine::SharedEngine;
use crate::services::watch;
use crate::state::AppState;

/// The exposition format's media type.
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

#[utoipa::path(
    get,
    path = "/metrics",
    tag = "watching",
    responses(
        (status = 200, description = "The Prometheus text exposition", content_type = "text/plain; version=0.0.4", body = String),
        (status = 401, description = "No live bearer token or session (`unauthenticated`)", body = ApiError),
        (status = 503, description = "The projections cannot be read (`storage_unavailable`)", body = ApiError),
    ),
    security(("bearer" = []))
)]
#[get("/metrics")]
pub async fn scrape(
    state: web::Data<AppState>,
    _caller: Principal,
) -> Result<HttpResponse, ApiError> {
    render(&state.engine).await
}

/// The metrics listener's only route.
#[get("/metrics")]
pub async fn open_scrape(engine: web::Data<SharedEngine>) -> Result<HttpResponse, ApiError> {
    render(&engine).await
}

async fn render(engine: &SharedEngine) -> Result<HttpResponse, ApiError> {
    let text = watch::scrape(engine, chrono::Utc::now())
        .await
        .map_err(|error| {
            tracing::error!(%error, "metrics not read");
            ApiError::storage_unavailable()
        })?;
    Ok(HttpResponse::Ok()
        .content_type(CONTENT_TYPE)
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .body(text))
}
