//! What a delivery is linked to, for its support page: every delivery that
//! shares its provider id (first reception, retries, collisions), its
//! business key or its effect, or that its decisions name; the effects it
//! asked for and their state; the cases it opened.

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DbErr};
use serde::Serialize;
use uuid::Uuid;

use crate::domain::journal::{JournalEvent, Origin};
use crate::domain::search::searchable_id;
use crate::store::entities::{delivery, effect};
use crate::store::journal::StoredEvent;
use crate::store::search::{self, Links};

/// Linked deliveries shown at most (oldest first).
const MAX_LINKED: u64 = 200;

/// One delivery of the timeline.
#[derive(Debug, Clone, Serialize)]
pub struct Linked {
    pub delivery_id: String,
    pub received_at: DateTime<Utc>,
    pub source: String,
    pub event_type: Option<String>,
    pub decision: Option<String>,
    pub reason: Option<String>,
    /// Why it is on the timeline: `this delivery`, `first reception`,
    /// `same delivery id`, `same business key`, `same effect`, `named by a decision`.
    pub relations: Vec<&'static str>,
}

/// An effect the delivery asked for, as the ledger holds it.
#[derive(Debug, Clone, Serialize)]
pub struct EffectView {
    pub effect_id: String,
    pub key: String,
    pub effect_type: String,
    pub criticality: String,
    /// `pending`, `applied`, `failed`, `unknown`.
    pub status: String,
    pub sink: String,
    pub first_delivery_id: String,
    /// The downstream's id of the applied effect.
    pub downstream_ref: Option<String>,
    /// The provider's operation the effect was applied for.
    pub provider_ref: Option<String>,
    pub created_at: DateTime<Utc>,
    pub settled_at: Option<DateTime<Utc>>,
}

/// What the delivery's journal links it to.
#[derive(Debug, Default)]
pub struct Ties {
    pub business_key: Option<String>,
    pub provider_event_id: Option<String>,
    pub effects: Vec<String>,
    pub deliveries: Vec<String>,
    pub cases: Vec<Uuid>,
}

impl Ties {
    /// Read from the delivery's own journal events.
    pub fn of(stored: &[StoredEvent]) -> Self {
        let mut ties = Ties::default();
        let effect = |id: Option<Uuid>, ties: &mut Ties| {
            if let Some(id) = id.map(|id| id.to_string())
                && !ties.effects.contains(&id)
            {
                ties.effects.push(id);
            }
        };
        for s in stored {
            match &s.event {
                JournalEvent::DeliveryReceived(e) => {
                    ties.deliveries
                        .extend(e.item_of.map(|i| i.parent.to_string()));
                }
                JournalEvent::KeyDerived(e) => {
                    ties.business_key = e.business.as_ref().map(|b| b.key.clone());
                    // As the read model holds it, to find the rows that share it.
                    ties.provider_event_id = searchable_id(e.provider_event_id.as_deref());
                    ties.deliveries
                        .extend(e.items.iter().map(|i| i.to_string()));
                }
                JournalEvent::KeyReserved(e) => effect(Some(e.effect_id), &mut ties),
                JournalEvent::DecisionMade(e) => {
                    effect(e.decision.effect_id, &mut ties);
                    let named = [
                        e.decision.reference_delivery,
                        e.first_delivery_id.map(|d| d.as_uuid()),
                    ];
                    ties.deliveries
                        .extend(named.into_iter().flatten().map(|d| d.to_string()));
                    ties.cases.extend(e.case_id);
                }
                JournalEvent::CaseResolved(e) => effect(e.effect_id, &mut ties),
                JournalEvent::CohortFlagged(e) => ties.cases.push(e.case_id),
                _ => {}
            }
        }
        ties.deliveries.sort();
        ties.deliveries.dedup();
        ties.cases.dedup();
        ties
    }
}

/// The deliveries linked to `this` (itself included), oldest first.
pub async fn linked<C: ConnectionTrait>(
    conn: &C,
    this: &str,
    origin: &Origin,
    ties: &Ties,
) -> Result<Vec<Linked>, DbErr> {
    let asked = search::asked_for(conn, &ties.effects, MAX_LINKED).await?;
    let mut named = ties.deliveries.clone();
    named.extend(asked.iter().cloned());
    named.push(this.to_owned());
    let links = Links {
        business_key: ties.business_key.as_deref(),
        provider_event_id: ties
            .provider_event_id
            .as_deref()
            .map(|id| (origin.source.as_str(), id)),
        deliveries: &named,
    };
    let rows = search::linked(conn, &links, MAX_LINKED).await?;
    let first_by_id = rows
        .iter()
        .find(|r| same_id(r, origin, ties))
        .map(|r| r.delivery_id.clone());
    Ok(rows
        .into_iter()
        .map(|row| {
            let mut relations = Vec::new();
            let mut is = |yes: bool, relation: &'static str| {
                if yes {
                    relations.push(relation);
                }
            };
            is(row.delivery_id == this, "this delivery");
            is(
                first_by_id.as_deref() == Some(&row.delivery_id),
                "first reception",
            );
            is(
                same_id(&row, origin, ties) && first_by_id.as_deref() != Some(&row.delivery_id),
                "same delivery id",
            );
            is(
                ties.business_key.is_some() && row.business_key == ties.business_key,
                "same business key",
            );
            is(asked.contains(&row.delivery_id), "same effect");
            is(
                ties.deliveries.contains(&row.delivery_id),
                "named by a decision",
            );
            Linked {
                delivery_id: row.delivery_id,
                received_at: row.received_at,
                source: row.source,
                event_type: row.event_type,
                decision: row.decision,
                reason: row.reason,
                relations,
            }
        })
        .collect())
}

fn same_id(row: &delivery::Model, origin: &Origin, ties: &Ties) -> bool {
    ties.provider_event_id.is_some()
        && row.provider_event_id == ties.provider_event_id
        && row.source == origin.source
}

/// The effects `ids`, oldest first.
pub async fn effects<C: ConnectionTrait>(
    conn: &C,
    ids: &[String],
) -> Result<Vec<EffectView>, DbErr> {
    Ok(search::effects(conn, ids)
        .await?
        .into_iter()
        .map(|e: effect::Model| EffectView {
            effect_id: e.effect_id,
            key: e.key,
            effect_type: e.effect_type,
            criticality: e.criticality,
            status: crate::domain::reservation::ReservationState::shown(&e.state),
            sink: e.sink,
            first_delivery_id: e.first_delivery_id,
            downstream_ref: e.downstream_ref,
            provider_ref: e.provider_ref,
            created_at: e.created_at,
            settled_at: e.settled_at,
        })
        .collect())
}

/// One call to the downstream service about the delivery's effects: the
/// effect sent, or its status asked after an unknown outcome.
#[derive(Debug, Clone, Serialize)]
pub struct AttemptView {
    /// When the call was sent (a status look-up: when its answer was
    /// journaled).
    pub at: DateTime<Utc>,
    /// `effect` (the effect sent) or `status` (what became of it, asked).
    pub call: &'static str,
    pub effect_id: Uuid,
    /// `applied`, `failed`, `unknown`; `no answer` when the lease ran out
    /// first.
    pub outcome: String,
    /// The HTTP status answered, if an answer came.
    pub status: Option<u16>,
    pub latency_ms: Option<u64>,
    /// The downstream's reference for an applied effect, else the stable
    /// error code.
    pub answer: Option<String>,
    /// The journal row it is read from.
    pub position: i64,
}

/// The downstream calls `stored` (a delivery's journal) records, in order.
/// A settlement with no call (a `record` sink, a person's resolution) is
/// not one.
pub fn attempts(stored: &[StoredEvent]) -> Vec<AttemptView> {
    stored
        .iter()
        .filter_map(|s| {
            let position = s.position;
            match &s.event {
                JournalEvent::EffectApplied(e)
                | JournalEvent::EffectFailed(e)
                | JournalEvent::EffectOutcomeUnknown(e) => {
                    let call = e.call?;
                    Some(AttemptView {
                        at: call.sent_at,
                        call: "effect",
                        effect_id: e.effect_id,
                        outcome: e.outcome.state().to_owned(),
                        status: call.status,
                        latency_ms: Some(call.latency_ms),
                        answer: e.authoritative_ref.clone().or_else(|| e.error.clone()),
                        position,
                    })
                }
                JournalEvent::ReservationExpired(e) => Some(AttemptView {
                    at: s.recorded_at,
                    call: "effect",
                    effect_id: e.effect_id,
                    outcome: "no answer".to_owned(),
                    status: None,
                    latency_ms: None,
                    answer: Some("lease ran out before the effect settled".to_owned()),
                    position,
                }),
                JournalEvent::StatusLookupPerformed(e) if !e.url.is_empty() => Some(AttemptView {
                    at: s.recorded_at,
                    call: "status",
                    effect_id: e.effect_id,
                    outcome: e.answer.clone().unwrap_or_else(|| "no answer".to_owned()),
                    status: e.status,
                    latency_ms: Some(e.latency_ms),
                    answer: e.error.clone(),
                    position,
                }),
                _ => None,
            }
        })
        .collect()
}
