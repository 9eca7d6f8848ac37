//! Liveness (the process answers) and readiness (the database answers and
//! every writer can commit), with how far the deliveries read model is behind
//! the journal.

use actix_web::{HttpResponse, get, web};
use serde::Serialize;
use serde_json::json;

use super::error::ApiError;
use crate::services::projector::Freshness;
use crate::state::AppState;
use crate::store;

/// The process answers.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Alive {
    /// Always `ok`.
    status: &'static str,
}

/// The database answers and every writer can commit.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Ready {
    /// Always `ready`.
    status: &'static str,
    /// How far the deliveries read model is behind the journal: reported,
    /// not judged (deciding never reads it).
    read_model: Freshness,
}

#[utoipa::path(
    get,
    path = "/healthz",
    tag = "watching",
    responses((status = 200, description = "The process answers", body = Alive))
)]
#[get("/healthz")]
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(Alive { status: "ok" })
}

#[utoipa::path(
    get,
    path = "/readyz",
    tag = "watching",
    responses(
        (status = 200, description = "Ready to take deliveries", body = Ready),
        (status = 503, description = "The writer's last commit failed (`writer_unavailable`) or the database does not answer (`storage_unavailable`)", body = ApiError),
    )
)]
#[get("/readyz")]
pub async fn readyz(state: web::Data<AppState>) -> HttpResponse {
    if !state.engine.writer.is_healthy() {
        HttpResponse::ServiceUnavailable().json(json!({
            "code": "writer_unavailable",
            "message": "the writer's last commit failed; it retries on its own",
        }))
    } else if store::ping(state.db()).await {
        let read_model = crate::services::projector::freshness(&state.engine)
            .await
            .unwrap_or_default();
        HttpResponse::Ok().json(Ready {
            status: "ready",
            read_model,
        })
    } else {
        HttpResponse::ServiceUnavailable().json(json!({
            "code": "storage_unavailable",
            "message": "the database does not answer",
        }))
    }
}
