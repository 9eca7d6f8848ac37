//! `POST /hooks/{source}`: where providers deliver. A request is first held to
//! the rate limits and the header limits, then its body is read as raw bytes
//! under the source's size limit; everything else is the ingest service's.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, post, web};
use futures_util::StreamExt;
use serde::Serialize;
use utoipa::ToSchema;

use super::error::ApiError;
use crate::domain::confidence::Strength;
use crate::domain::decision::{Action, FieldDifference, Reason};
use crate::domain::delivery::BodyParse;
use crate::domain::delivery::{DeliveryId, Headers};
use crate::domain::journal::Layer;
use crate::domain::rejection;
use crate::services::engine::Engine;
use crate::services::ingest::{self, Accepted, Arrival, Refusal};
use crate::services::items;
use crate::state::AppState;

#[utoipa::path(
    post,
    path = "/hooks/{source}",
    tag = "webhooks",
    params(("source" = String, Path, description = "The source's slug, as configured")),
    request_body(content = Vec<u8>, content_type = "application/json", description = "The provider's delivery, signed as its source's scheme says; verified on these exact bytes"),
    responses(
        (status = 200, description = "A duplicate (`ignore`): nothing more will happen", body = DecisionAnswer),
        (status = 202, description = "Journaled and decided: processed, deferred, quarantined or sent to reconciliation", body = DecisionAnswer),
        (status = 400, description = "The body could not be read (`body_read_failed`)", body = ApiError),
        (status = 401, description = "`missing_signature`, `missing_timestamp`, `malformed_signature_header`, `invalid_signature`, `ambiguous_signed_field`, `timestamp_out_of_tolerance`", body = ApiError),
        (status = 404, description = "No source has this slug (`unknown_source`)", body = ApiError),
        (status = 413, description = "The body is over the source's limit (`payload_too_large`)", body = ApiError),
        (status = 429, description = "A rate limit (`rate_limited`), with `Retry-After`", body = ApiError),
        (status = 431, description = "Headers over the limits (`request_header_fields_too_large`)", body = ApiError),
        (status = 503, description = "Nothing was journaled (`storage_unavailable`): retry", body = ApiError),
    )
)]
#[post("/hooks/{source}")]
pub async fn receive(
    state: web::Data<AppState>,
    source: web::Path<String>,
    request: HttpRequest,
    mut payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let source = state.sources.get(source.as_str()).ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "unknown_source",
            "no source with this slug",
        )
    })?;
    state
        .engine
        .metrics
        .received(source.slug(), &source.origin.provider);
    let headers = collect_headers(&request);
    let arrival = Arrival {
        delivery_id: DeliveryId::from_uuid(uuid::Uuid::now_v7()),
        received_at: chrono::Utc::now(),
        headers: &headers,
        // Behind a trusted proxy, the client it forwards for: the rate
        // limits and the trace are per sender, not per proxy.
        client: super::client::address(&request),
    };
    let limit = source.max_body_bytes;
    let engine = &state.engine;
    let declared = content_length(&request);

    ingest::admit(engine, source, &arrival, declared)
        .map_err(|r| refused(engine, source.slug(), r))?;
    if let Err(excess) = rejection::check_headers(&headers) {
        let refusal = ingest::refuse_headers(engine, source, arrival, excess, declared).await;
        return Err(refused(engine, source.slug(), refusal));
    }
    if let Some(declared) = declared.filter(|n| *n > limit as u64) {
        let refusal = ingest::refuse_too_large(engine, source, arrival, declared).await;
        return Err(refused(engine, source.slug(), refusal));
    }
    let mut raw = web::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|_| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "body_read_failed",
                "the request body could not be read",
            )
        })?;
        if raw.len() + chunk.len() > limit {
            let seen = (raw.len() + chunk.len()) as u64;
            let refusal = ingest::refuse_too_large(engine, source, arrival, seen).await;
            return Err(refused(engine, source.slug(), refusal));
        }
        raw.extend_from_slice(&chunk);
    }

    match ingest::receive(engine, source, arrival, &raw).await {
        Ok(accepted) => Ok(accepted_response(source.slug(), &accepted)),
        Err(refusal) => Err(refused(engine, source.slug(), refusal)),
    }
}

/// What a provider is answered once the delivery and its decision are
/// committed: 200 for `ignore`, 202 for anything else.
#[derive(Debug, Serialize, ToSchema)]
pub struct DecisionAnswer {
    #[schema(value_type = String, format = Uuid)]
    pub delivery_id: DeliveryId,
    pub received_at: chrono::DateTime<chrono::Utc>,
    pub parse: BodyParse,
    pub decision: Action,
    pub layer: Layer,
    pub reason: Reason,
    /// The decision in a sentence.
    pub summary: String,
    pub event_type: Option<String>,
    /// `name@version` of the strategy that derived the business key.
    pub strategy: Option<String>,
    pub strength: Option<Strength>,
    pub key: Option<String>,
    /// The key an older strategy version matched through, if any.
    pub matched_key: Option<String>,
    pub matched_strategy: Option<String>,
    pub transport_key: String,
    /// The delivery this one was compared with.
    pub reference_delivery_id: Option<uuid::Uuid>,
    pub effect_id: Option<uuid::Uuid>,
    /// The case opened for a person or the provider's API.
    pub case_id: Option<uuid::Uuid>,
    pub differences: Vec<FieldDifference>,
    /// Processed under uncertainty: a correction may follow.
    pub flagged_for_correction: bool,
    /// For a batch of several events: what each became, in order.
    pub items: Vec<ItemAnswer>,
}

/// One event of a batch, decided as if it had arrived alone.
#[derive(Debug, Serialize, ToSchema)]
pub struct ItemAnswer {
    #[schema(value_type = String, format = Uuid)]
    pub delivery_id: DeliveryId,
    pub event_type: Option<String>,
    pub decision: Action,
    pub reason: Reason,
    pub summary: String,
    pub strategy: Option<String>,
    pub key: Option<String>,
    pub matched_strategy: Option<String>,
    pub reference_delivery_id: Option<uuid::Uuid>,
    pub effect_id: Option<uuid::Uuid>,
    pub case_id: Option<uuid::Uuid>,
    pub differences: Vec<FieldDifference>,
    pub flagged_for_correction: bool,
}

/// A duplicate is a success (200); anything kept for later is 202.
fn accepted_response(source: &str, accepted: &Accepted) -> HttpResponse {
    let made = &accepted.decision;
    let decision = &made.decision;
    let business = accepted.derived.business.as_ref();
    tracing::info!(
        delivery.id = %accepted.delivery_id,
        source,
        decision = decision.action.as_str(),
        reason = decision.reason.as_str(),
        strategy = business.map(|b| b.strategy.as_str()),
        latency_ms = accepted.latency_ms,
        "delivery decided"
    );
    let body = DecisionAnswer {
        delivery_id: accepted.delivery_id,
        received_at: accepted.received_at,
        parse: accepted.parse,
        decision: decision.action,
        layer: made.layer,
        reason: decision.reason,
        summary: made.summary.clone(),
        event_type: accepted.derived.event_type.clone(),
        strategy: business.map(|b| b.strategy.clone()),
        strength: business.map(|b| b.strength),
        key: business.map(|b| b.key.clone()),
        matched_key: made.matched_key.clone(),
        matched_strategy: made.matched_strategy().map(str::to_owned),
        transport_key: accepted.derived.transport_key.clone(),
        reference_delivery_id: decision
            .reference_delivery
            .or(made.first_delivery_id.map(|d| d.as_uuid())),
        effect_id: decision.effect_id,
        case_id: made.case_id,
        differences: decision.differences.clone(),
        flagged_for_correction: decision.flagged_for_correction,
        items: accepted.items.iter().map(item_answer).collect(),
    };
    match decision.action {
        Action::Ignore => HttpResponse::Ok().json(body),
        _ => HttpResponse::Accepted().json(body),
    }
}

fn item_answer(item: &items::Decided) -> ItemAnswer {
    let made = &item.decision;
    let decision = &made.decision;
    let business = item.derived.business.as_ref();
    ItemAnswer {
        delivery_id: item.delivery_id,
        event_type: item.derived.event_type.clone(),
        decision: decision.action,
        reason: decision.reason,
        summary: made.summary.clone(),
        strategy: business.map(|b| b.strategy.clone()),
        key: business.map(|b| b.key.clone()),
        matched_strategy: made.matched_strategy().map(str::to_owned),
        reference_delivery_id: decision.reference_delivery,
        effect_id: decision.effect_id,
        case_id: made.case_id,
        differences: decision.differences.clone(),
        flagged_for_correction: decision.flagged_for_correction,
    }
}

fn refused(engine: &Engine, source: &str, refusal: Refusal) -> ApiError {
    engine.metrics.refused(source, refusal.code());
    let delivery_id = refusal.delivery_id();
    let status = match &refusal {
        Refusal::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
        Refusal::Signature { .. } => StatusCode::UNAUTHORIZED,
        Refusal::Headers { .. } => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        Refusal::RateLimited { retry_after } => {
            // A flood is counted, not logged line by line.
            tracing::debug!(source, "request rate limited");
            return ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                refusal.code(),
                refusal.to_string(),
            )
            .with_retry_after(retry_after.0);
        }
        Refusal::Storage(error) => {
            tracing::error!(source, %error, "delivery not journaled; provider told to retry");
            return ApiError::storage_unavailable();
        }
    };
    // Only rejections journaled on their own get a log line: the rest are
    // counted, and a flood must not fill the logs either.
    if delivery_id.is_some() {
        tracing::info!(delivery.id = ?delivery_id, source, code = refusal.code(), "delivery rejected");
    }
    ApiError::new(status, refusal.code(), refusal.to_string()).with_delivery(delivery_id)
}

fn collect_headers(request: &HttpRequest) -> Headers {
    request
        .headers()
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_owned(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect()
}

fn content_length(request: &HttpRequest) -> Option<u64> {
    request
        .headers()
        .get(actix_web::http::header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}
