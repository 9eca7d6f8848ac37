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

use chrono::{DateTime, Utc};
use sea_orm::DatabaseConnection;
use serde::Serialize;

use super::sandbox::{self, Sandbox};
use crate::domain::delivery::{DeliveryId, Headers};
use crate::domain::fixture::Decided;
use crate::domain::journal::{JournalEvent, Origin};
use crate::store::{bodies, journal};

/// Which deliveries to replay.
#[derive(Debug, Clone, Default)]
pub struct Window {
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
    pub source: Option<String>,
    /// Refuse a window holding more deliveries than this (the page's limit;
    /// the command line has none).
    pub most: Option<usize>,
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
    /// A batch of several events: the delivery each became, in order.
    items: Vec<DeliveryId>,
}

/// One event of a batch as the journal decided it.
struct Item {
    live: Decided,
    strategy: String,
    event_type: String,
}

/// What a replay decided for one delivery, and for each event of a batch.
struct Replayed {
    own: Decided,
    items: Vec<Decided>,
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
    /// Deliveries replayed, a batch once.
    pub replayed: usize,
    /// Decisions compared: each delivery, and each event of a batch.
    pub compared: usize,
    /// Deliveries left out: their bodies are gone. A batch's events are
    /// compared one by one, in their batch (`replayed` counts the batch).
    pub skipped: usize,
    /// Deliveries the live set's replay decides otherwise than the journal.
    pub noise: Vec<Differs>,
    /// The candidate's changes, merges first.
    pub changes: Vec<ChangeGroup>,
    pub elapsed_secs: f64,
    /// Deliveries decided per second, both replays together.
    pub per_s: f64,
}

/// Told how far a replay has come: the command line draws it as a bar,
/// a page ignores it.
pub trait Progress: Sync {
    /// The journal is read: `total` deliveries are to be decided by each set.
    fn started(&self, total: usize);
    /// `done` deliveries are now decided by both sets: told 1, 2, … up to
    /// the total, each once.
    fn decided(&self, done: usize);
}

/// No one is told.
pub struct Unwatched;

impl Progress for Unwatched {
    fn started(&self, _: usize) {}
    fn decided(&self, _: usize) {}
}

/// A private scratch directory for a replay's two databases, which hold
/// raw bodies: readable by this user only, removed when dropped.
pub fn scratch_dir() -> std::io::Result<tempfile::TempDir> {
    tempfile::Builder::new().prefix("unicity-shadow-").tempdir()
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
    watched(db, base, candidate, window, scratch, &Unwatched).await
}

/// `shadow`, telling `progress` how many deliveries both sets have decided.
pub async fn watched(
    db: &DatabaseConnection,
    base: &str,
    candidate: &str,
    window: &Window,
    scratch: &std::path::Path,
    progress: &dyn Progress,
) -> anyhow::Result<ShadowReport> {
    let Read {
        journaled,
        items,
        skipped,
        source_seen,
    } = read(db, window).await?;
    if let Some(source) = &window.source
        && !source_seen
        && !sandbox::configured_sources(base)?.contains(source)
    {
        anyhow::bail!(
            "no delivery from source `{source}` in the journal, and no such source configured: is the name right?"
        );
    }
    let origins: Vec<Origin> = journaled.iter().map(|j| j.origin.clone()).collect();
    let live_text = sandbox::configuration(base, None, &origins)?;
    let candidate_text = sandbox::configuration(base, Some(candidate), &origins)?;
    let (live_db, candidate_db) = (scratch.join("live.db"), scratch.join("candidate.db"));
    progress.started(journaled.len());
    let counts = Both::new(progress);
    let started = std::time::Instant::now();
    let (live, proposed) = tokio::try_join!(
        decide_all(&live_text, &live_db, &journaled, || counts.one_more(0)),
        decide_all(&candidate_text, &candidate_db, &journaled, || counts
            .one_more(1)),
    )?;
    let elapsed = started.elapsed().as_secs_f64();

    let mut noise = Vec::new();
    let mut groups: BTreeMap<(Change, String, String, String), Vec<String>> = BTreeMap::new();
    // A batch's events one by one, in order (its own decision only sums
    // them up); any other delivery as itself.
    let mut compared: Vec<Differs> = Vec::new();
    for ((j, replayed), candidate) in journaled.iter().zip(&live).zip(&proposed) {
        if j.items.is_empty() {
            compared.push(Differs {
                delivery_id: j.id.to_string(),
                strategy: j.strategy.clone(),
                event_type: j.event_type.clone(),
                journaled: j.live.clone(),
                live_replay: replayed.own.clone(),
                candidate: candidate.own.clone(),
            });
            continue;
        }
        for (n, id) in j.items.iter().enumerate() {
            let item = items.get(id);
            let nth = |r: &Replayed| r.items.get(n).cloned().unwrap_or_else(none);
            compared.push(Differs {
                delivery_id: id.to_string(),
                strategy: item.map_or_else(|| "none".to_owned(), |i| i.strategy.clone()),
                event_type: item.map_or_else(|| "none".to_owned(), |i| i.event_type.clone()),
                journaled: item.map_or_else(none, |i| i.live.clone()),
                live_replay: nth(replayed),
                candidate: nth(candidate),
            });
        }
    }
    let compared_count = compared.len();
    for differs in compared {
        let (replayed, candidate) = (&differs.live_replay, &differs.candidate);
        if *replayed != differs.journaled {
            noise.push(differs);
        } else if candidate != replayed {
            let change = Change::of(&replayed.decision, &candidate.decision);
            let transition = format!(
                "{}/{} → {}/{}",
                replayed.decision, replayed.reason, candidate.decision, candidate.reason
            );
            groups
                .entry((
                    change,
                    differs.strategy.clone(),
                    differs.event_type.clone(),
                    transition,
                ))
                .or_default()
                .push(differs.delivery_id.clone());
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
        compared: compared_count,
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

/// What `read` found.
struct Read {
    /// The window's deliveries, in journal order, with their bodies.
    journaled: Vec<Journaled>,
    /// The events of its batches, as the journal decided each.
    items: HashMap<DeliveryId, Item>,
    /// How many of the window's deliveries were left out (body gone).
    skipped: usize,
    /// Whether the window's source delivered anything at all, in or out of
    /// the window.
    source_seen: bool,
}

/// The journal's deliveries in `window`, in journal order, with their
/// bodies; refused as soon as there are more than `window.most`, before the
/// rest of their bodies are read.
async fn read(db: &DatabaseConnection, window: &Window) -> anyhow::Result<Read> {
    let mut order: Vec<DeliveryId> = Vec::new();
    let mut found: HashMap<DeliveryId, Journaled> = HashMap::new();
    let mut items: HashMap<DeliveryId, Item> = HashMap::new();
    let mut skipped = 0;
    let mut source_seen = false;
    let mut pages = journal::Pages::default();
    while let Some(page) = pages.next(db).await.map_err(|e| anyhow::anyhow!("{e}"))? {
        for stored in page {
            let Some(id) = stored.delivery_id else {
                continue;
            };
            match stored.event {
                JournalEvent::DeliveryReceived(received) => {
                    let of_source = window
                        .source
                        .as_ref()
                        .is_none_or(|s| *s == received.origin.source);
                    source_seen |= of_source;
                    let inside = window.from.is_none_or(|f| received.received_at >= f)
                        && window.to.is_none_or(|t| received.received_at < t)
                        && of_source;
                    if !inside {
                        continue;
                    }
                    // A batch's event: compared in its batch.
                    if received.item_of.is_some() {
                        items.insert(
                            id,
                            Item {
                                live: none(),
                                strategy: "none".to_owned(),
                                event_type: "none".to_owned(),
                            },
                        );
                        continue;
                    }
                    let body = bodies::get(db, &received.body.sha256).await?;
                    let Some(body) = body else {
                        skipped += 1;
                        continue;
                    };
                    // Counted among those replayed: not a batch's event, nor
                    // one whose body is gone.
                    if let Some(most) = window.most.filter(|most| order.len() >= *most) {
                        anyhow::bail!(
                            "more than the {most} deliveries a page replays in this window: narrow the window, or run `unicity replay`"
                        );
                    }
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
                            items: Vec::new(),
                        },
                    );
                }
                JournalEvent::KeyDerived(key) => {
                    let event_type = key.event_type.unwrap_or_else(|| "none".to_owned());
                    let strategy = key.business.map(|b| b.strategy);
                    if let Some(j) = found.get_mut(&id) {
                        j.items = key.items;
                        j.event_type = event_type;
                        if let Some(strategy) = strategy {
                            j.strategy = strategy;
                        }
                    } else if let Some(item) = items.get_mut(&id) {
                        item.event_type = event_type;
                        if let Some(strategy) = strategy {
                            item.strategy = strategy;
                        }
                    }
                }
                JournalEvent::DecisionMade(made) => {
                    let decided = Decided {
                        decision: made.decision.action.as_str().to_owned(),
                        reason: made.decision.reason.as_str().to_owned(),
                    };
                    if let Some(j) = found.get_mut(&id).filter(|j| j.live == none()) {
                        j.live = decided;
                    } else if let Some(item) = items.get_mut(&id).filter(|i| i.live == none()) {
                        item.live = decided;
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
    Ok(Read {
        journaled,
        items,
        skipped,
        source_seen,
    })
}

fn none() -> Decided {
    Decided {
        decision: "none".to_owned(),
        reason: "none".to_owned(),
    }
}

/// How many deliveries each replay has decided; `progress` is told the
/// smaller count, the deliveries both have.
struct Both<'a> {
    decided: [std::sync::atomic::AtomicUsize; 2],
    progress: &'a dyn Progress,
}

impl<'a> Both<'a> {
    fn new(progress: &'a dyn Progress) -> Self {
        Self {
            decided: Default::default(),
            progress,
        }
    }

    /// Replay `side` (0 live, 1 candidate) decided one more delivery.
    fn one_more(&self, side: usize) {
        use std::sync::atomic::Ordering::SeqCst;
        let mine = self.decided[side].fetch_add(1, SeqCst) + 1;
        let theirs = self.decided[1 - side].load(SeqCst);
        if mine <= theirs {
            self.progress.decided(mine);
        }
    }
}

/// Deliveries in flight at once in one replay: enough for the writer's group
/// commit to decide them a batch per transaction.
const IN_FLIGHT: usize = 256;

/// Decides every delivery of `journaled`, in order, with the configuration
/// `text`, on a scratch database at `path`, calling `one_more` as each is.
///
/// In order although `IN_FLIGHT` are in flight: `buffered` first polls each
/// reception in journal order, and a sandbox's reception does not wait on
/// anything before it queues its writer job (its sources are unsigned, its
/// sinks the ledger, the writer's queue holds more than `IN_FLIGHT`), so the
/// jobs reach the writer's one queue in journal order, and a batch runs its
/// jobs in queue order, each seeing the rows of those before it. Each
/// reception runs outside tokio's cooperative budget (`unconstrained`): with
/// it, a reception whose budget ran out would yield at the queue's door and be
/// polled again behind later ones, and same-key deliveries would swap (seen:
/// 42 to 60 noisy deliveries in 20,000, a different count each run). A replay
/// that decided out of order shows as noise.
async fn decide_all(
    text: &str,
    path: &std::path::Path,
    journaled: &[Journaled],
    one_more: impl Fn() + Sync,
) -> anyhow::Result<Vec<Replayed>> {
    use futures_util::{StreamExt, TryStreamExt};

    let url = format!("sqlite://{}?mode=rwc", path.display());
    let sandbox = Sandbox::open(sandbox::settings(text, &url)?).await?;
    let (sandbox, one_more) = (&sandbox, &one_more);
    futures_util::stream::iter(journaled)
        .map(|j| {
            tokio::task::unconstrained(async move {
                let received = sandbox
                    .receive(&j.source, j.received_at, &j.headers, &j.body)
                    .await?;
                one_more();
                let items = match &received {
                    Ok(accepted) => accepted.items.iter().map(sandbox::item_decided).collect(),
                    Err(_) => Vec::new(),
                };
                Ok::<_, anyhow::Error>(Replayed {
                    own: sandbox::decided(&received),
                    items,
                })
            })
        })
        .buffered(IN_FLIGHT)
        .try_collect()
        .await
}
