//! The events of a batch delivery (GoCardless `events[]`, Adyen
//! `notificationItems[]`), each decided as if it had arrived alone: its own
//! delivery id (linked to the batch), stored body, key, reservation, effect
//! and case. The batch itself is journaled whole and answered with every
//! item's decision; its own decision only sums them up.

use serde_json::Value;

use super::engine::Engine;
use crate::config::Source;
use crate::domain::decision::{Action, Identity};
use crate::domain::delivery::{BodyParse, BodyRef, DeliveryId};
use crate::domain::identity::{Derivation, ItemDerivation};
use crate::domain::journal::{DecisionMade, DeliveryReceived, ItemOf, KeyDerived};
use crate::domain::plan::{EffectJob, Route};
use crate::store::projections::deliveries;
use crate::store::{bodies, journal};

/// One item, prepared outside the writer: its rows serialised, its key known.
pub struct Prepared {
    pub id: DeliveryId,
    pub body: BodyRef,
    pub bytes: Vec<u8>,
    /// The item itself, sent downstream with its effect.
    pub event: Value,
    pub derived: KeyDerived,
    pub identity: Identity,
    /// What its plan is told beside its evidence; `None`: it has no business key.
    pub route: Option<Route>,
    pub arrival: deliveries::Arrival,
    pub journaled: journal::ReceptionText,
}

/// What one item became.
#[derive(Debug, Clone)]
pub struct Decided {
    pub delivery_id: DeliveryId,
    pub derived: KeyDerived,
    pub decision: DecisionMade,
}

/// The items of `derivation` when it is a batch of several events (a batch of
/// one is that event), each with a fresh delivery id, journaled as received
/// with the batch (`parent`) at `at`.
pub fn prepare(
    engine: &Engine,
    source: &Source,
    derivation: &Derivation,
    parent: &DeliveryReceived,
    parent_id: DeliveryId,
    transport_key: &str,
) -> Vec<Prepared> {
    if derivation.items.len() < 2 {
        return Vec::new();
    }
    derivation
        .items
        .iter()
        .map(|item| prepare_one(engine, source, item, parent, parent_id, transport_key))
        .collect()
}

fn prepare_one(
    engine: &Engine,
    source: &Source,
    item: &ItemDerivation,
    parent: &DeliveryReceived,
    parent_id: DeliveryId,
    transport_key: &str,
) -> Prepared {
    // Of the parent's reception time, as the parent's own id is: windows of
    // reception times are ranges of ids (`store::id_range`).
    let id = DeliveryId::from_uuid(crate::store::id_range::v7_at(parent.received_at));
    let event = item.event.clone().unwrap_or(Value::Null);
    let bytes = serde_json::to_vec(&event).unwrap_or_default();
    let body = bodies::body_ref(&bytes);
    let received = DeliveryReceived {
        origin: parent.origin.clone(),
        received_at: parent.received_at,
        headers: Vec::new(),
        body: body.clone(),
        parse: BodyParse::Json,
        signature_scheme: parent.signature_scheme.clone(),
        secret_index: parent.secret_index,
        item_of: Some(ItemOf {
            parent: parent_id,
            index: item.index,
        }),
    };
    let mut derived = super::derived::item_key_derived(item, transport_key);
    derived.resource = source.resource.value(&[], Some(&event), &engine.key_secret);
    super::derived::note_lacking(&mut derived, &item.skipped, &engine.catalog);
    if let Some(key) = derived.business.as_mut() {
        key.held_as = engine.held_as(key, &event);
    }
    let route = derived
        .business
        .as_ref()
        .map(|key| engine.route(source.slug(), key));
    let identity = super::derived::identity_of(item.unresolved.as_ref());
    let arrival = deliveries::Arrival::new(&received, &derived);
    let journaled = journal::ReceptionText::new(&received, &derived);
    Prepared {
        id,
        body,
        bytes,
        event,
        derived,
        identity,
        route,
        arrival,
        journaled,
    }
}

/// How much an action says about a batch: the batch is answered with the
/// most telling of its items' (anything held beats anything applied, which
/// beats a duplicate). All duplicates: the batch is a duplicate.
fn weight(action: Action) -> u8 {
    match action {
        Action::Quarantine => 4,
        Action::Reconcile => 3,
        Action::Defer => 2,
        Action::Process => 1,
        Action::Ignore => 0,
    }
}

/// The batch's own decision: its most telling item's, with a summary that
/// counts each action. It opens no case and names no key: those are the items'.
pub fn summed_up(items: &[Decided]) -> Option<DecisionMade> {
    let telling = items
        .iter()
        .max_by_key(|item| weight(item.decision.decision.action))?;
    let mut made = telling.decision.clone();
    made.case_id = None;
    made.business_key = None;
    made.matched_key = None;
    made.first_delivery_id = None;
    let mut counts: Vec<(Action, usize)> = Vec::new();
    for item in items {
        let action = item.decision.decision.action;
        match counts.iter_mut().find(|(a, _)| *a == action) {
            Some((_, n)) => *n += 1,
            None => counts.push((action, 1)),
        }
    }
    counts.sort_by_key(|(action, _)| std::cmp::Reverse(weight(*action)));
    let parts: Vec<String> = counts
        .iter()
        .map(|(action, n)| format!("{n} {}", action.as_str()))
        .collect();
    made.summary = format!(
        "A batch of {} events, each decided on its own: {}.",
        items.len(),
        parts.join(", ")
    );
    Some(made)
}

/// The effects to start once the batch committed, each with its own item.
pub fn effects(prepared: &[Prepared], jobs: Vec<Option<EffectJob>>) -> Vec<(EffectJob, Value)> {
    prepared
        .iter()
        .zip(jobs)
        .filter_map(|(item, job)| job.map(|job| (job, item.event.clone())))
        .collect()
}
