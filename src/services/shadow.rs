//! Shadow replay of a candidate strategy set over the journal, before it
//! goes live: the journal's deliveries whose bodies are kept, in journal
//! order, are decided again on two scratch databases — once with the live
//! set, once with the live set plus the candidate's strategies and
//! hierarchies — by the same ingest path, with no sink, no look-up, and
//! nothing written to the live database. What the live set's own replay
//! decides otherwise than the journal says is noise (an effect that was in
//! flight, a case a person resolved since, a breaker): Diffy's idea, so a
//! difference that shows there too is never blamed on the candidate.
//! What is left is the candidate's, ordered by what it costs: merges first
//! (two refunds becoming one, silently), then splits (a duplicate applied
//! again), then what would go to a case.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use anyhow::Context;
use chrono::{DateTime, Utc};
use sea_orm::DatabaseConnection;
use serde::Serialize;

use super::engine::Engine;
use super::ingest::{self, Arrival};
use crate::config::{KEY_SECRET_ENV, Settings, Source};
use crate::domain::delivery::{DeliveryId, Headers};
use crate::domain::fixture::Decided;
use crate::domain::journal::{JournalEvent, Origin};
use crate::store::{bodies, journal};

/// The key secret the scratch databases seal sensitive values with.
const SHADOW_KEY_SECRET: &str = "unicity-shadow-replay-key-secret";

/// Tables of the configuration a replay leaves out: its sources are made
/// unsigned, effects go to the ledger, nobody is asked.
const LEFT_OUT: [&str; 4] = ["sources", "sinks", "lookups", "reconciliation"];

/// Which deliveries to replay.
#[derive(Debug, Clone, Default)]
pub struct Window {
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
    pub source: Option<String>,
}

/// One delivery as the journal holds it.
struct Journaled {
    id: DeliveryId,
    source: String,
    origin: Origin,
    received_at: DateTime<Utc>,
    headers: Headers,
    body: Vec<u8>,
    /// Its first decision, with the strategy and event type it was keyed by.
    live: Decided,
    strategy: String,
    event_type: String,
}

/// How a delivery's decision changes under the candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// Kept apart live (applied, held for a case or a wait), ignored by the
    /// candidate as a duplicate: two effects become one, silently.
    Merge,
    /// Ignored live, applied by the candidate: an effect applied twice.
    Split,
    ToQuarantine,
    ToReconcile,
    Other,
}

impl Change {
    fn of(live: &str, candidate: &str) -> Self {
        match (live, candidate) {
            (live, "ignore") if live != "ignore" => Self::Merge,
            ("ignore", "process") => Self::Split,
            (_, "quarantine") => Self::ToQuarantine,
            (_, "reconcile") => Self::ToReconcile,
            _ => Self::Other,
        }
    }
}

/// One delivery decided otherwise.
#[derive(Debug, Clone, Serialize)]
pub struct Differs {
    pub delivery_id: String,
    pub strategy: String,
    pub event_type: String,
    pub journaled: Decided,
    pub live_replay: Decided,
    pub candidate: Decided,
}

/// Changes of one kind for one strategy and event type.
#[derive(Debug, Clone, Serialize)]
pub struct ChangeGroup {
    pub change: Change,
    pub strategy: String,
    pub event_type: String,
    /// `from → to` decisions.
    pub transition: String,
    pub deliveries: usize,
    /// Up to five delivery ids.
    pub examples: Vec<String>,
}

/// What a shadow replay found.
#[derive(Debug, Clone, Serialize)]
pub struct ShadowReport {
    pub replayed: usize,
    /// Deliveries left out: their bodies are gone, or they are a batch's events.
    pub skipped: usize,
    /// Deliveries the live set's replay decides otherwise than the journal.
    pub noise: Vec<Differs>,
    /// The candidate's changes, merges first.
    pub changes: Vec<ChangeGroup>,
    pub elapsed_secs: f64,
    /// Deliveries decided per second, both replays together.
    pub per_s: f64,
}

/// Replays the journal of `db` in `window` with the live configuration
/// `base` and with `candidate` (a TOML text of `[[strategies]]` and
/// `[[hierarchies]]`) added to it, each on a scratch SQLite database in
/// `scratch`.
pub async fn shadow(
    db: &DatabaseConnection,
    base: &str,
    candidate: &str,
    window: &Window,
    scratch: &std::path::Path,
) -> anyhow::Result<ShadowReport> {
    let (journaled, skipped) = read(db, window).await?;
    let mut sources: Vec<(String, Origin)> = Vec::new();
    for j in &journaled {
        if !sources.iter().any(|(slug, _)| *slug == j.source) {
            sources.push((j.source.clone(), j.origin.clone()));
        }
    }
    let live_text = configuration(base, None, &sources)?;
    let candidate_text = configuration(base, Some(candidate), &sources)?;
    let (live_db, candidate_db) = (scratch.join("live.db"), scratch.join("candidate.db"));
    let started = std::time::Instant::now();
    let (live, proposed) = tokio::try_join!(
        decide_all(&live_text, &live_db, &journaled),
        decide_all(&candidate_text, &candidate_db, &journaled),
    )?;
    let elapsed = started.elapsed().as_secs_f64();

    let mut noise = Vec::new();
    let mut groups: BTreeMap<(Change, String, String, String), Vec<String>> = BTreeMap::new();
    for ((j, replayed), candidate) in journaled.iter().zip(&live).zip(&proposed) {
        let differs = Differs {
            delivery_id: j.id.to_string(),
            strategy: j.strategy.clone(),
            event_type: j.event_type.clone(),
            journaled: j.live.clone(),
            live_replay: replayed.clone(),
            candidate: candidate.clone(),
        };
        if *replayed != j.live {
            noise.push(differs);
        } else if candidate != replayed {
            let change = Change::of(&replayed.decision, &candidate.decision);
            let transition = format!(
                "{}/{} → {}/{}",
                replayed.decision, replayed.reason, candidate.decision, candidate.reason
            );
            groups
                .entry((change, j.strategy.clone(), j.event_type.clone(), transition))
                .or_default()
                .push(j.id.to_string());
        }
    }
    let changes = groups
        .into_iter()
        .map(
            |((change, strategy, event_type, transition), ids)| ChangeGroup {
                change,
                strategy,
                event_type,
                transition,
                deliveries: ids.len(),
                examples: ids.into_iter().take(5).collect(),
            },
        )
        .collect();
    Ok(ShadowReport {
        replayed: journaled.len(),
        skipped,
        noise,
        changes,
        elapsed_secs: elapsed,
        per_s: if elapsed > 0.0 {
            (2 * journaled.len()) as f64 / elapsed
        } else {
            0.0
        },
    })
}

/// The journal's deliveries in `window`, in journal order, with their
/// bodies; and how many were left out.
async fn read(db: &DatabaseConnection, window: &Window) -> anyhow::Result<(Vec<Journaled>, usize)> {
    let mut order: Vec<DeliveryId> = Vec::new();
    let mut found: HashMap<DeliveryId, Journaled> = HashMap::new();
    let mut skipped = 0;
    let mut after = 0;
    loop {
        let page = journal::page_after(db, after, 5_000)
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let Some(last) = page.last() else {
            break;
        };
        after = last.position;
        for stored in page {
            let Some(id) = stored.delivery_id else {
                continue;
            };
            match stored.event {
                JournalEvent::DeliveryReceived(received) => {
                    let inside = window.from.is_none_or(|f| received.received_at >= f)
                        && window.to.is_none_or(|t| received.received_at < t)
                        && window
                            .source
                            .as_ref()
                            .is_none_or(|s| *s == received.origin.source);
                    if !inside {
                        continue;
                    }
                    let body = match received.item_of {
                        Some(_) => None,
                        None => bodies::get(db, &received.body.sha256).await?,
                    };
                    let Some(body) = body else {
                        skipped += 1;
                        continue;
                    };
                    order.push(id);
                    found.insert(
                        id,
                        Journaled {
                            id,
                            source: received.origin.source.clone(),
                            origin: received.origin,
                            received_at: received.received_at,
                            headers: received.headers,
                            body,
                            live: none(),
                            strategy: "none".to_owned(),
                            event_type: "none".to_owned(),
                        },
                    );
                }
                JournalEvent::KeyDerived(key) => {
                    if let Some(j) = found.get_mut(&id) {
                        j.event_type = key.event_type.unwrap_or_else(|| "none".to_owned());
                        if let Some(b) = key.business {
                            j.strategy = b.strategy;
                        }
                    }
                }
                JournalEvent::DecisionMade(made) => {
                    if let Some(j) = found.get_mut(&id).filter(|j| j.live == none()) {
                        j.live = Decided {
                            decision: made.decision.action.as_str().to_owned(),
                            reason: made.decision.reason.as_str().to_owned(),
                        };
                    }
                }
                _ => {}
            }
        }
    }
    let journaled = order
        .into_iter()
        .filter_map(|id| found.remove(&id))
        .collect();
    Ok((journaled, skipped))
}

fn none() -> Decided {
    Decided {
        decision: "none".to_owned(),
        reason: "none".to_owned(),
    }
}

/// `base` without the tables a replay leaves out, with `candidate`'s
/// strategies and hierarchies added, and `sources` unsigned.
fn configuration(
    base: &str,
    candidate: Option<&str>,
    sources: &[(String, Origin)],
) -> anyhow::Result<String> {
    let mut table: toml::Table = toml::from_str(base).context("the configuration")?;
    for name in LEFT_OUT {
        table.remove(name);
    }
    if let Some(candidate) = candidate {
        let added: toml::Table = toml::from_str(candidate).context("the candidate")?;
        for (name, value) in added {
            let toml::Value::Array(items) = value else {
                anyhow::bail!("the candidate's `{name}` is not a list of tables");
            };
            if !["strategies", "hierarchies"].contains(&name.as_str()) {
                anyhow::bail!(
                    "a candidate holds [[strategies]] and [[hierarchies]] only, not `{name}`"
                );
            }
            match table
                .entry(name)
                .or_insert_with(|| toml::Value::Array(Vec::new()))
            {
                toml::Value::Array(existing) => existing.extend(items),
                _ => anyhow::bail!("the configuration's tables are not lists"),
            }
        }
    }
    let unsigned: Vec<toml::Value> = sources
        .iter()
        .map(|(slug, origin)| {
            let mut source = toml::Table::new();
            source.insert("slug".into(), slug.clone().into());
            source.insert("tenant".into(), origin.tenant.clone().into());
            source.insert("provider".into(), origin.provider.clone().into());
            source.insert("environment".into(), origin.environment.clone().into());
            source.insert("allow_unsigned".into(), true.into());
            let mut signature = toml::Table::new();
            signature.insert("scheme".into(), "none".into());
            source.insert("signature".into(), signature.into());
            source.into()
        })
        .collect();
    table.insert("sources".into(), unsigned.into());
    Ok(toml::to_string(&table)?)
}

/// Decides every delivery of `journaled`, in order, with the configuration
/// `text`, on a scratch database at `path`.
async fn decide_all(
    text: &str,
    path: &std::path::Path,
    journaled: &[Journaled],
) -> anyhow::Result<Vec<Decided>> {
    let url = format!("sqlite://{}?mode=rwc", path.display());
    let settings = Settings::from_toml(
        text,
        "127.0.0.1:0".to_owned(),
        url.clone(),
        |name| (name == KEY_SECRET_ENV).then(|| SHADOW_KEY_SECRET.to_owned()),
        false,
    )?;
    let sources: HashMap<String, Arc<Source>> = settings
        .sources
        .iter()
        .map(|s| (s.slug().to_owned(), Arc::new(s.clone())))
        .collect();
    let engine = Engine::open(
        &url,
        settings.catalog,
        settings.key_secret,
        settings.sinks,
        settings.lookups,
        settings.engine,
    )
    .await?;
    let mut decided = Vec::with_capacity(journaled.len());
    for j in journaled {
        let source = sources.get(&j.source).context("a source of the journal")?;
        let arrival = Arrival {
            delivery_id: DeliveryId::from_uuid(uuid::Uuid::now_v7()),
            received_at: j.received_at,
            headers: &j.headers,
            client: None,
        };
        decided.push(
            match ingest::receive(&engine, source, arrival, &j.body).await {
                Ok(accepted) => Decided {
                    decision: accepted.decision.decision.action.as_str().to_owned(),
                    reason: accepted.decision.decision.reason.as_str().to_owned(),
                },
                Err(refusal) => Decided {
                    decision: "refused".to_owned(),
                    reason: refusal.code().to_owned(),
                },
            },
        );
    }
    Ok(decided)
}
