//! The webhook API's error body: a stable snake_case `code`, a human `message`
//! and, when the request was journaled, the `delivery_id` to look it up.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use serde::Serialize;

use crate::domain::delivery::DeliveryId;

#[derive(Debug, Serialize)]
pub struct ApiError {
    #[serde(skip)]
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery_id: Option<DeliveryId>,
    /// Seconds to send as `Retry-After` (429 answers).
    #[serde(skip)]
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            delivery_id: None,
            retry_after: None,
        }
    }

    pub fn with_retry_after(mut self, secs: u64) -> Self {
        self.retry_after = Some(secs);
        self
    }

    pub fn with_delivery(mut self, id: Option<DeliveryId>) -> Self {
        self.delivery_id = id;
        self
    }

    pub fn storage_unavailable() -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "storage_unavailable",
            "the journal is unavailable; retry later",
        )
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.status
    }

    fn error_response(&self) -> HttpResponse {
        let mut response = HttpResponse::build(self.status);
        if let Some(secs) = self.retry_after {
            response.insert_header(("Retry-After", secs.to_string()));
        } else if self.status == StatusCode::SERVICE_UNAVAILABLE {
            response.insert_header(("Retry-After", "5"));
        }
        response.json(self)
    }
}
