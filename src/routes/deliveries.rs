//! `GET /api/deliveries/{id}`: a delivery, its masked headers, its body when
//! parseable (sensitive values masked), and its journal events in order.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, get, web};

use super::error::ApiError;
use crate::domain::delivery::DeliveryId;
use crate::services::deliveries::{self, ShowError};
use crate::startup::AppState;

#[get("/api/deliveries/{id}")]
pub async fn show(
    state: web::Data<AppState>,
    id: web::Path<String>,
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
