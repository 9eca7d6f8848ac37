//! Receiving one delivery: verify, journal, answer.
//!
//! `receive` verifies and derives outside the writer, in parallel across
//! requests; `Reception` is what the delivery writes below the signature
//! check, as one writer job: its body, its transport claim, its decision and
//! the key it takes, then its rows — read, plan, record, in that order, and
//! each item of a batch the same way, as if it had arrived alone.
//!
//! Invariant: a delivery is committed to the journal (with its raw body) before
//! the provider gets any 2xx. If the database fails, the transaction rolls back
//! and the provider gets a 503 so it retries: never a half-written delivery.
//!
//! `refusal.rs` names why a delivery is refused and what arrived; `refuse.rs`
//! refuses, journaling each refusal on its own while its source's quota
//! allows, counting it otherwise.

mod refusal;
mod refuse;

pub use refusal::{Arrival, Refusal};
pub use refuse::{admit, refuse_headers, refuse_too_large};
use refuse::{masked, reject};

use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;
use sea_orm::DbErr;

use super::derived::{identity_of, key_derived};
use super::engine::{Engine, SharedEngine};
use super::{effects, items, lookups};
use crate::config::Source;
use crate::domain::decision::{Action, Identity, TransportMatch};
use crate::domain::delivery::{BodyParse, BodyRef, DeliveryId};
use crate::domain::journal::{DecisionMade, DeliveryReceived, KeyDerived, KeySummary};
use crate::domain::plan::{self, EffectJob, Given, Plan, Route};
use crate::metrics::DecisionLabels;
use crate::providers::signature;
use crate::store::key_index::IndexKeys;
use crate::store::projections::deliveries;
use crate::store::writer::WriteJob;
use crate::store::{Decided, Tx, bodies, journal};

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
    // A batch of one is its event (`ProviderDef::batch_of_one`, which the
    // derivation read already): found by its resource, sent downstream.
    let document = match derivation.items.as_slice() {
        [one] if one.event.is_some() => one.event.clone(),
        _ => document,
    };
    derived.resource =
        source
            .resource
            .value(arrival.headers, document.as_ref(), &engine.key_secret);
    super::derived::note_lacking(&mut derived, &derivation.skipped, &engine.catalog);
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

    if let (Some(key), Some(event)) = (derived.business.as_mut(), document.as_ref()) {
        key.held_as = engine.held_as(key, event);
    }
    // Everything below the signature check commits together, or not at all.
    let route = derived
        .business
        .as_ref()
        .map(|key| engine.route(source.slug(), key));
    let identity = identity_of(derivation.unresolved.as_ref());
    // Serialised here, in parallel across requests, not in the writer that
    // every delivery waits on: the reception's journal rows and arrival.
    let arrival = deliveries::Arrival::new(&received, &derived);
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
        id,
        derived,
        by_provider_id,
        identity,
        route,
        body,
        raw,
        journaled,
        arrival,
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
        sent_again,
    } = engine
        .writer
        .submit(reception)
        .await
        .map_err(Refusal::Storage)?;

    let latency = (Utc::now() - at).to_std().unwrap_or_default();
    engine.metrics.decision_latency(latency.as_secs_f64());
    // A batch's own decision only sums up its items': each item counts.
    // A batch sent again is a provider's retry for each of its items.
    if decided.is_empty() {
        count(
            engine,
            source,
            (&derived, &decision),
            job.is_some(),
            sent_again,
        );
    }
    for (item, job) in decided.iter().zip(&item_jobs) {
        let made = (&item.derived, &item.decision);
        count(engine, source, made, job.is_some(), sent_again);
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
/// after the commit instead, counted when it settles). `sent_again`: the
/// delivery carrying it is a provider's retry of an earlier one.
fn count(
    engine: &Engine,
    source: &Source,
    (derived, made): (&KeyDerived, &DecisionMade),
    started: bool,
    sent_again: bool,
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
        retry: sent_again || made.first_delivery_id.is_some(),
    });
}

/// A delivery to decide, prepared outside the writer (`ingest::receive`).
struct Reception {
    pub id: DeliveryId,
    pub derived: KeyDerived,
    /// Its transport key is the provider's delivery id (else its raw body).
    pub by_provider_id: bool,
    pub identity: Identity,
    /// What its plan is told beside its evidence; `None`: it has no business key.
    pub route: Option<Route>,
    pub body: BodyRef,
    pub raw: Vec<u8>,
    pub journaled: journal::ReceptionText,
    pub arrival: deliveries::Arrival,
    /// A batch's items, each a delivery of its own.
    pub items: Vec<items::Prepared>,
    pub keys: IndexKeys,
}

impl Reception {
    /// Whether deciding it reads effects under keys it does not name.
    fn looks_beyond_its_keys(&self) -> bool {
        let lacks = |derived: &KeyDerived| {
            (derived.business.as_ref()).is_some_and(|key| key.lacking.is_some())
        };
        lacks(&self.derived) || self.items.iter().any(|item| lacks(&item.derived))
    }
}

/// What a reception came to, once committed.
struct Received {
    pub made: DecisionMade,
    /// The effect to run now that the decision is durable.
    pub job: Option<EffectJob>,
    pub derived: KeyDerived,
    /// Each item's decision, its effect, and the item itself.
    pub decided: Vec<items::Decided>,
    pub item_jobs: Vec<Option<EffectJob>>,
    pub items: Vec<items::Prepared>,
    /// The provider sent this very delivery before (its transport key was
    /// taken): a batch's items are each a retry too.
    pub sent_again: bool,
}

impl WriteJob for Reception {
    type Output = Received;

    /// A delivery (or item) lacking a field a strategy above its own
    /// requires reads effects under keys it does not name, by resource
    /// (`KeySummary::lacking`): keyless, it sees every row the batch wrote
    /// before it, and the batch owns every key.
    fn keys(&self) -> Option<IndexKeys> {
        (!self.looks_beyond_its_keys()).then(|| self.keys.clone())
    }

    fn owns_every_key(&self) -> bool {
        self.looks_beyond_its_keys()
    }

    fn run<'a>(self, tx: &'a mut Tx<'_>) -> BoxFuture<'a, Result<Received, DbErr>> {
        Box::pin(async move {
            let Self {
                id,
                derived,
                by_provider_id,
                identity,
                route,
                body,
                raw,
                journaled,
                arrival,
                mut items,
                keys: _,
            } = self;
            // Journal and lease times are write times; the reception keeps
            // its arrival time.
            let at = Utc::now();
            tx.body(&body, raw, at);
            let (transport, first) = tx.claim_transport(id, &derived, by_provider_id, at).await?;

            // Each item is decided as if it had arrived alone, under the
            // batch's delivery id: one that came back with another body is
            // not what its id claims, and no item of it is applied.
            let item_transport = match &transport {
                collision @ TransportMatch::DeliveryIdCollision { .. } => collision.clone(),
                _ => TransportMatch::FirstSeen,
            };
            let mut plans = Vec::with_capacity(items.len());
            for item in &mut items {
                tx.body(&item.body, std::mem::take(&mut item.bytes), at);
                let event = Event {
                    id: item.id,
                    derived: &item.derived,
                    identity: item.identity,
                    route: item.route.take(),
                };
                plans.push(event.plan(tx, item_transport.clone(), at).await?);
            }
            let decided: Vec<items::Decided> = items
                .iter()
                .zip(&plans)
                .map(|(item, plan)| items::Decided {
                    delivery_id: item.id,
                    derived: item.derived.clone(),
                    decision: plan.made.clone(),
                })
                .collect();
            // A batch's own decision sums up its items'.
            let plan = match items::summed_up(&decided) {
                Some(made) => Plan { made, take: None },
                None => {
                    let event = Event {
                        id,
                        derived: &derived,
                        identity,
                        route,
                    };
                    let mut plan = event.plan(tx, transport, at).await?;
                    plan.made.first_delivery_id = first;
                    plan
                }
            };

            let made = plan.made.clone();
            let job = plan.job();
            let item_jobs = plans.iter().map(Plan::job).collect();
            // The reception's rows, then its items': the batch's own journal
            // row comes first.
            tx.decided(
                Decided {
                    id,
                    arrival: &arrival,
                    reception: journaled,
                    derived: &derived,
                    plan,
                },
                at,
            );
            for (item, plan) in items.iter_mut().zip(plans) {
                tx.decided(
                    Decided {
                        id: item.id,
                        arrival: &item.arrival,
                        reception: std::mem::take(&mut item.journaled),
                        derived: &item.derived,
                        plan,
                    },
                    at,
                );
            }
            Ok(Received {
                made,
                job,
                derived,
                decided,
                item_jobs,
                items,
                sent_again: first.is_some(),
            })
        })
    }
}

/// One event to decide: a whole delivery, or one item of a batch.
struct Event<'a> {
    id: DeliveryId,
    derived: &'a KeyDerived,
    identity: Identity,
    /// What its plan is told beside its evidence; `None`: it has no business key.
    route: Option<Route>,
}

impl Event<'_> {
    /// Plans the event's decision: against its business key, taking the key
    /// on `process` (`Tx::decide_key`), or, when it has none, on its
    /// transport identity alone.
    async fn plan(
        &self,
        tx: &mut Tx<'_>,
        transport: TransportMatch,
        at: DateTime<Utc>,
    ) -> Result<Plan, DbErr> {
        let business = self.derived.business.as_ref();
        match (business, self.route.clone()) {
            (Some(key), Some(route)) => {
                let given = Given {
                    key,
                    transport,
                    route,
                    delivery_id: self.id,
                    at,
                    new_effect: uuid::Uuid::now_v7(),
                };
                tx.decide_key(&given).await
            }
            _ => Ok(plan::unkeyed(
                self.identity,
                transport,
                business.map(|key| key.key.clone()),
            )),
        }
    }
}
