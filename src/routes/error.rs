//! Errors at the HTTP boundary, and the one place service errors become
//! responses. Which type goes where:
//!
//! - `ApiError`: every JSON answer that is not a success, from `/hooks` and
//!   `/api` (and the access guard on `/api`): a stable snake_case `code`, a
//!   human `message` and, when the request was journaled, the `delivery_id`.
//! - `UiError`: every HTML answer that is not a success, from `routes::ui`
//!   (and the access guard elsewhere): the `error.html` page.
//! - Service errors (`thiserror` enums where failure happens, e.g.
//!   `services::access::AccessError`) are mapped to both below, by `From`;
//!   handlers use `?` and never choose a status themselves.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use serde::Serialize;

use crate::domain::delivery::DeliveryId;
use crate::services::access::{AccessError, LoginError};
use crate::services::cases::CaseError;

/// Every JSON refusal: a stable snake_case `code`, a `message` for people,
/// and the `delivery_id` when the refusal was journaled.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(as = Error)]
pub struct ApiError {
    #[serde(skip)]
    #[schema(ignore)]
    pub status: StatusCode,
    #[schema(value_type = String)]
    pub code: &'static str,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = Uuid)]
    pub delivery_id: Option<DeliveryId>,
    /// Seconds to send as `Retry-After` (429 answers).
    #[serde(skip)]
    #[schema(ignore)]
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

impl ApiError {
    pub fn unauthenticated() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthenticated",
            "send `Authorization: Bearer <token>` or sign in",
        )
    }

    pub fn forbidden() -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "your role does not allow this",
        )
    }
}

impl ApiError {
    pub fn csrf() -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "csrf",
            "a signed-in session changes state only from this site, with its CSRF token in \
             `X-CSRF-Token`; scripts and other clients send `Authorization: Bearer <token>`",
        )
    }
}

impl From<AccessError> for ApiError {
    fn from(error: AccessError) -> Self {
        let (status, code) = access_status(&error);
        if status.is_server_error() {
            tracing::error!(%error, "access operation failed");
            return Self::storage_unavailable();
        }
        Self::new(status, code, error.to_string())
    }
}

fn access_status(error: &AccessError) -> (StatusCode, &'static str) {
    match error {
        AccessError::InvalidName => (StatusCode::BAD_REQUEST, "invalid_name"),
        AccessError::Password(_) => (StatusCode::BAD_REQUEST, "invalid_password"),
        AccessError::NameTaken(_) => (StatusCode::CONFLICT, "name_taken"),
        AccessError::UnknownOperator(_) => (StatusCode::NOT_FOUND, "operator_not_found"),
        AccessError::UnknownToken(_) => (StatusCode::NOT_FOUND, "token_not_found"),
        AccessError::UnknownRole(_) => (StatusCode::BAD_REQUEST, "invalid_role"),
        AccessError::InvalidExpiry => (StatusCode::BAD_REQUEST, "invalid_expiry"),
        AccessError::Yourself => (StatusCode::CONFLICT, "own_account"),
        AccessError::LastAdmin => (StatusCode::CONFLICT, "last_admin"),
        AccessError::NoLongerAdmin => (StatusCode::FORBIDDEN, "forbidden"),
        AccessError::SetupClosed => (StatusCode::NOT_FOUND, "setup_closed"),
        AccessError::LinkClosed => (StatusCode::NOT_FOUND, "link_closed"),
        AccessError::Storage(_) => (StatusCode::SERVICE_UNAVAILABLE, "storage_unavailable"),
    }
}

/// An HTML error page.
#[derive(Debug)]
pub struct UiError {
    pub status: StatusCode,
    pub message: String,
    /// Seconds to wait, sent as `Retry-After` (throttling, storage).
    pub retry_after: Option<u64>,
}

impl UiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            retry_after: None,
        }
    }

    pub fn forbidden() -> Self {
        Self::new(StatusCode::FORBIDDEN, "Your role does not allow this page.")
    }

    pub fn csrf() -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "This form has expired or did not come from this site. Reload the page and try again.",
        )
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn throttled(wait: std::time::Duration) -> Self {
        let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        Self {
            retry_after: Some(secs.max(1)),
            ..Self::new(
                StatusCode::TOO_MANY_REQUESTS,
                "Too many sign-in attempts. Wait a minute and try again.",
            )
        }
    }

    pub fn internal(error: impl std::fmt::Display) -> Self {
        tracing::error!(%error, "page failed");
        Self {
            retry_after: Some(5),
            ..Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "Unicity cannot answer right now. Try again in a moment.",
            )
        }
    }
}

impl std::fmt::Display for UiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.status, self.message)
    }
}

impl From<AccessError> for UiError {
    fn from(error: AccessError) -> Self {
        let (status, _) = access_status(&error);
        if status.is_server_error() {
            return Self::internal(error);
        }
        Self::new(status, error.to_string())
    }
}

impl From<CaseError> for UiError {
    fn from(error: CaseError) -> Self {
        match error {
            CaseError::NotFound => Self::new(StatusCode::NOT_FOUND, "There is no such case."),
            CaseError::Forbidden { .. } | CaseError::NoLongerAllowed => Self::forbidden(),
            CaseError::Refused(refusal) => Self::new(StatusCode::CONFLICT, refusal.to_string()),
            CaseError::Db(error) => Self::internal(error),
        }
    }
}

impl From<LoginError> for UiError {
    fn from(error: LoginError) -> Self {
        match error {
            LoginError::Refused => Self::new(StatusCode::UNAUTHORIZED, error.to_string()),
            LoginError::Storage(e) => Self::internal(e),
        }
    }
}

impl ResponseError for UiError {
    fn status_code(&self) -> StatusCode {
        self.status
    }

    fn error_response(&self) -> HttpResponse {
        let mut response = HttpResponse::build(self.status);
        if let Some(secs) = self.retry_after {
            response.insert_header(("Retry-After", secs.to_string()));
        }
        let page = super::ui::ErrorPage {
            status: self.status.as_u16(),
            reason: self.status.canonical_reason().unwrap_or("Error"),
            message: &self.message,
        };
        super::ui::html(response, &page)
    }
}
