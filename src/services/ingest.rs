//! Receiving one delivery: verify, journal, answer.
//!
//! Invariant: a delivery is committed to the journal (with its raw body) before
//! the provider gets any 2xx. If the database fails, the transaction rolls back
//! and the provider gets a 503 so it retries: never a half-written delivery.

use std::net::IpAddr;

use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;
use sea_orm::DbErr;
use uuid::Uuid;

use super::decide::{self, Verdict};
use super::derived::{identity_of, key_derived};
use super::engine::{Engine, SharedEngine, WriteEvent};
use super::rate_limits::RetryAfter;
use super::rejections::{Counted, Note};
use super::reserve::EffectJob;
use super::{effects, items, lookups};
use crate::config::Source;
use crate::domain::decision::{Action, Identity, TransportMatch};
use crate::domain::delivery::{BodyParse, BodyRef, DeliveryId, Headers};
use crate::domain::journal::{
    DecisionMade, DeliveryReceived, DeliveryRejected, JournalEvent, KeyDerived, KeySummary, Layer,
    Reserved,
};
use crate::domain::rejection::{HeaderExcess, header_bytes, summarize};
use crate::providers::signature::{self, SignatureError};
use crate::store::entities::delivery;
use crate::store::key_index::IndexKeys;
use crate::store::projections::deliveries;
use crate::store::writer::WriteJob;
use crate::store::{Mark, Tx, bodies, journal};

/// A delivery that is safely journaled, with its decision.
#[derive(Debug, Clone)]
pub struct Accepted {
    pub delivery_id: DeliveryId,
    pub received_at: DateTime<Utc>,
    pub parse: BodyParse,
    pub derived: KeyDerived,
    pub decision: DecisionMade,
    /// A batch of several events: what each became, in order.
    pub items: Vec<items::Decided>,
}

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
    fn counted_only(mut self) -> Self {
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
                delivery_id: Some(arrival.delivery_id),
                reason,
            };
            return Err(reject(engine, source, &arrival, refusal, Some(body), None).await);
        }
    };

    let (parse, document) = BodyParse::classify(raw);
    let facts = source.facts(arrival.headers, parse, document.as_ref(), raw);
    let derivation = engine.catalog.derive(&facts, &engine.key_secret);
    let mut derived = key_derived(&derivation);
    derived.resource =
        source
            .resource
            .value(arrival.headers, document.as_ref(), &engine.key_secret);
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
        item_of: None,
    };
    // A batch of several events: each becomes a delivery of its own.
    let prepared = items::prepare(
        engine,
        source,
        &derivation,
        &received,
        id,
        &derived.transport_key,
    );
    if !prepared.is_empty() {
        derived.items = prepared.iter().map(|item| item.id).collect();
    }

    // Everything below the signature check commits together, or not at all.
    let sink = derived
        .business
        .as_ref()
        .map(|key| engine.sink_name(source, &key.effect_type));
    let identity = identity_of(derivation.unresolved.as_ref());
    // Serialised here, in parallel across requests, not in the writer that
    // every delivery waits on: the reception's journal rows and row columns.
    let delivery_row = deliveries::received_row(&id.to_string(), &received, &derived);
    let journaled = journal::ReceptionText::new(&received, &derived);
    let raw = raw.to_vec();
    let keys = IndexKeys {
        transport: Some(derived.transport_key.clone()),
        business: derived
            .business
            .iter()
            .chain(
                prepared
                    .iter()
                    .filter_map(|item| item.derived.business.as_ref()),
            )
            .flat_map(super::reserve::business_keys)
            .collect(),
    };
    let reception = Reception {
        engine: engine.clone(),
        id,
        derived,
        by_provider_id,
        identity,
        sink,
        body,
        raw,
        journaled,
        delivery_row,
        prepared,
        keys,
    };
    let (decision, job, derived, decided, item_jobs, prepared) = engine
        .writer
        .submit(reception)
        .await
        .map_err(Refusal::Storage)?;

    if let Some(job) = job {
        effects::spawn(engine.clone(), job, source.slug().to_owned(), document);
    }
    for (job, event) in items::effects(&prepared, item_jobs) {
        effects::spawn(engine.clone(), job, source.slug().to_owned(), Some(event));
    }
    // Cases the provider's API may settle are asked about at once.
    let cases = std::iter::once(&decision)
        .chain(decided.iter().map(|item| &item.decision))
        .filter(|made| made.decision.action == Action::Reconcile)
        .filter_map(|made| made.case_id);
    lookups::spawn(engine, cases);
    Ok(Accepted {
        delivery_id: id,
        received_at: at,
        parse,
        derived,
        decision,
        items: decided,
    })
}

/// Everything a delivery writes below the signature check, as one writer
/// job: its body and journal rows, each item's, and their decisions.
struct Reception {
    engine: SharedEngine,
    id: DeliveryId,
    derived: KeyDerived,
    by_provider_id: bool,
    identity: Identity,
    sink: Option<&'static str>,
    body: BodyRef,
    raw: Vec<u8>,
    journaled: journal::ReceptionText,
    delivery_row: delivery::ActiveModel,
    prepared: Vec<items::Prepared>,
    keys: IndexKeys,
}

/// A reception's decision and effect, its key, then each item's.
type Received = (
    DecisionMade,
    Option<EffectJob>,
    KeyDerived,
    Vec<items::Decided>,
    Vec<Option<EffectJob>>,
    Vec<items::Prepared>,
);

impl WriteJob for Reception {
    type Output = Received;

    fn keys(&self) -> Option<IndexKeys> {
        Some(self.keys.clone())
    }

    fn run<'a>(self, tx: &'a mut Tx<'_>) -> BoxFuture<'a, Result<Received, DbErr>> {
        let Self {
            engine: shared,
            id,
            derived,
            by_provider_id,
            identity,
            sink,
            body,
            raw,
            journaled,
            delivery_row,
            prepared,
            keys: _,
        } = self;
        Box::pin(async move {
            // Journal and lease times are write times; the reception keeps its arrival time.
            let at = Utc::now();
            tx.body(&body, raw, at);
            let (transport, first) =
                decide::claim_transport(tx, id, &derived, by_provider_id, at).await?;
            // The batch's own row goes here, before its items', once its
            // decision (which sums theirs up) is known.
            let start = tx.mark();
            let mut decided = Vec::with_capacity(prepared.len());
            let mut item_jobs = Vec::with_capacity(prepared.len());
            let mut prepared = prepared;
            for item in &mut prepared {
                tx.body(&item.body, std::mem::take(&mut item.bytes), at);
                let mark = tx.mark();
                let one = Event {
                    id: item.id,
                    derived: &item.derived,
                    identity: item.identity,
                    sink: item.sink,
                    first: None,
                };
                let (made, job) = one
                    .decide(tx, &shared, TransportMatch::FirstSeen, at)
                    .await?;
                tx.decided_delivery(item.row.clone(), &item.id.to_string(), &made, at);
                let rows = journal_decided(
                    tx,
                    mark,
                    item.id,
                    std::mem::take(&mut item.journaled),
                    &item.derived,
                    &made,
                    at,
                );
                tx.append_rows_at(mark, rows);
                decided.push(items::Decided {
                    delivery_id: item.id,
                    derived: item.derived.clone(),
                    decision: made,
                });
                item_jobs.push(job);
            }
            let (made, job) = match items::summed_up(&decided) {
                Some(made) => (made, None),
                None => {
                    let one = Event {
                        id,
                        derived: &derived,
                        identity,
                        sink,
                        first,
                    };
                    one.decide(tx, &shared, transport, at).await?
                }
            };
            // One row for the reception, its key and its decision.
            tx.decided_delivery(delivery_row, &id.to_string(), &made, at);
            let rows = journal_decided(tx, start, id, journaled, &derived, &made, at);
            tx.append_rows_at(start, rows);
            Ok((made, job, derived, decided, item_jobs, prepared))
        })
    }
}

/// A reception's journal rows: one `DeliveryDecided` folding its reception,
/// key, decision and what that decision appended since `mark` (taken back
/// from `tx`), or, when those do not fold, each event in a row of its own.
fn journal_decided(
    tx: &mut Tx<'_>,
    mark: Mark,
    id: DeliveryId,
    reception: journal::ReceptionText,
    derived: &KeyDerived,
    made: &DecisionMade,
    at: DateTime<Utc>,
) -> Vec<journal::Row> {
    let appended = tx.take_since(mark);
    let ours = appended.iter().all(|(of, _)| *of == Some(id));
    let events: Vec<JournalEvent> = appended.iter().map(|(_, e)| e.clone()).collect();
    if ours && let Ok(reserved) = Reserved::fold(&events, derived, id) {
        return vec![journal::decided_row(
            id,
            reception,
            reserved.as_ref(),
            made,
            at,
        )];
    }
    let mut rows: Vec<journal::Row> = reception.rows(id, at).into();
    rows.extend(
        appended
            .iter()
            .map(|(of, event)| journal::row(*of, event, at)),
    );
    rows.push(journal::row(
        Some(id),
        &JournalEvent::DecisionMade(made.clone()),
        at,
    ));
    rows
}

/// One event to decide: a whole delivery, or one item of a batch.
struct Event<'a> {
    id: DeliveryId,
    derived: &'a KeyDerived,
    identity: Identity,
    sink: Option<&'static str>,
    first: Option<DeliveryId>,
}

impl Event<'_> {
    /// Decides the event against its key (reserving it on `process`), or
    /// quarantines it when it has none; returns its journaled decision and
    /// the effect to run after commit.
    async fn decide(
        &self,
        tx: &mut Tx<'_>,
        engine: &SharedEngine,
        transport: TransportMatch,
        at: DateTime<Utc>,
    ) -> Result<(DecisionMade, Option<EffectJob>), DbErr> {
        let verdict = match (&self.derived.business, self.sink) {
            (Some(key), Some(sink)) => {
                decide::decide_keyed(tx, engine, sink, self.id, key, transport, at).await?
            }
            _ => Verdict {
                decision: decide::decide_unkeyed(self.identity, transport),
                layer: Layer::Transport,
                matched_key: None,
                job: None,
            },
        };
        let made = decision_made(
            verdict.decision,
            verdict.layer,
            self.derived.business.as_ref(),
            verdict.matched_key,
            self.first,
        );
        Ok((made, verdict.job))
    }
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
async fn reject(
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
fn masked(source: &Source, headers: &Headers) -> Headers {
    source.mask_headers(headers)
}
