//! The client side: `clients` concurrent tasks take the plan's steps in order,
//! sign each body as its provider would (timestamped now, so a retry is
//! re-signed like a real one; Standard Webhooks retries keep their
//! `webhook-id`) and post it. Every 2xx must carry a `decision`; everything
//! else is counted, with a few samples, and fails the run.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use unicity::config::Source;
use unicity::providers::signature;

use crate::server;
use crate::workload::Plan;

/// How many failure samples to keep.
const SAMPLES: usize = 5;

/// What the clients saw.
#[derive(Debug, Default)]
pub struct LoadOutcome {
    pub elapsed: Duration,
    /// One per request, in nanoseconds, unsorted.
    pub latencies_ns: Vec<u64>,
    /// `decision` values of 2xx answers, counted.
    pub decisions: BTreeMap<String, u64>,
    pub ok: u64,
    /// Non-2xx answers by `status code`.
    pub refused: BTreeMap<String, u64>,
    pub missing_decision: u64,
    pub transport_errors: u64,
    pub samples: Vec<String>,
}

impl LoadOutcome {
    pub fn failures(&self) -> u64 {
        self.refused.values().sum::<u64>() + self.missing_decision + self.transport_errors
    }

    fn merge(&mut self, other: LoadOutcome) {
        self.latencies_ns.extend(other.latencies_ns);
        for (k, v) in other.decisions {
            *self.decisions.entry(k).or_default() += v;
        }
        for (k, v) in other.refused {
            *self.refused.entry(k).or_default() += v;
        }
        self.ok += other.ok;
        self.missing_decision += other.missing_decision;
        self.transport_errors += other.transport_errors;
        for sample in other.samples {
            if self.samples.len() < SAMPLES {
                self.samples.push(sample);
            }
        }
    }

    fn sample(&mut self, text: String) {
        if self.samples.len() < SAMPLES {
            self.samples.push(text);
        }
    }
}

/// Sends every step of `plan` to the servers at `base_urls`, client `i` to
/// server `i` modulo their number (or until `stop` is set, when given).
pub async fn run(
    base_urls: &[String],
    plan: Arc<Plan>,
    clients: usize,
    stop: Option<Arc<AtomicBool>>,
) -> anyhow::Result<LoadOutcome> {
    unicity::tls::install();
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(clients)
        .timeout(Duration::from_secs(60))
        .build()
        .context("cannot build the HTTP client")?;
    let sources: Arc<Vec<Source>> = Arc::new(server::sources()?);
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(clients);
    for n in 0..clients {
        let (http, plan, sources, next, stop) = (
            http.clone(),
            plan.clone(),
            sources.clone(),
            next.clone(),
            stop.clone(),
        );
        let base_url = base_urls[n % base_urls.len().max(1)].clone();
        tasks.push(tokio::spawn(async move {
            client(&http, &base_url, &plan, &sources, &next, stop.as_deref()).await
        }));
    }
    let mut outcome = LoadOutcome::default();
    for task in tasks {
        outcome.merge(task.await.context("a client task panicked")??);
    }
    outcome.elapsed = started.elapsed();
    Ok(outcome)
}

async fn client(
    http: &reqwest::Client,
    base_url: &str,
    plan: &Plan,
    sources: &[Source],
    next: &AtomicUsize,
    stop: Option<&AtomicBool>,
) -> anyhow::Result<LoadOutcome> {
    let mut outcome = LoadOutcome::default();
    loop {
        if stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
            return Ok(outcome);
        }
        let index = next.fetch_add(1, Ordering::Relaxed);
        let Some(step) = plan.steps.get(index) else {
            return Ok(outcome);
        };
        let facts = plan.facts(step);
        let body = plan.body(step, &facts);
        let (slug, secret) = server::source_for(facts.provider);
        let scheme = &sources
            .iter()
            .find(|s| s.slug() == slug)
            .context("benchmark source missing")?
            .scheme;
        let now = chrono::Utc::now().timestamp();
        let headers = signature::sign(scheme, secret, &facts.event_id, now, &body)
            .map_err(|e| anyhow::anyhow!("cannot sign: {}", e.code()))?;
        let mut request = http
            .post(format!("{base_url}/hooks/{slug}"))
            .header("content-type", "application/json")
            .header("user-agent", "unicity-bench/1")
            .body(body);
        for (name, value) in headers {
            request = request.header(name, value);
        }

        let sent = Instant::now();
        let answer = match request.send().await {
            Ok(response) => {
                let status = response.status();
                response.bytes().await.map(|bytes| (status, bytes))
            }
            Err(error) => Err(error),
        };
        outcome.latencies_ns.push(sent.elapsed().as_nanos() as u64);

        match answer {
            Err(error) => {
                outcome.transport_errors += 1;
                outcome.sample(format!("step {index}: transport error: {error}"));
            }
            Ok((status, bytes)) => {
                let json: Option<serde_json::Value> = serde_json::from_slice(&bytes).ok();
                let decision = json
                    .as_ref()
                    .and_then(|j| j.get("decision"))
                    .filter(|d| !d.is_null());
                if status.is_success() {
                    match decision {
                        Some(decision) => {
                            outcome.ok += 1;
                            let name = decision
                                .as_str()
                                .map_or_else(|| decision.to_string(), str::to_owned);
                            *outcome.decisions.entry(name).or_default() += 1;
                        }
                        None => {
                            outcome.missing_decision += 1;
                            outcome.sample(format!(
                                "step {index}: {status} without decision: {}",
                                String::from_utf8_lossy(&bytes)
                            ));
                        }
                    }
                } else {
                    let code = json
                        .as_ref()
                        .and_then(|j| j.get("code"))
                        .and_then(|c| c.as_str())
                        .unwrap_or("-")
                        .to_owned();
                    *outcome
                        .refused
                        .entry(format!("{} {code}", status.as_u16()))
                        .or_default() += 1;
                    outcome.sample(format!(
                        "step {index}: {status}: {}",
                        String::from_utf8_lossy(&bytes)
                    ));
                }
            }
        }
    }
}
