//! Why a delivery is refused, with the stable code and status the provider
//! gets, and what arrived with it.

use std::net::IpAddr;

use chrono::{DateTime, Utc};
use sea_orm::DbErr;

use crate::domain::delivery::{DeliveryId, Headers};
use crate::domain::rejection::HeaderExcess;
use crate::providers::signature::SignatureError;
use crate::services::rate_limits::RetryAfter;

/// Why a delivery was refused. Each refusal is journaled on its own while its
/// source's quota allows and the database does, else counted (`rejections`).
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error("body exceeds the source's limit of {limit} bytes")]
    TooLarge {
        delivery_id: Option<DeliveryId>,
        limit: usize,
    },
    #[error("signature check failed: {reason}")]
    Signature {
        delivery_id: Option<DeliveryId>,
        reason: SignatureError,
    },
    #[error("request headers over the limits: {excess}")]
    Headers {
        delivery_id: Option<DeliveryId>,
        excess: HeaderExcess,
    },
    #[error("too many requests; retry after {} s", retry_after.0)]
    RateLimited { retry_after: RetryAfter },
    #[error("the journal is unavailable")]
    Storage(#[source] DbErr),
}

impl Refusal {
    /// Stable snake_case code sent to the provider and stored in the journal.
    pub fn code(&self) -> &'static str {
        match self {
            Self::TooLarge { .. } => "payload_too_large",
            Self::Signature { reason, .. } => reason.code(),
            Self::Headers { .. } => "request_header_fields_too_large",
            Self::RateLimited { .. } => "rate_limited",
            Self::Storage(_) => "storage_unavailable",
        }
    }

    /// The HTTP status the provider gets.
    pub fn status(&self) -> u16 {
        match self {
            Self::TooLarge { .. } => 413,
            Self::Signature { .. } => 401,
            Self::Headers { .. } => 431,
            Self::RateLimited { .. } => 429,
            Self::Storage(_) => 503,
        }
    }

    /// The id to look the refusal up by, when it was journaled on its own.
    pub fn delivery_id(&self) -> Option<DeliveryId> {
        match self {
            Self::TooLarge { delivery_id, .. }
            | Self::Signature { delivery_id, .. }
            | Self::Headers { delivery_id, .. } => *delivery_id,
            Self::RateLimited { .. } | Self::Storage(_) => None,
        }
    }

    /// The same refusal, journaled nowhere on its own (only counted).
    pub(super) fn counted_only(mut self) -> Self {
        match &mut self {
            Self::TooLarge { delivery_id, .. }
            | Self::Signature { delivery_id, .. }
            | Self::Headers { delivery_id, .. } => *delivery_id = None,
            Self::RateLimited { .. } | Self::Storage(_) => {}
        }
        self
    }
}

/// One HTTP request as it reached the endpoint.
pub struct Arrival<'a> {
    pub delivery_id: DeliveryId,
    pub received_at: DateTime<Utc>,
    /// Lower-case names, values as received.
    pub headers: &'a Headers,
    /// The peer's address, for per-client rate limits.
    pub client: Option<IpAddr>,
}
