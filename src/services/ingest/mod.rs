//! Receiving one delivery: verify, journal, answer.
//!
//! Invariant: a delivery is committed to the journal (with its raw body) before
//! the provider gets any 2xx. If the database fails, the transaction rolls back
//! and the provider gets a 503 so it retries: never a half-written delivery.
//!
//! `refusal.rs` names why a delivery is refused and what arrived; `refuse.rs`
//! refuses, journaling each refusal on its own while its source's quota
//! allows, counting it otherwise.

mod reception;
mod refusal;
mod refuse;

use reception::{Received, Reception};
pub use refusal::{Arrival, Refusal};
pub use refuse::{admit, refuse_headers, refuse_too_large};
use refuse::{masked, reject};

use chrono::{DateTime, Utc};

use super::derived::{identity_of, key_derived};
use super::engine::{Engine, SharedEngine};
use super::{effects, items, lookups};
use crate::config::Source;
use crate::domain::decision::Action;
use crate::domain::delivery::{BodyParse, DeliveryId};
use crate::domain::journal::{DecisionMade, DeliveryReceived, KeyDerived, KeySummary};
use crate::metrics::DecisionLabels;
use crate::providers::signature;
use crate::store::key_index::IndexKeys;
use crate::store::projections::deliveries;
use crate::store::{bodies, journal};

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
    /// From arrival to durable decision.
    pub latency_ms: u64,
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
    let row = deliveries::received_row(&id.to_string(), &received, &derived);
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
            .flat_map(KeySummary::in_force)
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
        row,
        items: prepared,
        keys,
    };
    let Received {
        made: decision,
        job,
        derived,
        decided,
        item_jobs,
        items: prepared,
    } = engine
        .writer
        .submit(reception)
        .await
        .map_err(Refusal::Storage)?;

    let latency = (Utc::now() - at).to_std().unwrap_or_default();
    engine.metrics.decision_latency(latency.as_secs_f64());
    // A batch's own decision only sums up its items': each item counts.
    if decided.is_empty() {
        count(engine, source, &derived, &decision, job.is_some());
    }
    for (item, job) in decided.iter().zip(&item_jobs) {
        count(engine, source, &item.derived, &item.decision, job.is_some());
    }
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
        latency_ms: u64::try_from(latency.as_millis()).unwrap_or(u64::MAX),
    })
}

/// Counts a durable decision (`metrics::DECISIONS`), and the effect applied
/// with it when its sink is the ledger itself (`started`: an effect runs
/// after the commit instead, counted when it settles).
fn count(
    engine: &Engine,
    source: &Source,
    derived: &KeyDerived,
    made: &DecisionMade,
    started: bool,
) {
    let business = derived.business.as_ref();
    if let Some(key) = business
        && made.decision.action == Action::Process
        && !started
    {
        engine.metrics.effect_settled(&key.effect_type, "applied");
    }
    engine.metrics.decided(DecisionLabels {
        source: source.slug(),
        provider: &source.origin.provider,
        strategy: business.map_or("none", |b| b.strategy.as_str()),
        effect_type: business.map_or("none", |b| b.effect_type.as_str()),
        strength: business.map_or("none", |b| b.strength.as_str()),
        decision: made.decision.action.as_str(),
        reason: made.decision.reason.as_str(),
        retry: made.first_delivery_id.is_some(),
    });
}
