//! `unicity simulate`: a provider and a downstream ledger on loopback, played
//! against a running Unicity. The provider makes refunds and delivers their
//! webhooks the ways providers do (`scenario`): retries with backoff,
//! re-encoded retries, legitimate look-alikes, collisions, a webhook never
//! sent, an outage then a burst; its API lists what it really made, and is
//! itself down for a while. The downstream applies an effect once per
//! Idempotency-Key and sometimes answers too late. When Unicity has settled,
//! reconciliation runs over the simulation's window and `report` says, per
//! payment, whether every refund was applied exactly once or is left for a
//! person — and fails the run otherwise.

pub mod prng;
mod report;
pub mod scenario;
pub mod servers;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use chrono::Utc;
use secrecy::ExposeSecret;

pub use report::Report;
use scenario::{Item, Kind, body};
use servers::{DownstreamState, ProviderState};

use crate::config::Source;
use crate::services::engine::SharedEngine;

/// What to play, and where.
pub struct Options {
    /// Unicity's base URL.
    pub unicity: String,
    /// The source the provider posts to (its scheme and current secret sign).
    pub source: Source,
    pub provider_listen: String,
    pub downstream_listen: String,
    /// Items of the scenario (a payment each; some make two refunds).
    pub items: usize,
    pub seed: u64,
    /// Only these kinds (all when empty).
    pub only: Vec<Kind>,
    pub concurrency: usize,
    /// How long the provider's API is down at the start.
    pub api_outage: Duration,
    /// How long the downstream takes to answer a slow effect (longer than
    /// the sink's timeout).
    pub late: Duration,
    /// The longest wait for Unicity to settle.
    pub settle: Duration,
    pub progress: bool,
}

/// One delivery as Unicity answered it.
#[derive(Debug, Clone, Default)]
pub struct Answer {
    pub decision: String,
    pub case_id: Option<String>,
}

/// Plays the scenario, waits for Unicity to settle, reconciles the window
/// through `engine` (on Unicity's database) and reports.
pub async fn run(options: Options, engine: SharedEngine) -> anyhow::Result<Report> {
    let provider = Arc::new(ProviderState::default());
    let downstream = Arc::new(DownstreamState::default());
    servers::provider(&options.provider_listen, provider.clone())?;
    servers::downstream(&options.downstream_listen, downstream.clone(), options.late)?;
    crate::tls::install();
    let http = reqwest::Client::new();
    wait_ready(&http, &options.unicity).await?;
    let started = Utc::now();
    provider.outage(options.api_outage);
    let items = scenario::plan(options.seed, options.items, &options.only);
    let total: usize = items.iter().map(sends).sum();
    let sender = Arc::new(Sender {
        http,
        options,
        provider: provider.clone(),
        downstream: downstream.clone(),
        done: AtomicUsize::new(0),
        total,
    });
    // The provider's webhook sender is down first: the burst items' refunds
    // are made now and their webhooks held.
    for item in items.iter().filter(|i| i.kind == Kind::Burst) {
        provider.made(&item.refunds[0], &item.payment, item.amount);
    }
    let mut answers = play(&sender, &items, |k| k != Kind::Burst).await?;
    let burst = play(&sender, &items, |k| k == Kind::Burst).await?;
    for (i, a) in burst.into_iter().enumerate() {
        if items[i].kind == Kind::Burst {
            answers[i] = a;
        }
    }
    sender.progress_done();
    let settled = settle(&engine, &downstream, sender.options.settle).await?;
    let window = crate::domain::reconcile::Window {
        from: started - chrono::Duration::seconds(1),
        to: Utc::now() + chrono::Duration::seconds(1),
    };
    let runs = crate::services::reconcile::run_all(
        &engine,
        window,
        chrono::Duration::zero(),
        Some(&sender.options.source),
    )
    .await?;
    let cases = crate::store::cases::opened_since(&engine.db, started).await?;
    let slug = sender.options.source.slug();
    let decided = crate::store::reconcile::decisions_since(&engine.db, slug, started).await?;
    Ok(report::build(report::Inputs {
        provider: &sender.options.source.origin.provider,
        items: &items,
        answers: &answers,
        applied: downstream.applied(),
        downstream_calls: *downstream.calls.lock().unwrap_or_else(|p| p.into_inner()),
        api: *provider.asked.lock().unwrap_or_else(|p| p.into_inner()),
        operations: provider.operations(),
        cases: &cases,
        decided: &decided,
        runs: &runs,
        settled,
    }))
}

/// Deliveries an item sends (for the progress line).
fn sends(item: &Item) -> usize {
    match item.kind {
        Kind::Plain | Kind::Timeout => 1,
        Kind::Dropped => 0,
        Kind::Burst => 3,
        _ => 2,
    }
}

struct Sender {
    http: reqwest::Client,
    options: Options,
    provider: Arc<ProviderState>,
    downstream: Arc<DownstreamState>,
    done: AtomicUsize,
    total: usize,
}

/// Plays the items whose kind `pick` accepts, `concurrency` at a time;
/// returns the answers per item (empty for the others).
async fn play(
    sender: &Arc<Sender>,
    items: &[Item],
    pick: fn(Kind) -> bool,
) -> anyhow::Result<Vec<Vec<Answer>>> {
    let gate = Arc::new(tokio::sync::Semaphore::new(
        sender.options.concurrency.max(1),
    ));
    let mut tasks = Vec::new();
    for item in items.iter().cloned() {
        if !pick(item.kind) {
            tasks.push(None);
            continue;
        }
        let (sender, gate) = (sender.clone(), gate.clone());
        tasks.push(Some(tokio::spawn(async move {
            let _permit = gate.acquire_owned().await;
            sender.deliver(&item).await
        })));
    }
    let mut answers = Vec::with_capacity(tasks.len());
    for task in tasks {
        answers.push(match task {
            Some(task) => task.await??,
            None => Vec::new(),
        });
    }
    Ok(answers)
}

impl Sender {
    /// Makes the item's refunds and delivers their webhooks.
    async fn deliver(&self, item: &Item) -> anyhow::Result<Vec<Answer>> {
        let now = || Utc::now().to_rfc3339();
        let pause = || tokio::time::sleep(Duration::from_millis(item.backoff_ms));
        let made = |n: usize| {
            self.provider
                .made(&item.refunds[n], &item.payment, item.amount)
        };
        let mut answers = Vec::new();
        match item.kind {
            Kind::Plain | Kind::Timeout => {
                if item.kind == Kind::Timeout {
                    lock(&self.downstream.slow).insert(item.payment.clone());
                }
                made(0);
                answers.push(
                    self.send(body(item, item.amount, Some(&now()), false))
                        .await?,
                );
            }
            Kind::Retry => {
                made(0);
                let bytes = body(item, item.amount, Some(&now()), false);
                answers.push(self.send(bytes.clone()).await?);
                pause().await;
                answers.push(self.send(bytes).await?);
            }
            Kind::Reencoded => {
                made(0);
                answers.push(
                    self.send(body(item, item.amount, Some(&now()), false))
                        .await?,
                );
                pause().await;
                answers.push(
                    self.send(body(item, item.amount, Some(&now()), true))
                        .await?,
                );
            }
            Kind::EqualPair | Kind::IdenticalPair => {
                let sent_at = || (item.kind == Kind::EqualPair).then(now);
                made(0);
                answers.push(
                    self.send(body(item, item.amount, sent_at().as_deref(), false))
                        .await?,
                );
                pause().await;
                made(1);
                answers.push(
                    self.send(body(item, item.amount, sent_at().as_deref(), false))
                        .await?,
                );
            }
            Kind::Collision => {
                made(0);
                answers.push(
                    self.send(body(item, item.amount, Some(&now()), false))
                        .await?,
                );
                pause().await;
                let other = item.amount + 1;
                answers.push(self.send(body(item, other, Some(&now()), false)).await?);
            }
            Kind::Dropped => made(0),
            Kind::Burst => {
                let bytes = body(item, item.amount, Some(&now()), false);
                let copies = (0..3).map(|_| self.send(bytes.clone()));
                for answer in futures_util::future::join_all(copies).await {
                    answers.push(answer?);
                }
            }
        }
        Ok(answers)
    }

    /// Posts one signed delivery; answers refused for the moment (429, 5xx,
    /// no connection) are retried with backoff, as a provider does.
    async fn send(&self, bytes: Vec<u8>) -> anyhow::Result<Answer> {
        let source = &self.options.source;
        let secret = source
            .secrets
            .first()
            .map(|s| s.expose_secret().to_owned())
            .unwrap_or_default();
        let url = format!("{}/hooks/{}", self.options.unicity, source.slug());
        let mut wait = Duration::from_millis(200);
        for attempt in 1..=6 {
            let id = format!("msg_{}", uuid::Uuid::now_v7().simple());
            let headers = crate::providers::signature::sign(
                &source.scheme,
                &secret,
                &id,
                Utc::now().timestamp(),
                &bytes,
            )
            .map_err(|e| anyhow::anyhow!("cannot sign for {}: {}", source.slug(), e.code()))?;
            let mut request = self
                .http
                .post(&url)
                .header("content-type", "application/json")
                .body(bytes.clone());
            for (name, value) in headers {
                request = request.header(name, value);
            }
            let answered = request.send().await;
            if let Ok(response) = answered {
                let status = response.status();
                if status.is_success() {
                    let json: serde_json::Value = response.json().await.unwrap_or_default();
                    self.progress();
                    return Ok(Answer {
                        decision: json["decision"].as_str().unwrap_or_default().to_owned(),
                        case_id: json["case_id"].as_str().map(str::to_owned),
                    });
                }
                if status.is_client_error() && status.as_u16() != 429 {
                    anyhow::bail!("Unicity refused a delivery: {status}");
                }
            }
            if attempt < 6 {
                tokio::time::sleep(wait).await;
                wait *= 2;
            }
        }
        anyhow::bail!("Unicity did not accept a delivery after 6 attempts")
    }

    fn progress(&self) {
        let done = self.done.fetch_add(1, Ordering::SeqCst) + 1;
        if self.options.progress {
            let width = 40;
            let filled = done * width / self.total.max(1);
            eprint!(
                "\r[{}{}] {done}/{} deliveries",
                "#".repeat(filled),
                "-".repeat(width - filled.min(width)),
                self.total
            );
        }
    }

    fn progress_done(&self) {
        if self.options.progress {
            eprintln!();
        }
    }
}

fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

async fn wait_ready(http: &reqwest::Client, unicity: &str) -> anyhow::Result<()> {
    for _ in 0..50 {
        if let Ok(response) = http.get(format!("{unicity}/readyz")).send().await
            && response.status().is_success()
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    anyhow::bail!(
        "Unicity does not answer at {unicity}/readyz: start it first (cargo run --release)"
    )
}

/// Waits until no effect is pending, no case waits for a look-up and the
/// downstream's effects stayed the same for two seconds; false when `limit`
/// ran out first.
async fn settle(
    engine: &SharedEngine,
    downstream: &DownstreamState,
    limit: Duration,
) -> anyhow::Result<bool> {
    let deadline = Instant::now() + limit;
    let mut last = None;
    let mut stable = 0;
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let pending = crate::store::ledger::pending_effects(&engine.db).await?;
        let waiting = crate::store::cases::lookups_due(
            &engine.db,
            Utc::now() + chrono::Duration::hours(2),
            1,
        )
        .await?
        .len();
        let now = (pending, waiting, downstream.applied().len());
        stable = if Some(now) == last { stable + 1 } else { 0 };
        last = Some(now);
        if pending == 0 && waiting == 0 && stable >= 4 {
            return Ok(true);
        }
    }
    Ok(false)
}
