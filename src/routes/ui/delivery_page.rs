//! The support page of one delivery (`templates/delivery.html`), built from
//! the masked `DeliveryView`: everything needed to say why it was processed,
//! ignored or held — the decision in a sentence, the identity, the linked
//! deliveries, the effect, the cases and how they ended, the headers, the
//! body, the journal.
//! Every value shown came from a webhook or from it: the template escapes
//! all of them (no `|safe`).

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::format::{Nav, ShortId, Stamp, filters};
use crate::domain::decision::Part;
use crate::services::deliveries::DeliveryView;

/// A part of the decision's sentence: text, then maybe a linked id.
pub struct Piece {
    pub text: String,
    pub link: Option<String>,
    pub id: Option<ShortId>,
}

/// The business identity the delivery was keyed with.
pub struct Identity {
    pub strategy: String,
    pub strength: String,
    pub effect_type: String,
    pub criticality: String,
    pub key: ShortId,
    /// How the strategy keys (`business_reference`, `canonical_fingerprint`…).
    pub kind: String,
    /// The named fields the key was computed from, masked, pretty-printed;
    /// `None` when the key hashes the body (shown below).
    pub material: Option<String>,
}

/// A strategy tried before the one that keyed the delivery.
pub struct Skip {
    pub strategy: String,
    pub why: String,
}

/// A delivery of the timeline.
pub struct Linked {
    pub id: ShortId,
    pub link: String,
    pub received: Stamp,
    pub source: String,
    pub event_type: String,
    pub decision: String,
    pub reason: String,
    pub relations: String,
    pub this: bool,
}

pub struct Effect {
    pub id: ShortId,
    pub status: String,
    pub effect_type: String,
    pub criticality: String,
    pub sink: String,
    pub key: ShortId,
    pub first: ShortId,
    pub first_link: String,
    pub created: Stamp,
    pub settled: Option<Stamp>,
    pub provider_ref: Option<String>,
    pub downstream_ref: Option<String>,
}

/// One call to the downstream service, as a row of the attempts table.
pub struct Attempt {
    pub at: Stamp,
    pub call: &'static str,
    pub effect: ShortId,
    pub outcome: String,
    /// The HTTP status, or `—` when no answer came.
    pub status: String,
    /// `412 ms`, or `—`.
    pub latency: String,
    pub answer: String,
    /// The journal row it is read from (`#row-N` below).
    pub position: i64,
}

/// A linked id: a case, a batch's parent or item.
pub struct Link {
    pub id: ShortId,
    pub href: String,
    pub note: String,
}

/// A case a decision of the delivery opened, and how it ended if it did.
pub struct CaseLine {
    pub id: ShortId,
    pub href: String,
    pub ended: Option<Ended>,
}

/// A case's resolution as the delivery page states it.
pub struct Ended {
    /// The stored code (`process_as_distinct`, ...).
    pub resolution: &'static str,
    /// The same in words.
    pub plain: &'static str,
    pub by: String,
    pub at: Stamp,
    pub reference: Option<String>,
    pub note: String,
}

pub struct Event {
    pub position: i64,
    pub event_type: &'static str,
    pub version: i32,
    pub recorded: Stamp,
    pub data: String,
}

/// `templates/delivery.html`.
#[derive(askama::Template)]
#[template(path = "delivery.html")]
pub struct DeliveryPage {
    pub nav: Nav,
    pub id: ShortId,
    pub status: &'static str,
    pub received: Stamp,
    pub source: String,
    pub provider: String,
    pub tenant: String,
    pub environment: String,
    pub event_type: String,
    pub provider_event_id: Option<String>,
    pub transport_key: Option<ShortId>,
    pub resource: Option<String>,
    pub action: Option<String>,
    pub reason: String,
    pub sentence: Vec<Piece>,
    pub summary: String,
    pub matched_strategy: Option<String>,
    pub identity: Option<Identity>,
    pub skipped: Vec<Skip>,
    pub unresolved: Option<String>,
    pub timeline: Vec<Linked>,
    pub effects: Vec<Effect>,
    pub attempts: Vec<Attempt>,
    pub cases: Vec<CaseLine>,
    pub parent: Option<Link>,
    pub items: Vec<Link>,
    pub headers: Vec<(String, String)>,
    pub parse: String,
    pub body: Option<String>,
    pub events: Vec<Event>,
}

fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

fn delivery_link(id: &str, note: impl Into<String>) -> Link {
    Link {
        id: ShortId::new(id),
        href: format!("/deliveries/{id}"),
        note: note.into(),
    }
}

/// Why a strategy above the chosen one did not key the delivery.
fn skip(skipped: &Value) -> Skip {
    let strategy = format!(
        "{}@{}",
        text(&skipped["strategy"]["name"]),
        text(&skipped["strategy"]["version"])
    );
    let reason = &skipped["reason"];
    let why = match reason["code"].as_str() {
        Some("missing_field") => format!(
            "field `{}` ({}) missing",
            text(&reason["field"]),
            text(&reason["path"])
        ),
        Some("inexact_number") => format!(
            "field `{}` ({}) holds a number too large to read exactly",
            text(&reason["field"]),
            text(&reason["path"])
        ),
        Some("blank_field") => format!(
            "field `{}` ({}) holds only blank text",
            text(&reason["field"]),
            text(&reason["path"])
        ),
        Some("not_applicable") => format!(
            "does not apply to event type {}",
            text(&reason["event_type"])
        ),
        _ => text(&reason["code"]),
    };
    Skip { strategy, why }
}

fn piece(part: Part) -> Piece {
    match part {
        Part::Text(text) => Piece {
            text,
            link: None,
            id: None,
        },
        Part::Delivery(id) => Piece {
            text: "delivery ".to_owned(),
            link: Some(format!("/deliveries/{id}")),
            id: Some(ShortId::new(id.to_string())),
        },
        Part::Effect(id) => Piece {
            text: "effect ".to_owned(),
            link: Some("#effects".to_owned()),
            id: Some(ShortId::new(id.to_string())),
        },
    }
}

impl DeliveryPage {
    pub fn new(nav: Nav, view: DeliveryView, now: DateTime<Utc>) -> Self {
        let stamp = |at: DateTime<Utc>| Stamp::new(at, now);
        let derived = view.identity.clone().unwrap_or(Value::Null);
        let decision = view.decision.clone().unwrap_or(Value::Null);
        let this = view.delivery_id.to_string();
        let business = &derived["business"];
        let identity = business.is_object().then(|| Identity {
            strategy: text(&business["strategy"]),
            strength: text(&business["strength"]),
            effect_type: text(&business["effect_type"]),
            criticality: text(&business["criticality"]),
            key: ShortId::new(text(&business["key"])),
            kind: text(&derived["derivation"]["business"]["kind"]),
            material: derived["derivation"]["business"]
                .get("material")
                .filter(|m| !m.is_null())
                .map(pretty),
        });
        let skipped = derived["derivation"]["skipped"]
            .as_array()
            .map(|all| all.iter().map(skip).collect())
            .unwrap_or_default();
        let timeline = view
            .timeline
            .into_iter()
            .map(|l| Linked {
                this: l.delivery_id == this,
                link: format!("/deliveries/{}", l.delivery_id),
                id: ShortId::new(l.delivery_id),
                received: stamp(l.received_at),
                source: l.source,
                event_type: l.event_type.unwrap_or_default(),
                decision: l.decision.unwrap_or_default(),
                reason: l.reason.unwrap_or_default(),
                relations: l.relations.join(", "),
            })
            .collect();
        let effects = view
            .effects
            .into_iter()
            .map(|e| Effect {
                id: ShortId::new(e.effect_id),
                status: e.status,
                effect_type: e.effect_type,
                criticality: e.criticality,
                sink: e.sink,
                key: ShortId::new(e.key),
                first_link: format!("/deliveries/{}", e.first_delivery_id),
                first: ShortId::new(e.first_delivery_id),
                created: stamp(e.created_at),
                settled: e.settled_at.map(stamp),
                provider_ref: e.provider_ref,
                downstream_ref: e.downstream_ref,
            })
            .collect();
        let attempts = view
            .attempts
            .into_iter()
            .map(|a| Attempt {
                at: stamp(a.at),
                call: a.call,
                effect: ShortId::new(a.effect_id.to_string()),
                outcome: a.outcome,
                status: a.status.map_or_else(|| "—".to_owned(), |s| s.to_string()),
                latency: a
                    .latency_ms
                    .map_or_else(|| "—".to_owned(), |ms| format!("{ms} ms")),
                answer: a.answer.unwrap_or_default(),
                position: a.position,
            })
            .collect();
        let cases = view
            .cases
            .iter()
            .map(|id| CaseLine {
                id: ShortId::new(id.to_string()),
                href: format!("/cases/{id}"),
                ended: view
                    .resolutions
                    .iter()
                    .find(|r| r.case_id == *id)
                    .map(|r| Ended {
                        resolution: r.resolution.as_str(),
                        plain: r.resolution.plain(),
                        by: r.resolved_by.clone(),
                        at: stamp(r.resolved_at),
                        reference: r.authoritative_ref.clone(),
                        note: r.note.clone(),
                    }),
            })
            .collect();
        let items = view
            .items
            .iter()
            .map(|item| {
                let decision = item.decision.as_ref().map(|d| text(&d["action"]));
                let note = format!(
                    "{} → {}",
                    item.event_type.as_deref().unwrap_or("(unknown type)"),
                    decision.unwrap_or_default()
                );
                delivery_link(&item.delivery_id.to_string(), note)
            })
            .collect();
        let parent = view.item_of.map(|of| {
            let note = format!("item {} of this batch", of.index);
            delivery_link(&of.parent.to_string(), note)
        });
        let events = view
            .events
            .into_iter()
            .map(|e| Event {
                position: e.position,
                event_type: e.event_type,
                version: e.version,
                recorded: stamp(e.recorded_at),
                data: pretty(&e.data),
            })
            .collect();
        DeliveryPage {
            nav,
            id: ShortId::new(this),
            status: view.status,
            received: stamp(view.received_at),
            source: view.origin.source,
            provider: view.origin.provider,
            tenant: view.origin.tenant,
            environment: view.origin.environment,
            event_type: derived["event_type"]
                .as_str()
                .unwrap_or("(unknown)")
                .to_owned(),
            provider_event_id: derived["provider_event_id"].as_str().map(str::to_owned),
            transport_key: derived["transport_key"].as_str().map(ShortId::new),
            resource: view.resource,
            action: decision["action"].as_str().map(str::to_owned),
            reason: text(&decision["reason"]),
            sentence: view.explanation.into_iter().map(piece).collect(),
            summary: text(&decision["summary"]),
            matched_strategy: view.matched_strategy,
            identity,
            skipped,
            unresolved: derived["unresolved"].as_str().map(str::to_owned),
            timeline,
            effects,
            attempts,
            cases,
            parent,
            items,
            headers: view.headers,
            parse: view
                .parse
                .map(|p| text(&serde_json::to_value(p).unwrap_or(Value::Null)))
                .unwrap_or_default(),
            body: view.body.as_ref().map(pretty),
            events,
        }
    }
}
