//! Liveness (the process answers) and readiness (the database answers and
//! every writer can commit), with how far the deliveries read model is behind
//! the journal.

use actix_web::{HttpResponse, get, web};
use serde_json::json;

use crate::state::AppState;
use crate::store;

#[get("/healthz")]
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({ "status": "ok" }))
}

#[get("/readyz")]
pub async fn readyz(state: web::Data<AppState>) -> HttpResponse {
    if !state.engine.writer.is_healthy() {
        HttpResponse::ServiceUnavailable().json(json!({
            "code": "writer_unavailable",
            "message": "the writer's last commit failed; it retries on its own",
        }))
    } else if store::ping(state.db()).await {
        // The read model's lag is reported, not judged: it follows the
        // journal and deciding never reads it.
        let read_model = crate::services::projector::freshness(&state.engine)
            .await
            .unwrap_or_default();
        HttpResponse::Ok().json(json!({ "status": "ready", "read_model": read_model }))
    } else {
        HttpResponse::ServiceUnavailable().json(json!({
            "code": "storage_unavailable",
            "message": "the database does not answer",
        }))
    }
}
