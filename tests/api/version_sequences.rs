//! The version rules as a property, checked exhaustively: for every sequence
//! of strategy versions (a discriminating field added or dropped), horizon
//! purges, retirements (with their migration) and late retries, one refund
//! delivered again and again is processed once — never a second time
//! because a version changed. Driven through the service layer on a real
//! database (no HTTP: a few thousand deliveries must take seconds).

use chrono::{Duration, Utc};
use serde_json::json;
use unicity::domain::decision::Action;
use unicity::domain::delivery::DeliveryId;
use unicity::services::engine::{Engine, SharedEngine};
use unicity::services::ingest::{self, Arrival};
use unicity::services::{strategies, sweeper};

use crate::support::app::{fresh_database, test_settings};
use crate::versions::{Version, refund_hierarchy, refund_strategy, version};

/// What can happen between two retries of the same refund.
#[derive(Clone, Copy, Debug)]
enum Step {
    Retry,
    /// The sweeper purges every key past its horizon from the fast index.
    Purge,
    /// A new version that toggles one discriminating field.
    Bump(&'static str),
    /// The oldest version still in force besides the current one is
    /// migrated, then retired.
    Retire,
}

/// A field the first version discriminates on (`amount`, dropped then
/// added back) and one it does not (`status`, added then dropped) cover
/// every kind of bump.
const STEPS: [Step; 5] = [
    Step::Retry,
    Step::Purge,
    Step::Bump("amount"),
    Step::Bump("status"),
    Step::Retire,
];

/// One sequence's strategy, its versions so far, and a server on them.
struct Sequence {
    name: String,
    url: String,
    versions: Vec<Version>,
    engine: SharedEngine,
    decisions: Vec<(Action, String)>,
}

fn config(name: &str, versions: &[Version]) -> String {
    let mut text = String::from("[engine]\ngroup_commit = false\n");
    for v in versions {
        text.push_str(&refund_strategy(name, v));
    }
    text.push_str(&refund_hierarchy(name));
    text
}

async fn open(url: &str, name: &str, versions: &[Version]) -> SharedEngine {
    let s = test_settings(url, &config(name, versions));
    Engine::open(url, s.catalog, s.key_secret, s.sinks, s.lookups, s.engine)
        .await
        .expect("engine opens")
}

impl Sequence {
    async fn start(url: &str, name: String) -> Self {
        let versions = vec![version(1, "1h", &["amount", "currency"])];
        let engine = open(url, &name, &versions).await;
        Self {
            name,
            url: url.to_owned(),
            versions,
            engine,
            decisions: Vec::new(),
        }
    }

    async fn restart(&mut self) {
        self.engine = open(&self.url, &self.name, &self.versions).await;
    }

    async fn retry(&mut self) {
        let settings = test_settings(&self.url, "");
        let source = settings
            .sources
            .iter()
            .find(|s| s.slug() == "open")
            .expect("open source");
        let body = serde_json::to_vec(&json!({
            "type": "refund.created",
            "payment_id": format!("pay_{}", self.name),
            "refund_reference": "rr_1",
            "amount": 1500,
            "currency": "EUR",
            "status": "succeeded",
            "sent_at": Utc::now().to_rfc3339(),
        }))
        .unwrap();
        let headers = Vec::new();
        let arrival = Arrival {
            delivery_id: DeliveryId::from_uuid(uuid::Uuid::now_v7()),
            received_at: Utc::now(),
            headers: &headers,
            client: None,
        };
        let accepted = ingest::receive(&self.engine, source, arrival, &body)
            .await
            .expect("journaled");
        let decision = &accepted.decision.decision;
        self.decisions
            .push((decision.action, decision.reason.as_str().to_owned()));
    }

    async fn apply(&mut self, step: Step) {
        match step {
            Step::Retry => self.retry().await,
            Step::Purge => {
                sweeper::purge_horizon(&self.engine, Utc::now() + Duration::days(1))
                    .await
                    .expect("purge");
            }
            Step::Bump(field) => {
                let mut discriminants = self.versions.last().unwrap().discriminants.clone();
                match discriminants.iter().position(|d| *d == field) {
                    Some(at) => {
                        discriminants.remove(at);
                    }
                    None => discriminants.push(field),
                }
                let number = self.versions.len() as u32 + 1;
                self.versions.push(version(number, "1h", &discriminants));
                self.restart().await;
            }
            Step::Retire => {
                let current = self.versions.len() - 1;
                let Some(oldest) = self.versions[..current].iter().position(|v| !v.retired) else {
                    return;
                };
                let s = test_settings(&self.url, &config(&self.name, &self.versions));
                strategies::migrate(
                    &self.engine.db,
                    &s.catalog,
                    &s.sources,
                    &s.key_secret,
                    &format!("{}@{}", self.name, oldest + 1),
                )
                .await
                .expect("migration runs");
                self.versions[oldest].retired = true;
                self.restart().await;
            }
        }
    }
}

/// A fresh database; on SQLite, on a memory-backed filesystem when there is
/// one: this test commits a few thousand times, and what it checks does not
/// depend on fsync.
async fn in_memory_disk() -> (String, Option<tempfile::TempDir>) {
    let shm = std::path::Path::new("/dev/shm");
    let postgres = std::env::var("TEST_DATABASE_URL").is_ok_and(|u| !u.is_empty());
    if postgres || !shm.is_dir() {
        return fresh_database().await;
    }
    let dir = tempfile::tempdir_in(shm).expect("temp dir");
    let url = format!("sqlite://{}/unicity.db?mode=rwc", dir.path().display());
    (url, Some(dir))
}

/// Runs one sequence: a first delivery, `steps`, a last retry. `None` when
/// the refund was processed once, by the first delivery; else what happened.
async fn run(shared: Option<&str>, n: usize, steps: [Step; 3]) -> Option<String> {
    let (url, _dir) = match shared {
        Some(url) => (url.to_owned(), None),
        None => in_memory_disk().await,
    };
    let mut seq = Sequence::start(&url, format!("p{n}")).await;
    seq.retry().await;
    for step in steps {
        seq.apply(step).await;
    }
    seq.retry().await;
    let processed = seq
        .decisions
        .iter()
        .filter(|(action, _)| *action == Action::Process)
        .count();
    (processed != 1 || seq.decisions[0].0 != Action::Process)
        .then(|| format!("{steps:?}: {:?}", seq.decisions))
}

/// Every sequence of three steps (5³ = 125), each followed by a retry; a few
/// sequences at a time, each with a strategy of its own, on a SQLite file of
/// its own (one writer per file) or all on one PostgreSQL database.
#[tokio::test]
async fn no_sequence_of_versions_purges_and_retirements_refunds_twice() {
    use futures_util::StreamExt;
    let postgres = std::env::var("TEST_DATABASE_URL").is_ok_and(|u| !u.is_empty());
    let mut sequences = Vec::new();
    for a in STEPS {
        for b in STEPS {
            for c in STEPS {
                // PostgreSQL: every sequence of two steps (its engine opens
                // take ~0.3 s each; SQLite covers the three-step space).
                if !postgres || matches!(c, Step::Retry) {
                    sequences.push([a, b, c]);
                }
            }
        }
    }
    let shared = match postgres {
        true => Some(fresh_database().await.0),
        false => None,
    };
    let shared = shared.as_deref();
    let failures: Vec<String> = futures_util::stream::iter(sequences.into_iter().enumerate())
        .map(|(n, steps)| run(shared, n, steps))
        .buffer_unordered(4)
        .filter_map(|failure| async move { failure })
        .collect()
        .await;
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
