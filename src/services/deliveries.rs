//! Reading one delivery back: its journal events and, when parseable, its body.
//!
//! What must stay true: nothing here shows a secret header value or a value a
//! strategy of the delivery's provider declares `sensitive`, in the body or in
//! anything derived from it (identity, decision, journal events). Headers are
//! masked again on the way out, so rows journaled before a pattern was added
//! are masked too.

use std::collections::HashMap;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use super::engine::Engine;
use super::timeline::{self, AttemptView, EffectView, Linked, Ties};
use crate::config::Source;
use crate::domain::cases::Resolution;
use crate::domain::decision::Part;
use crate::domain::delivery::{BodyParse, BodyRef, DeliveryId, Headers};
use crate::domain::identity::FieldRef;
use crate::domain::journal::{ItemOf, JournalEvent, Origin};
use crate::domain::masking::{HeaderMask, SensitiveMask};
use crate::store::{bodies, journal};

/// What `GET /api/deliveries/{id}` shows.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DeliveryView {
    #[schema(value_type = String, format = Uuid)]
    pub delivery_id: DeliveryId,
    #[schema(value_type = String)]
    pub status: &'static str,
    #[serde(flatten)]
    pub origin: Origin,
    pub received_at: chrono::DateTime<chrono::Utc>,
    /// `[name, value]` pairs; secret values masked.
    #[schema(value_type = Vec<Vec<String>>)]
    pub headers: Headers,
    #[schema(value_type = Option<Object>)]
    pub body_ref: Option<BodyRef>,
    pub parse: Option<BodyParse>,
    /// The parsed body, when it was JSON and has not been redacted; sensitive
    /// values shown as their `hmac:<8 hex>…` tag.
    pub body: Option<Value>,
    /// The identity derived (strategy, skipped ones and why, masked material, keys).
    pub identity: Option<Value>,
    /// The latest decision, with its reasoning.
    pub decision: Option<Value>,
    /// `name@version` of the older strategy version a match was made
    /// through, when it was not the current one.
    pub matched_strategy: Option<String>,
    /// For one event of a batch: the batch delivery that carried it.
    #[schema(value_type = Option<Object>)]
    pub item_of: Option<ItemOf>,
    /// For a batch of several events: what each became, in order.
    #[schema(value_type = Vec<Object>)]
    pub items: Vec<ItemView>,
    #[schema(value_type = Vec<Object>)]
    pub events: Vec<EventView>,
    /// The resource it is about (a payment id; `hmac:…` when sensitive).
    pub resource: Option<String>,
    /// The latest decision in one plain sentence, in parts (text, and the
    /// deliveries and effects it names).
    #[schema(value_type = Vec<Object>)]
    pub explanation: Vec<Part>,
    /// Every linked delivery, oldest first: first reception, retries,
    /// duplicates, collisions, this one.
    #[schema(value_type = Vec<Object>)]
    pub timeline: Vec<Linked>,
    /// The effects it asked for, and their state.
    #[schema(value_type = Vec<Object>)]
    pub effects: Vec<EffectView>,
    /// Every call made to the downstream service for its effects, in order.
    #[schema(value_type = Vec<Object>)]
    pub attempts: Vec<AttemptView>,
    /// The cases its decisions opened.
    pub cases: Vec<uuid::Uuid>,
    /// How those of them already resolved ended.
    #[schema(value_type = Vec<Object>)]
    pub resolutions: Vec<CaseEnd>,
}

/// How a case the delivery opened was resolved (its `CaseResolved` event).
#[derive(Debug, Clone, Serialize)]
pub struct CaseEnd {
    pub case_id: uuid::Uuid,
    pub resolution: Resolution,
    /// The operator or token (its journal signature), or `look-up`.
    pub resolved_by: String,
    pub note: String,
    /// The provider's own reference for the operation, when one was given.
    pub authoritative_ref: Option<String>,
    pub resolved_at: chrono::DateTime<chrono::Utc>,
}

/// One event of a batch, decided as a delivery of its own.
#[derive(Debug, Serialize)]
pub struct ItemView {
    pub delivery_id: DeliveryId,
    pub event_type: Option<String>,
    pub key: Option<String>,
    pub strategy: Option<String>,
    pub unresolved: Option<String>,
    pub decision: Option<Value>,
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

/// The delivery, masked. `sources` supplies each source's header mask (the
/// defaults alone for a source no longer configured).
pub async fn show(
    engine: &Engine,
    sources: &HashMap<String, Arc<Source>>,
    id: DeliveryId,
) -> Result<DeliveryView, ShowError> {
    let db = &engine.db;
    let stored = journal::for_delivery(db, id).await?;
    let first = stored.first().ok_or(ShowError::NotFound)?;
    // The delivery is the journal's; the deliveries linked to it are the
    // read model's, which may not hold the latest retries yet.
    super::projector::before_reading(engine).await;
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
    // A source no longer configured: the defaults, keeping what its
    // provider's strategies key on, as a configured one would.
    let header_mask = match sources.get(&origin.source) {
        Some(source) => source.header_mask.clone(),
        None => HeaderMask::default().keeping(&engine.catalog.keyed_headers(&origin.provider)),
    };
    let headers = header_mask.apply(&headers);
    let identity = stored.iter().find_map(|s| match &s.event {
        JournalEvent::KeyDerived(_) => Some(s.event.data()),
        _ => None,
    });
    let decision = stored.iter().rev().find_map(|s| match &s.event {
        JournalEvent::DecisionMade(e) => Some(e),
        _ => None,
    });
    let matched_strategy = decision
        .and_then(|d| d.matched_strategy())
        .map(str::to_owned);
    let mut body: Option<Value> = match (&body_ref, parse) {
        (Some(body_ref), Some(BodyParse::Json)) => bodies::get(db, &body_ref.sha256)
            .await?
            .and_then(|raw| serde_json::from_slice(&raw).ok()),
        _ => None,
    };
    let paths = engine.catalog.sensitive_in_body(&origin.provider);
    let paths: Vec<&FieldRef> = paths.iter().collect();
    let mut sensitive = match body.as_mut() {
        Some(body) => SensitiveMask::mask_body(body, &paths, &engine.key_secret),
        None => SensitiveMask::default(),
    };
    // The body's unkeyed digests would confirm a guess of what is masked.
    let derived = stored.iter().find_map(|s| match &s.event {
        JournalEvent::KeyDerived(e) => Some(e),
        _ => None,
    });
    let mut digests: Vec<&str> = body_ref.iter().map(|b| b.sha256.as_str()).collect();
    if let Some(derived) = derived {
        digests.extend(derived.body_fingerprint.as_deref());
        // Without a provider id, the transport key is made from the raw hash.
        if derived.provider_event_id.is_none() {
            digests.push(&derived.transport_key);
        }
    }
    for digest in digests {
        sensitive.hide_digest(digest, &engine.key_secret);
    }
    // A collision decided before 2026-12-07 named both bodies' fingerprints.
    if let Some(decision) = decision {
        let named = JournalEvent::DecisionMade(decision.clone()).data();
        for digest in crate::domain::plan::journaled_fingerprints(&named) {
            sensitive.hide_fingerprint(&digest, &engine.key_secret);
        }
    }
    let body_ref = body_ref.map(|mut body_ref| {
        body_ref.sha256 = sensitive.scrub_text(&body_ref.sha256);
        body_ref
    });
    let scrubbed = |mut value: Value| {
        sensitive.scrub(&mut value);
        value
    };
    let mut items = Vec::new();
    let item_ids = stored.iter().find_map(|s| match &s.event {
        JournalEvent::KeyDerived(e) => Some(e.items.clone()),
        _ => None,
    });
    for item in item_ids.unwrap_or_default() {
        let mut view = item_view(db, item).await?;
        view.decision = view.decision.map(&scrubbed);
        items.push(view);
    }
    let ties = Ties::of(&stored);
    let timeline = timeline::linked(db, &id.to_string(), &origin, &ties).await?;
    // What the downstream answered may echo the event it was sent whole:
    // its references are masked like the body.
    let mut effects = timeline::effects(db, &ties.effects).await?;
    for effect in &mut effects {
        for reference in [&mut effect.downstream_ref, &mut effect.provider_ref] {
            *reference = reference.as_deref().map(|r| sensitive.scrub_text(r));
        }
    }
    let mut attempts = timeline::attempts(&stored);
    for attempt in &mut attempts {
        attempt.answer = attempt.answer.as_deref().map(|a| sensitive.scrub_text(a));
    }
    let resource = stored.iter().find_map(|s| match &s.event {
        JournalEvent::KeyDerived(e) => e.resource.clone(),
        _ => None,
    });
    let resolutions: Vec<CaseEnd> = stored
        .iter()
        .filter_map(|s| match &s.event {
            JournalEvent::CaseResolved(e) => Some(CaseEnd {
                case_id: e.case_id,
                resolution: e.resolution,
                resolved_by: e.resolved_by.clone(),
                note: sensitive.scrub_text(&e.note),
                authoritative_ref: e
                    .authoritative_ref
                    .as_deref()
                    .map(|r| sensitive.scrub_text(r)),
                resolved_at: s.recorded_at,
            }),
            _ => None,
        })
        .collect();
    // Once the case a decision opened is resolved, its sentence says how
    // it ended rather than that a person must decide.
    let explanation = decision
        .map(|d| {
            let ended = resolutions
                .iter()
                .find(|r| Some(r.case_id) == d.case_id)
                .map(|r| r.resolution);
            d.decision.plain_then(ended)
        })
        .unwrap_or_default();
    let events = stored
        .iter()
        .map(|s| EventView {
            position: s.position,
            event_type: s.event.event_type(),
            version: s.event.version(),
            recorded_at: s.recorded_at,
            data: scrubbed(masked_data(&s.event, &header_mask)),
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
        identity: identity.map(scrubbed),
        decision: decision.map(|d| scrubbed(JournalEvent::DecisionMade(d.clone()).data())),
        matched_strategy,
        item_of,
        items,
        events,
        resource,
        explanation,
        timeline,
        effects,
        attempts,
        cases: ties.cases,
        resolutions,
    })
}

/// The sensitive values of delivery `id`'s body, to mask text that may echo
/// them where its page is not shown whole (a downstream's reference in the
/// queue).
pub async fn sensitive_of(
    engine: &Engine,
    id: DeliveryId,
) -> Result<SensitiveMask, sea_orm::DbErr> {
    let journaled = super::effects::Journaled::read(&engine.db, id).await?;
    let (Some(body_ref), Some(provider)) = (&journaled.body, &journaled.provider) else {
        return Ok(SensitiveMask::default());
    };
    let Some(mut body) = bodies::get(&engine.db, &body_ref.sha256)
        .await?
        .and_then(|raw| serde_json::from_slice::<Value>(&raw).ok())
    else {
        return Ok(SensitiveMask::default());
    };
    let paths = engine.catalog.sensitive_in_body(provider);
    let paths: Vec<&FieldRef> = paths.iter().collect();
    Ok(SensitiveMask::mask_body(
        &mut body,
        &paths,
        &engine.key_secret,
    ))
}

/// What one item of a batch became, from its own journal.
async fn item_view(
    db: &sea_orm::DatabaseConnection,
    id: DeliveryId,
) -> Result<ItemView, ShowError> {
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
            JournalEvent::DecisionMade(_) => Some(s.event.data()),
            _ => None,
        }),
    })
}

/// An event's payload with the headers it carries masked again.
/// An event's data as a delivery's readers see it.
fn masked_data(event: &JournalEvent, mask: &HeaderMask) -> Value {
    let mut event = event.clone();
    match &mut event {
        JournalEvent::DeliveryReceived(e) => e.headers = mask.apply(&e.headers),
        JournalEvent::DeliveryRejected(e) => e.headers = mask.apply(&e.headers),
        // Who read the raw body or exported the case, and from where, is the
        // audit trail's to show (engineers and admins), not every reader's.
        JournalEvent::RawBodyRead(e) => {
            e.client_address = None;
            e.operator = None;
        }
        JournalEvent::FixtureExported(e) => e.by = "(in the audit trail)".to_owned(),
        _ => {}
    }
    event.data()
}
