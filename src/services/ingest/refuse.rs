//! Refusing a delivery: over its source's size or header limits, over its
//! rate limit, or failing its signature. A refusal within its source's quota
//! is journaled on its own (a bounded trace, masked headers, no body);
//! beyond it, only counted. The provider gets the refusal's status either way.

use super::refusal::{Arrival, Refusal};
use crate::config::Source;
use crate::domain::delivery::{BodyRef, Headers};
use crate::domain::journal::{DeliveryRejected, JournalEvent};
use crate::domain::rejection::{HeaderExcess, header_bytes, summarize};
use crate::services::engine::{Engine, WriteEvent};
use crate::services::rejections::{Counted, Note};

/// Refuses a body over the source's limit. `seen` is the size announced by
/// Content-Length or read before giving up; the body itself is never stored.
pub async fn refuse_too_large(
    engine: &Engine,
    source: &Source,
    arrival: Arrival<'_>,
    seen: u64,
) -> Refusal {
    let refusal = Refusal::TooLarge {
        delivery_id: Some(arrival.delivery_id),
        limit: source.max_body_bytes,
    };
    reject(engine, source, &arrival, refusal, None, Some(seen)).await
}

/// Refuses a request whose headers break the limits, before its body is read.
pub async fn refuse_headers(
    engine: &Engine,
    source: &Source,
    arrival: Arrival<'_>,
    excess: HeaderExcess,
    declared_size: Option<u64>,
) -> Refusal {
    let refusal = Refusal::Headers {
        delivery_id: Some(arrival.delivery_id),
        excess,
    };
    reject(engine, source, &arrival, refusal, None, declared_size).await
}

/// Admits a request under the per-client and per-source request rates, or
/// counts it (never journaled on its own) and says when to retry.
pub fn admit(
    engine: &Engine,
    source: &Source,
    arrival: &Arrival<'_>,
    declared_size: Option<u64>,
) -> Result<(), Refusal> {
    let limits = &engine.rejections.limits;
    limits
        .admit_request(source.slug(), arrival.client)
        .map_err(|retry_after| {
            let refusal = Refusal::RateLimited { retry_after };
            let bytes = header_bytes(arrival.headers) as u64 + declared_size.unwrap_or(0);
            let counted = Counted {
                reason: refusal.code(),
                status: refusal.status(),
                bytes,
            };
            engine
                .rejections
                .tally
                .count(&source.origin, arrival.received_at, counted);
            refusal
        })
}

/// Answers a refusal. Past the per-client or per-source rejection rate it
/// becomes a 429 and is only counted; within it, it is journaled on its own
/// (a bounded summary: see `domain::rejection`) while the source's quota for
/// the window lasts, and counted beyond. The provider gets its 4xx whether or
/// not the journal write succeeds (it will retry either way); a failed write
/// is logged and counted instead.
pub(super) async fn reject(
    engine: &Engine,
    source: &Source,
    arrival: &Arrival<'_>,
    refusal: Refusal,
    body: Option<BodyRef>,
    declared_size: Option<u64>,
) -> Refusal {
    let summary = summarize(&masked(source, arrival.headers));
    let body_bytes = body.as_ref().map(|b| b.size).or(declared_size);
    let counted = Counted {
        reason: refusal.code(),
        status: refusal.status(),
        bytes: summary.bytes + body_bytes.unwrap_or(0),
    };
    let (tally, at) = (&engine.rejections.tally, arrival.received_at);
    let admitted = engine
        .rejections
        .limits
        .admit_rejection(source.slug(), arrival.client);
    if let Err(retry_after) = admitted {
        tally.count(
            &source.origin,
            at,
            Counted {
                status: 429,
                ..counted
            },
        );
        return Refusal::RateLimited { retry_after };
    }
    if tally.note(&source.origin, at, counted) == Note::Counted {
        return refusal.counted_only();
    }
    let event = JournalEvent::DeliveryRejected(DeliveryRejected {
        origin: source.origin.clone(),
        received_at: at,
        headers: summary.headers,
        headers_omitted: summary.omitted,
        header_bytes: Some(summary.bytes),
        reason: counted.reason.to_owned(),
        status: counted.status,
        body,
        declared_size,
    });
    let id = arrival.delivery_id;
    let recorded = engine
        .writer
        .submit(WriteEvent::record(Some(id), event).at(at))
        .await;
    match recorded {
        Ok(_) => refusal,
        Err(error) => {
            tracing::error!(delivery.id = %id, source = source.slug(), %error, "could not journal a rejection; counted instead");
            tally.count(&source.origin, at, counted);
            refusal.counted_only()
        }
    }
}

/// Secret header values never reach the journal: it cannot be edited later.
pub(super) fn masked(source: &Source, headers: &Headers) -> Headers {
    source.mask_headers(headers)
}
