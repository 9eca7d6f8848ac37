//! Receiving one delivery: verify, journal, answer.
//!
//! Invariant: a delivery is committed to the journal (with its raw body) before
//! the provider gets any 2xx. If the database fails, the transaction rolls back
//! and the provider gets a 503 so it retries: never a half-written delivery.

use chrono::{DateTime, Utc};
use sea_orm::DbErr;
use uuid::Uuid;

use super::decide::{self, Verdict};
use super::effects;
use super::engine::{Appends, SharedEngine, record};
use crate::config::Source;
use crate::domain::decision::{Action, Identity};
use crate::domain::delivery::{BodyParse, BodyRef, DeliveryId, Headers, mask_headers};
use crate::domain::identity::{Derivation, Unresolved};
use crate::domain::journal::{
    DecisionMade, DeliveryReceived, DeliveryRejected, JournalEvent, KeyDerived, KeySummary, Layer,
    OlderKey,
};
use crate::providers::signature::{self, SignatureError};
use crate::store::key_index::IndexKeys;
use crate::store::projections::deliveries;
use crate::store::writer::Writer;
use crate::store::{bodies, journal};

/// A delivery that is safely journaled, with its decision.
#[derive(Debug, Clone)]
pub struct Accepted {
    pub delivery_id: DeliveryId,
    pub received_at: DateTime<Utc>,
    pub parse: BodyParse,
    pub derived: KeyDerived,
    pub decision: DecisionMade,
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

/// Verifies the signature on the raw bytes, derives the delivery's identity,
/// then journals the delivery, its body and its decision in one transaction.
/// An effect to apply starts only after that transaction committed.
pub async fn receive(
    engine: &SharedEngine,
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
            record_rejection(&engine.writer, source, &arrival, &refusal, Some(body), None).await;
            return Err(refusal);
        }
    };

    let (parse, document) = BodyParse::classify(raw);
    let facts = source.facts(arrival.headers, parse, document.as_ref(), raw);
    let derivation = engine.catalog.derive(&facts, &engine.key_secret);
    let derived = key_derived(&derivation);
    let by_provider_id = derivation.transport.is_provider_id();
    let id = arrival.delivery_id;
    let at = arrival.received_at;
    let received = DeliveryReceived {
        origin: source.origin.clone(),
        received_at: at,
        headers: masked(source, arrival.headers),
        body: body.clone(),
        parse,
        signature_scheme: source.scheme.name().to_owned(),
        secret_index: verified.secret_index,
    };

    // Everything below the signature check commits together, or not at all.
    let sink = derived
        .business
        .as_ref()
        .map(|key| engine.sink_name(source, &key.effect_type));
    let identity = identity_of(derivation.unresolved.as_ref());
    let shared = engine.clone();
    // Serialised here, in parallel across requests, not in the writer that
    // every delivery waits on: the reception's journal rows and row columns.
    let mut delivery_row = deliveries::received_row(&id.to_string(), &received, &derived);
    let journaled = [
        JournalEvent::DeliveryReceived(received),
        JournalEvent::KeyDerived(derived.clone()),
    ]
    .map(|event| journal::row(Some(id), &event, at));
    let raw = raw.to_vec();
    let keys = IndexKeys {
        transport: Some(derived.transport_key.clone()),
        business: derived
            .business
            .as_ref()
            .map(decide::business_keys)
            .unwrap_or_default(),
    };
    let (decision, job, derived) = engine
        .writer
        .run_indexed(keys, move |txn, rows| {
            Box::pin(async move {
                // Journal and lease times are write times; the reception keeps its arrival time.
                let at = Utc::now();
                let mut appends = Appends::default();
                rows.body(&body, raw, at);
                let (transport, first) =
                    decide::claim_transport(txn, rows, id, &derived, by_provider_id, at).await?;
                for row in journaled {
                    rows.journal_row(row, at);
                }
                let verdict = match (&derived.business, sink) {
                    (Some(key), Some(sink)) => {
                        decide::decide_keyed(
                            txn,
                            &shared,
                            sink,
                            id,
                            key,
                            transport,
                            at,
                            &mut appends,
                            rows,
                        )
                        .await?
                    }
                    _ => Verdict {
                        decision: decide::decide_unkeyed(identity, transport),
                        layer: Layer::Transport,
                        matched_key: None,
                        job: None,
                    },
                };
                let made = decision_made(
                    verdict.decision,
                    verdict.layer,
                    derived.business.as_ref(),
                    verdict.matched_key,
                    first,
                );
                // One row for the reception, its key and its decision.
                deliveries::decide_row(rows, &mut delivery_row, &id.to_string(), &made, at);
                rows.delivery(delivery_row);
                appends.push(Some(id), JournalEvent::DecisionMade(made.clone()));
                appends.defer(rows, at);
                Ok((made, verdict.job, derived))
            })
        })
        .await
        .map_err(Refusal::Storage)?;

    if let Some(job) = job {
        effects::spawn(engine.clone(), job, source.slug().to_owned(), document);
    }
    Ok(Accepted {
        delivery_id: id,
        received_at: at,
        parse,
        derived,
        decision,
    })
}

fn decision_made(
    decision: crate::domain::decision::Decision,
    layer: Layer,
    business: Option<&KeySummary>,
    matched_key: Option<String>,
    first: Option<DeliveryId>,
) -> DecisionMade {
    let case = matches!(decision.action, Action::Quarantine | Action::Reconcile);
    let mut made = DecisionMade::new(
        decision,
        layer,
        business.map(|b| b.key.clone()),
        matched_key,
    );
    made.case_id = case.then(Uuid::now_v7);
    made.first_delivery_id = first;
    made
}

fn identity_of(unresolved: Option<&Unresolved>) -> Identity {
    match unresolved {
        Some(Unresolved::Unparseable) | None => Identity::UnparseableBody,
        Some(Unresolved::BodyTooDeep { .. }) => Identity::BodyTooDeep,
        Some(Unresolved::DuplicateMemberNames) => Identity::DuplicateMemberNames,
        Some(Unresolved::UnknownProvider { .. } | Unresolved::UnknownEventType { .. }) => {
            Identity::UnknownEventType
        }
        Some(Unresolved::NoStrategyApplies { .. }) => Identity::NoStrategy,
    }
}

/// What the journal keeps of a derivation.
pub fn key_derived(d: &Derivation) -> KeyDerived {
    let transport = &d.transport;
    KeyDerived {
        event_type: d.event_type.clone(),
        transport_key: transport.key.clone(),
        provider_event_id: transport.is_provider_id().then(|| transport.id.clone()),
        body_fingerprint: Some(
            transport
                .body_fingerprint
                .clone()
                .unwrap_or_else(|| transport.raw_body_sha256.clone()),
        ),
        business: d.business.as_ref().map(|b| KeySummary {
            key: b.key.full(),
            strategy: b.strategy.to_string(),
            strength: b.strength,
            effect_type: b.effect_type.clone(),
            criticality: b.criticality,
            horizon_secs: b.horizon_secs,
            discriminants: b.discriminants.clone(),
            missing_discriminants: b.missing_discriminants.clone(),
            older_keys: d
                .older_versions
                .iter()
                .chain(&d.also_keyed)
                .map(|o| o.key.full())
                .collect(),
            older: d
                .older_versions
                .iter()
                .chain(&d.also_keyed)
                .map(|o| {
                    let seen = OlderKey {
                        discriminants: o.discriminants.clone(),
                        missing_discriminants: o.missing_discriminants.clone(),
                    };
                    (o.key.full(), seen)
                })
                .collect(),
            retired_keys: d.retired_versions.iter().map(|o| o.key.full()).collect(),
        }),
        unresolved: d.unresolved.as_ref().map(|u| u.code().to_owned()),
        derivation: serde_json::to_value(d).unwrap_or_default(),
    }
}

/// Refuses a body over the source's limit. `seen` is the size announced by
/// Content-Length or read before giving up; the body itself is never stored.
pub async fn refuse_too_large(
    writer: &Writer,
    source: &Source,
    arrival: Arrival<'_>,
    seen: u64,
) -> Refusal {
    let refusal = Refusal::TooLarge {
        delivery_id: arrival.delivery_id,
        limit: source.max_body_bytes,
    };
    record_rejection(writer, source, &arrival, &refusal, None, Some(seen)).await;
    refusal
}

/// Journals a rejection. The provider gets its 4xx whether or not this
/// succeeds (it will retry either way), so a storage failure is only logged.
async fn record_rejection(
    writer: &Writer,
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
    let (id, at) = (arrival.delivery_id, arrival.received_at);
    let recorded = writer
        .run(move |txn| Box::pin(async move { record(txn, Some(id), event, at).await.map(|_| ()) }))
        .await;
    if let Err(error) = recorded {
        tracing::error!(delivery.id = %arrival.delivery_id, source = source.slug(), %error, "could not journal a rejection");
    }
}

fn masked(source: &Source, headers: &Headers) -> Headers {
    mask_headers(headers, &signature::sensitive_headers(&source.scheme))
}
