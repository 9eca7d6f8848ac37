//! Reading one delivery back: its journal events and, when parseable, its body.

use sea_orm::DatabaseConnection;
use serde::Serialize;

use crate::domain::delivery::{BodyParse, BodyRef, DeliveryId, Headers};
use crate::domain::journal::{DecisionMade, ItemOf, JournalEvent, KeyDerived, Origin};
use crate::store::{bodies, journal};

/// What `GET /api/deliveries/{id}` shows.
#[derive(Debug, Serialize)]
pub struct DeliveryView {
    pub delivery_id: DeliveryId,
    pub status: &'static str,
    #[serde(flatten)]
    pub origin: Origin,
    pub received_at: chrono::DateTime<chrono::Utc>,
    pub headers: Headers,
    pub body_ref: Option<BodyRef>,
    pub parse: Option<BodyParse>,
    /// The parsed body, when it was JSON and has not been redacted.
    pub body: Option<serde_json::Value>,
    /// The identity derived (strategy, skipped ones and why, masked material, keys).
    pub identity: Option<KeyDerived>,
    /// The latest decision, with its reasoning.
    pub decision: Option<DecisionMade>,
    /// `name@version` of the older strategy version a match was made
    /// through, when it was not the current one.
    pub matched_strategy: Option<String>,
    /// For one event of a batch: the batch delivery that carried it.
    pub item_of: Option<ItemOf>,
    /// For a batch of several events: what each became, in order.
    pub items: Vec<ItemView>,
    pub events: Vec<EventView>,
}

/// One event of a batch, decided as a delivery of its own.
#[derive(Debug, Serialize)]
pub struct ItemView {
    pub delivery_id: DeliveryId,
    pub event_type: Option<String>,
    pub key: Option<String>,
    pub strategy: Option<String>,
    pub unresolved: Option<String>,
    pub decision: Option<DecisionMade>,
}

#[derive(Debug, Serialize)]
pub struct EventView {
    pub position: i64,
    pub event_type: &'static str,
    pub version: i32,
    pub recorded_at: chrono::DateTime<chrono::Utc>,
    pub data: serde_json::Value,
}

#[derive(Debug, thiserror::Error)]
pub enum ShowError {
    #[error("no delivery with this id")]
    NotFound,
    #[error(transparent)]
    Journal(#[from] journal::ReadError),
    #[error(transparent)]
    Db(#[from] sea_orm::DbErr),
}

pub async fn show(db: &DatabaseConnection, id: DeliveryId) -> Result<DeliveryView, ShowError> {
    let stored = journal::for_delivery(db, id).await?;
    let first = stored.first().ok_or(ShowError::NotFound)?;
    let (status, origin, received_at, headers, body_ref, parse, item_of) = match &first.event {
        JournalEvent::DeliveryReceived(e) => (
            "received",
            e.origin.clone(),
            e.received_at,
            e.headers.clone(),
            Some(e.body.clone()),
            Some(e.parse),
            e.item_of,
        ),
        JournalEvent::DeliveryRejected(e) => (
            "rejected",
            e.origin.clone(),
            e.received_at,
            e.headers.clone(),
            e.body.clone(),
            None,
            None,
        ),
        _ => return Err(ShowError::NotFound),
    };
    let identity = stored.iter().find_map(|s| match &s.event {
        JournalEvent::KeyDerived(e) => Some(e.clone()),
        _ => None,
    });
    let decision = stored.iter().rev().find_map(|s| match &s.event {
        JournalEvent::DecisionMade(e) => Some(e.clone()),
        _ => None,
    });
    let body = match (&body_ref, parse) {
        (Some(body_ref), Some(BodyParse::Json)) => bodies::get(db, &body_ref.sha256)
            .await?
            .and_then(|raw| serde_json::from_slice(&raw).ok()),
        _ => None,
    };
    let mut items = Vec::new();
    for item in identity.iter().flat_map(|i| &i.items) {
        items.push(item_view(db, *item).await?);
    }
    let events = stored
        .iter()
        .map(|s| EventView {
            position: s.position,
            event_type: s.event.event_type(),
            version: s.event.version(),
            recorded_at: s.recorded_at,
            data: s.event.data(),
        })
        .collect();
    Ok(DeliveryView {
        delivery_id: id,
        status,
        origin,
        received_at,
        headers,
        body_ref,
        parse,
        body,
        identity,
        matched_strategy: decision
            .as_ref()
            .and_then(|d| d.matched_strategy())
            .map(str::to_owned),
        decision,
        item_of,
        items,
        events,
    })
}

/// What one item of a batch became, from its own journal.
async fn item_view(db: &DatabaseConnection, id: DeliveryId) -> Result<ItemView, ShowError> {
    let stored = journal::for_delivery(db, id).await?;
    let derived = stored.iter().find_map(|s| match &s.event {
        JournalEvent::KeyDerived(e) => Some(e),
        _ => None,
    });
    let business = derived.and_then(|d| d.business.as_ref());
    Ok(ItemView {
        delivery_id: id,
        event_type: derived.and_then(|d| d.event_type.clone()),
        key: business.map(|b| b.key.clone()),
        strategy: business.map(|b| b.strategy.clone()),
        unresolved: derived.and_then(|d| d.unresolved.clone()),
        decision: stored.iter().rev().find_map(|s| match &s.event {
            JournalEvent::DecisionMade(e) => Some(e.clone()),
            _ => None,
        }),
    })
}
