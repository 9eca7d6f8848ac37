//! The field-stability report (`unicity corpus report`): from deliveries
//! known to be one event — the same provider event or delivery id, or the
//! same strong business key — which body fields stay the same across its
//! retries, which change (candidates for `volatile`) and which appear in some
//! only; and, among deliveries about one resource that the live strategy
//! kept apart (each with an effect of its own), which fields tell them apart
//! (candidates for discriminants). A delivery decided a collision (the same
//! id or key with another content) is not counted a retry of what it
//! collided with. It reads the journal and the stored bodies, and suggests;
//! it never changes a strategy.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use sea_orm::DatabaseConnection;
use serde::Serialize;
use serde_json::Value;

use crate::domain::confidence::Strength;
use crate::domain::decision::{Action, Reason};
use crate::domain::delivery::{BodyParse, DeliveryId};
use crate::domain::identity::Catalog;
use crate::domain::journal::JournalEvent;
use crate::store::{bodies, journal};

/// How a field behaves across the deliveries of one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stability {
    /// Changes between retries of one event: a candidate for `volatile`.
    Volatile,
    /// Present in some deliveries of an event only.
    Conditional,
    /// The same in every delivery of every event seen twice.
    Stable,
}

#[derive(Debug, Clone, Serialize)]
pub struct FieldStability {
    /// The field's path, array positions as `[*]`.
    pub path: String,
    pub stability: Stability,
    /// Events (seen more than once) that carry the field.
    pub events: usize,
    /// Of those, how many changed it between deliveries.
    pub changed_in: usize,
    /// Of those, how many lacked it in some delivery.
    pub missing_in: usize,
    /// Already declared volatile by the provider or one of its strategies.
    pub declared_volatile: bool,
    /// The deliveries of one event that show it so (changing it, lacking it,
    /// or carrying it alike): up to five ids.
    pub examples: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Separating {
    pub path: String,
    /// Resources whose distinct effects this field told apart.
    pub resources: usize,
    /// The deliveries of the first such resource: up to five ids.
    pub examples: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CorpusReport {
    pub deliveries: usize,
    /// Events seen more than once (by provider id or strong key).
    pub repeated_events: usize,
    pub fields: Vec<FieldStability>,
    /// Resources with more than one effect applied, and what separates them.
    pub resources_with_distinct_effects: usize,
    pub separating: Vec<Separating>,
}

/// One delivery as the report reads it.
struct Read {
    id: DeliveryId,
    provider: String,
    event_type: Option<String>,
    /// What makes two deliveries one event, when anything does.
    event: Option<String>,
    resource: Option<String>,
    /// Its body's digest when the body is JSON (a batch's own row: none).
    json_body: Option<String>,
    /// That body, read once the delivery is chosen.
    body: Option<Value>,
    processed: bool,
    /// Decided a collision: the same id or key with another content, so
    /// not a retry of the event it collided with.
    collision: bool,
}

/// More deliveries are chosen than `Chosen::most`.
#[derive(Debug, thiserror::Error)]
#[error(
    "more than the {0} deliveries a page reads: choose a source and an event type, or run `unicity corpus report`"
)]
pub struct TooMany(pub usize);

/// Which deliveries a report reads.
#[derive(Debug, Clone, Copy, Default)]
pub struct Chosen<'a> {
    /// Only this source's (all when `None`).
    pub source: Option<&'a str>,
    /// Only this event type's (all when `None`).
    pub event_type: Option<&'a str>,
    /// Refused when more deliveries than this are chosen, before their
    /// bodies are read: a page holds every chosen body in memory at once.
    pub most: Option<usize>,
}

impl Chosen<'_> {
    fn source(&self, source: &str) -> bool {
        self.source.is_none_or(|s| s == source)
    }

    fn event_type(&self, event_type: Option<&str>) -> bool {
        self.event_type.is_none_or(|t| event_type == Some(t))
    }
}

/// The report over the journal's chosen deliveries whose bodies are kept;
/// `catalog` says which fields its providers and strategies already
/// declare volatile.
pub async fn report(
    db: &DatabaseConnection,
    catalog: &Catalog,
    chosen: Chosen<'_>,
) -> anyhow::Result<CorpusReport> {
    // Only the chosen deliveries are kept, and their bodies read.
    let mut reads = read(db, chosen).await?;
    reads.retain(|r| r.json_body.is_some());
    for r in &mut reads {
        if let Some(sha256) = &r.json_body {
            r.body = bodies::get(db, sha256)
                .await?
                .and_then(|raw| serde_json::from_slice(&raw).ok());
        }
    }
    let chosen: Vec<&Read> = reads.iter().filter(|r| r.body.is_some()).collect();
    let flat: Vec<BTreeMap<String, BTreeSet<String>>> = chosen
        .iter()
        .map(|r| flatten(r.body.as_ref().unwrap_or(&Value::Null)))
        .collect();

    // One event, several deliveries: which fields change between them.
    let mut events: HashMap<&str, Vec<usize>> = HashMap::new();
    for (n, r) in chosen.iter().enumerate() {
        if let (Some(event), false) = (&r.event, r.collision) {
            events.entry(event.as_str()).or_default().push(n);
        }
    }
    let mut repeated: Vec<&Vec<usize>> = events.values().filter(|d| d.len() > 1).collect();
    // In journal order, so the example of each field is the earliest.
    repeated.sort();
    let mut seen: BTreeMap<String, Seen> = BTreeMap::new();
    for deliveries in &repeated {
        let paths: BTreeSet<&String> = deliveries.iter().flat_map(|n| flat[*n].keys()).collect();
        for path in paths {
            let values: Vec<Option<&BTreeSet<String>>> =
                deliveries.iter().map(|n| flat[*n].get(path)).collect();
            let entry = seen.entry(path.clone()).or_default();
            entry.events += 1;
            entry.carried.get_or_insert(deliveries);
            let present: Vec<&BTreeSet<String>> = values.iter().flatten().copied().collect();
            if present.len() < values.len() {
                entry.missing_in += 1;
                entry.lacked.get_or_insert(deliveries);
            }
            if present.windows(2).any(|w| w[0] != w[1]) {
                entry.changed_in += 1;
                entry.changed.get_or_insert(deliveries);
            }
        }
    }
    let providers: BTreeSet<&str> = chosen.iter().map(|r| r.provider.as_str()).collect();
    let declared = declared_volatile(catalog, &providers);
    let ids = |deliveries: Option<&Vec<usize>>| -> Vec<String> {
        deliveries
            .into_iter()
            .flatten()
            .take(EXAMPLES)
            .map(|n| chosen[*n].id.to_string())
            .collect()
    };
    let mut fields: Vec<FieldStability> = seen
        .into_iter()
        .map(|(path, seen)| {
            let (stability, example) = if seen.changed_in > 0 {
                (Stability::Volatile, seen.changed)
            } else if seen.missing_in > 0 {
                (Stability::Conditional, seen.lacked)
            } else {
                (Stability::Stable, seen.carried)
            };
            FieldStability {
                declared_volatile: declared.contains(path.as_str()),
                stability,
                path,
                events: seen.events,
                changed_in: seen.changed_in,
                missing_in: seen.missing_in,
                examples: ids(example),
            }
        })
        .collect();
    fields.sort_by(|a, b| a.stability.cmp(&b.stability).then(a.path.cmp(&b.path)));
    let mut volatile: BTreeSet<&str> = fields
        .iter()
        .filter(|f| f.stability == Stability::Volatile)
        .map(|f| f.path.as_str())
        .collect();
    volatile.extend(declared.iter().map(String::as_str));

    // One resource, several effects: which fields tell them apart.
    let mut resources: HashMap<(&str, &str), Vec<usize>> = HashMap::new();
    for (n, r) in chosen.iter().enumerate() {
        if let (true, Some(resource), Some(kind)) = (r.processed, &r.resource, &r.event_type) {
            resources
                .entry((resource.as_str(), kind.as_str()))
                .or_default()
                .push(n);
        }
    }
    let mut separating: BTreeMap<String, (usize, &Vec<usize>)> = BTreeMap::new();
    let mut distinct = 0;
    let mut several: Vec<&Vec<usize>> = resources.values().filter(|d| d.len() > 1).collect();
    // In journal order, so the example of each field is the earliest.
    several.sort();
    for deliveries in several {
        distinct += 1;
        let paths: BTreeSet<&String> = deliveries.iter().flat_map(|n| flat[*n].keys()).collect();
        for path in paths {
            if volatile.contains(path.as_str()) {
                continue;
            }
            let values: BTreeSet<Option<&BTreeSet<String>>> =
                deliveries.iter().map(|n| flat[*n].get(path)).collect();
            if values.len() > 1 {
                separating.entry(path.clone()).or_insert((0, deliveries)).0 += 1;
            }
        }
    }
    let mut separating: Vec<Separating> = separating
        .into_iter()
        .map(|(path, (resources, first))| Separating {
            path,
            resources,
            examples: ids(Some(first)),
        })
        .collect();
    separating.sort_by(|a, b| b.resources.cmp(&a.resources).then(a.path.cmp(&b.path)));
    Ok(CorpusReport {
        deliveries: chosen.len(),
        repeated_events: repeated.len(),
        fields,
        resources_with_distinct_effects: distinct,
        separating,
    })
}

/// Delivery ids a line of the report gives as examples.
const EXAMPLES: usize = 5;

/// What the events seen more than once showed of one field.
#[derive(Default)]
struct Seen<'a> {
    events: usize,
    changed_in: usize,
    missing_in: usize,
    /// The first event's deliveries that carried it, lacked it, changed it.
    carried: Option<&'a Vec<usize>>,
    lacked: Option<&'a Vec<usize>>,
    changed: Option<&'a Vec<usize>>,
}

/// The body paths `providers` and their strategies declare volatile.
fn declared_volatile(catalog: &Catalog, providers: &BTreeSet<&str>) -> BTreeSet<String> {
    let mut paths = BTreeSet::new();
    for provider in providers {
        if let Some(def) = catalog.provider(provider) {
            paths.extend(def.volatile.iter().map(|v| v.path.as_str().to_owned()));
        }
    }
    for strategy in catalog.strategies() {
        if providers.contains(strategy.provider.as_str()) {
            paths.extend(
                strategy
                    .normalize
                    .volatile
                    .iter()
                    .map(|v| v.path.as_str().to_owned()),
            );
        }
    }
    paths
}

/// Every delivery of the journal (a batch's own row left out: its events
/// are read), with its JSON body's digest; the bodies are read later, of
/// the chosen deliveries only.
async fn read(db: &DatabaseConnection, chosen: Chosen<'_>) -> anyhow::Result<Vec<Read>> {
    let mut order: Vec<DeliveryId> = Vec::new();
    let mut found: HashMap<DeliveryId, Read> = HashMap::new();
    let mut pages = journal::Pages::default();
    while let Some(page) = pages.next(db).await.map_err(|e| anyhow::anyhow!("{e}"))? {
        for stored in page {
            let Some(id) = stored.delivery_id else {
                continue;
            };
            match stored.event {
                JournalEvent::DeliveryReceived(received)
                    if chosen.source(&received.origin.source) =>
                {
                    let json_body =
                        (received.parse == BodyParse::Json).then_some(received.body.sha256);
                    order.push(id);
                    found.insert(
                        id,
                        Read {
                            id,
                            provider: received.origin.provider,
                            event_type: None,
                            event: None,
                            resource: None,
                            json_body,
                            body: None,
                            processed: false,
                            collision: false,
                        },
                    );
                }
                JournalEvent::KeyDerived(key) if !chosen.event_type(key.event_type.as_deref()) => {
                    found.remove(&id);
                }
                JournalEvent::KeyDerived(key) => {
                    if let Some(read) = found.get_mut(&id) {
                        read.event_type = key.event_type;
                        read.resource = key.resource;
                        let strong = key
                            .business
                            .as_ref()
                            .filter(|b| b.strength == Strength::Strong)
                            .map(|b| format!("key:{}", b.key));
                        read.event = key
                            .provider_event_id
                            .map(|p| format!("provider:{p}"))
                            .or(strong);
                        // A batch's own row: its events are counted instead.
                        if !key.items.is_empty() {
                            read.json_body = None;
                        }
                    }
                }
                JournalEvent::DecisionMade(made) => {
                    if let Some(read) = found.get_mut(&id) {
                        read.processed = made.decision.action == Action::Process;
                        read.collision |= matches!(
                            made.decision.reason,
                            Reason::DiscriminantsDiffer | Reason::TransportIdCollision
                        );
                    }
                }
                _ => {}
            }
        }
        // A delivery's reception and its key are journaled together: what
        // is left of a page is chosen.
        let bodies = || found.values().filter(|r| r.json_body.is_some()).count();
        if let Some(most) = chosen.most.filter(|most| bodies() > *most) {
            return Err(TooMany(most).into());
        }
    }
    Ok(order
        .into_iter()
        .filter_map(|id| found.remove(&id))
        .collect())
}

/// Each leaf of `value` by path (`$.a.b[*].c`), with the values found there.
fn flatten(value: &Value) -> BTreeMap<String, BTreeSet<String>> {
    let mut out = BTreeMap::new();
    walk(value, "$".to_owned(), &mut out);
    out
}

fn walk(value: &Value, path: String, out: &mut BTreeMap<String, BTreeSet<String>>) {
    match value {
        Value::Object(members) => {
            for (name, member) in members {
                walk(member, format!("{path}.{name}"), out);
            }
        }
        Value::Array(items) => {
            for item in items {
                walk(item, format!("{path}[*]"), out);
            }
        }
        leaf => {
            out.entry(path).or_default().insert(leaf.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaves_are_named_by_path_with_array_positions_folded() {
        let flat = flatten(&serde_json::json!({
            "a": {"b": 1},
            "items": [{"id": "x"}, {"id": "y"}],
        }));
        assert_eq!(flat.keys().collect::<Vec<_>>(), ["$.a.b", "$.items[*].id"]);
        assert_eq!(flat["$.items[*].id"].len(), 2);
    }
}
