//! Receiving one delivery: verify, journal, answer.
//!
//! Invariant: a delivery is committed to the journal (with its raw body) before
//! the provider gets any 2xx. If the database fails, the transaction rolls back
//! and the provider gets a 503 so it retries: never a half-written delivery.

use chrono::{DateTime, Utc};
use sea_orm::{DatabaseConnection, DbErr, TransactionTrait};

use crate::config::Source;
use crate::domain::delivery::{BodyParse, BodyRef, DeliveryId, Headers, mask_headers};
use crate::domain::journal::{DeliveryReceived, DeliveryRejected, JournalEvent};
use crate::providers::signature::{self, SignatureError};
use crate::store::{bodies, journal};

/// A delivery that is safely journaled.
#[derive(Debug, Clone)]
pub struct Accepted {
    pub delivery_id: DeliveryId,
    pub received_at: DateTime<Utc>,
    pub parse: BodyParse,
}

/// Why a delivery was refused. Each refusal is journaled when the database allows.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error("body exceeds the source's limit of {limit} bytes")]
    TooLarge {
        delivery_id: DeliveryId,
        limit: usize,
    },
    #[error("signature check failed: {reason}")]
    Signature {
        delivery_id: DeliveryId,
        reason: SignatureError,
    },
    #[error("the journal is unavailable")]
    Storage(#[source] DbErr),
}

impl Refusal {
    /// Stable snake_case code sent to the provider and stored in the journal.
    pub fn code(&self) -> &'static str {
        match self {
            Self::TooLarge { .. } => "payload_too_large",
            Self::Signature { reason, .. } => reason.code(),
            Self::Storage(_) => "storage_unavailable",
        }
    }

    pub fn delivery_id(&self) -> Option<DeliveryId> {
        match self {
            Self::TooLarge { delivery_id, .. } | Self::Signature { delivery_id, .. } => {
                Some(*delivery_id)
            }
            Self::Storage(_) => None,
        }
    }
}

/// One HTTP request as it reached the endpoint.
pub struct Arrival<'a> {
    pub delivery_id: DeliveryId,
    pub received_at: DateTime<Utc>,
    /// Lower-case names, values as received.
    pub headers: &'a Headers,
}

/// Verifies the signature on the raw bytes, then journals the delivery and its
/// body in one transaction.
pub async fn receive(
    db: &DatabaseConnection,
    source: &Source,
    arrival: Arrival<'_>,
    raw: &[u8],
) -> Result<Accepted, Refusal> {
    let body = bodies::body_ref(raw);
    let verified = match signature::verify(
        &source.scheme,
        &source.secrets,
        arrival.headers,
        raw,
        arrival.received_at.timestamp(),
        source.tolerance_secs,
    ) {
        Ok(verified) => verified,
        Err(reason) => {
            let refusal = Refusal::Signature {
                delivery_id: arrival.delivery_id,
                reason,
            };
            record_rejection(db, source, &arrival, &refusal, Some(body), None).await;
            return Err(refusal);
        }
    };

    let (parse, _document) = BodyParse::classify(raw);
    let event = JournalEvent::DeliveryReceived(DeliveryReceived {
        origin: source.origin.clone(),
        received_at: arrival.received_at,
        headers: masked(source, arrival.headers),
        body: body.clone(),
        parse,
        signature_scheme: scheme_name(source),
        secret_index: verified.secret_index,
    });
    let txn = db.begin().await.map_err(Refusal::Storage)?;
    bodies::put(&txn, &body, raw, arrival.received_at)
        .await
        .map_err(Refusal::Storage)?;
    journal::append(&txn, Some(arrival.delivery_id), &event, arrival.received_at)
        .await
        .map_err(Refusal::Storage)?;
    txn.commit().await.map_err(Refusal::Storage)?;

    Ok(Accepted {
        delivery_id: arrival.delivery_id,
        received_at: arrival.received_at,
        parse,
    })
}

/// Refuses a body over the source's limit. `seen` is the size announced by
/// Content-Length or read before giving up; the body itself is never stored.
pub async fn refuse_too_large(
    db: &DatabaseConnection,
    source: &Source,
    arrival: Arrival<'_>,
    seen: u64,
) -> Refusal {
    let refusal = Refusal::TooLarge {
        delivery_id: arrival.delivery_id,
        limit: source.max_body_bytes,
    };
    record_rejection(db, source, &arrival, &refusal, None, Some(seen)).await;
    refusal
}

/// Journals a rejection. The provider gets its 4xx whether or not this
/// succeeds (it will retry either way), so a storage failure is only logged.
async fn record_rejection(
    db: &DatabaseConnection,
    source: &Source,
    arrival: &Arrival<'_>,
    refusal: &Refusal,
    body: Option<BodyRef>,
    declared_size: Option<u64>,
) {
    let event = JournalEvent::DeliveryRejected(DeliveryRejected {
        origin: source.origin.clone(),
        received_at: arrival.received_at,
        headers: masked(source, arrival.headers),
        reason: refusal.code().to_owned(),
        status: match refusal {
            Refusal::TooLarge { .. } => 413,
            _ => 401,
        },
        body,
        declared_size,
    });
    if let Err(error) =
        journal::append(db, Some(arrival.delivery_id), &event, arrival.received_at).await
    {
        tracing::error!(delivery.id = %arrival.delivery_id, source = source.slug(), %error, "could not journal a rejection");
    }
}

fn masked(source: &Source, headers: &Headers) -> Headers {
    mask_headers(headers, &signature::sensitive_headers(&source.scheme))
}

fn scheme_name(source: &Source) -> String {
    serde_json::to_value(&source.scheme)
        .ok()
        .and_then(|v| v.get("scheme").and_then(|s| s.as_str()).map(str::to_owned))
        .unwrap_or_default()
}
