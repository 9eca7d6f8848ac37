//! `--flood N`: what a flood of forged deliveries costs the store
//! and the valid traffic. Two phases on one fresh database:
//!
//! 1. `--requests` valid deliveries alone (as the default run sends them);
//! 2. N forged deliveries (a wrong signature and one `--flood-header-bytes`
//!    header each, to both sources, from `--flood-clients` loopback addresses
//!    127.0.1.x, one per client, as a botnet would), while the same valid load
//!    runs until the flood ends (bounded by `--flood-secs`).
//!
//! It then waits for the open aggregation window to close, so that the counts
//! of every refusal are journaled, checks that they account for every forged
//! request, and reports the database growth per forged request (the growth of
//! phase 2 less what its valid deliveries cost at phase 1's rate per delivery),
//! and valid throughput and p99 with and without the flood.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};
use serde::Serialize;

use crate::database::Backend;
use crate::report::Phase;
use crate::server::{NOREFID_SLUG, STRIPE_SLUG};
use crate::workload::Plan;
use crate::{checks, load};

/// Issue 12's targets (reported, not enforced).
const TARGET_BYTES_PER_REJECTED: f64 = 1024.0;
const TARGET_THROUGHPUT_RATIO: f64 = 0.8;

pub struct FloodArgs<'a> {
    pub backend: Backend,
    pub url: &'a str,
    pub base_url: &'a str,
    pub requests: usize,
    pub clients: usize,
    pub seed: u64,
    pub flood: usize,
    pub flood_clients: usize,
    pub header_bytes: usize,
    pub max_secs: u64,
    /// Forged requests per second, all clients together (0: as fast as they go).
    pub rate: u32,
}

#[derive(Debug, Default, Serialize)]
pub struct Forged {
    pub sent: u64,
    pub elapsed_s: f64,
    pub per_s: f64,
    /// Answers by status code.
    pub statuses: BTreeMap<u16, u64>,
    pub transport_errors: u64,
}

#[derive(Debug, Serialize)]
pub struct Growth {
    /// Database bytes per valid delivery in phase 1.
    pub per_valid_delivery: f64,
    /// Database growth over phase 2 (valid and forged), bytes.
    pub phase_2: i64,
    /// Phase 2's growth less its valid deliveries', per forged request.
    pub per_forged_request: f64,
    /// Journal rows the refusals left, and their payload bytes per forged request.
    pub rejected_rows: i64,
    pub aggregate_rows: i64,
    pub journal_bytes_per_forged_request: f64,
}

#[derive(Debug, Serialize)]
pub struct FloodReport {
    pub bench: &'static str,
    pub backend: Backend,
    pub requests: usize,
    pub clients: usize,
    pub header_bytes: usize,
    pub flood_clients: usize,
    /// Forged requests per second asked for (0: unpaced).
    pub rate: u32,
    pub forged: Forged,
    pub alone: Phase,
    pub during: Phase,
    pub throughput_ratio: f64,
    pub p99_ratio: f64,
    pub growth: Growth,
    /// Refusals journaled one by one plus those counted in aggregates.
    pub accounted: i64,
    pub valid_failures: u64,
    pub target_bytes_per_forged_request: f64,
    pub target_throughput_ratio: f64,
}

pub async fn run(args: FloodArgs<'_>) -> anyhow::Result<FloodReport> {
    let db = unicity::store::connect(args.url).await?;
    let size = || database_size(args.backend, args.url, &db);

    note!(
        "unicity-bench: phase 1: {} valid deliveries alone",
        args.requests
    );
    let before = size().await?;
    let plan = Arc::new(Plan::new(args.seed, args.requests, 2 * args.clients));
    let base_urls = [args.base_url.to_owned()];
    let alone = load::run(&base_urls, plan, args.clients, None).await?;
    let after_alone = size().await?;

    note!(
        "unicity-bench: phase 2: {} forged deliveries ({} B header) from {} addresses, valid load alongside",
        args.flood,
        args.header_bytes,
        args.flood_clients
    );
    let stop = Arc::new(AtomicBool::new(false));
    let plan = Arc::new(Plan::new(
        args.seed ^ 0xF100D,
        args.requests * 20,
        2 * args.clients,
    ));
    let valid = tokio::spawn({
        let (base_url, stop) = (args.base_url.to_owned(), stop.clone());
        async move { load::run(&[base_url], plan, args.clients, Some(stop)).await }
    });
    let forged = send_forged(&args).await?;
    stop.store(true, Ordering::Relaxed);
    let during = valid.await.context("the valid load panicked")??;

    // Counts of the open window are journaled when it closes.
    let now = chrono::Utc::now().timestamp();
    let wait = 60 - now.rem_euclid(60) + 2;
    note!("unicity-bench: waiting {wait} s for the aggregation window to close");
    tokio::time::sleep(Duration::from_secs(wait as u64)).await;
    let after_flood = size().await?;

    let rejected_rows = scalar(
        &db,
        "SELECT COUNT(*) FROM journal WHERE event_type = 'DeliveryRejected'",
    )
    .await?;
    let aggregate_rows = scalar(
        &db,
        "SELECT COUNT(*) FROM journal WHERE event_type = 'RejectionsAggregated'",
    )
    .await?;
    let counted = scalar(&db, match args.backend {
        Backend::Sqlite => "SELECT COALESCE(SUM(json_extract(data, '$.count')), 0) FROM journal WHERE event_type = 'RejectionsAggregated'",
        Backend::Postgres => "SELECT COALESCE(SUM((data->>'count')::bigint), 0)::bigint FROM journal WHERE event_type = 'RejectionsAggregated'",
    }).await?;
    let journal_bytes = scalar(&db, "SELECT COALESCE(SUM(LENGTH(CAST(data AS TEXT))), 0) FROM journal WHERE event_type IN ('DeliveryRejected', 'RejectionsAggregated')").await?;
    let journaled = checks::check_journaled(&db, alone.ok + during.ok).await;
    let exactly_once = checks::check_exactly_once(&db).await;
    let _ = db.close().await;
    journaled?;
    exactly_once?;

    let refused: u64 = forged
        .statuses
        .iter()
        .filter(|(status, _)| **status >= 400)
        .map(|(_, n)| n)
        .sum();
    let accounted = rejected_rows + counted;
    if accounted != refused as i64 {
        note!(
            "unicity-bench: MISMATCH: {refused} forged requests refused, {accounted} accounted for"
        );
    }
    let per_valid = (after_alone - before) as f64 / alone.ok.max(1) as f64;
    let phase_2 = after_flood - after_alone;
    let forged_n = forged.sent.max(1) as f64;
    let alone_phase = Phase::measure(alone.latencies_ns.clone(), alone.elapsed, None);
    let during_phase = Phase::measure(during.latencies_ns.clone(), during.elapsed, None);
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    Ok(FloodReport {
        bench: "unicity-bench --flood",
        backend: args.backend,
        requests: args.requests,
        clients: args.clients,
        header_bytes: args.header_bytes,
        flood_clients: args.flood_clients,
        rate: args.rate,
        throughput_ratio: ratio(during_phase.per_s, alone_phase.per_s),
        p99_ratio: ratio(during_phase.p99_ms, alone_phase.p99_ms),
        alone: alone_phase,
        during: during_phase,
        growth: Growth {
            per_valid_delivery: per_valid,
            phase_2,
            per_forged_request: (phase_2 as f64 - during.ok as f64 * per_valid) / forged_n,
            rejected_rows,
            aggregate_rows,
            journal_bytes_per_forged_request: journal_bytes as f64 / forged_n,
        },
        forged,
        accounted,
        valid_failures: alone.failures() + during.failures(),
        target_bytes_per_forged_request: TARGET_BYTES_PER_REJECTED,
        target_throughput_ratio: TARGET_THROUGHPUT_RATIO,
    })
}

impl FloodReport {
    pub fn table(&self) -> String {
        let g = &self.growth;
        let f = &self.forged;
        format!(
            "flood: {} forged deliveries ({} B header) in {:.1} s ({:.0} /s{}) from {} addresses; answers {:?}\n\
             | phase | valid deliveries/s | p50 ms | p99 ms |\n|---|---|---|---|\n\
             | alone | {:.0} | {:.1} | {:.1} |\n| during the flood | {:.0} | {:.1} | {:.1} |\n\
             throughput ratio {:.2} (target >= {}), p99 ratio {:.2}\n\
             database growth per forged request {:.1} B (target < {} B); journal payload {:.1} B per forged request; \
             {} rejections journaled one by one, {} aggregates; {} of {} refusals accounted for\n",
            f.sent,
            self.header_bytes,
            f.elapsed_s,
            f.per_s,
            match self.rate {
                0 => String::from(", unpaced"),
                rate => format!(", paced at {rate} /s"),
            },
            self.flood_clients,
            f.statuses,
            self.alone.per_s,
            self.alone.p50_ms,
            self.alone.p99_ms,
            self.during.per_s,
            self.during.p50_ms,
            self.during.p99_ms,
            self.throughput_ratio,
            TARGET_THROUGHPUT_RATIO,
            self.p99_ratio,
            g.per_forged_request,
            TARGET_BYTES_PER_REJECTED,
            g.journal_bytes_per_forged_request,
            g.rejected_rows,
            g.aggregate_rows,
            self.accounted,
            f.statuses
                .iter()
                .filter(|(s, _)| **s >= 400)
                .map(|(_, n)| n)
                .sum::<u64>(),
        )
    }
}

/// Sends the forged deliveries from `flood_clients` tasks, each on its own
/// loopback address, until all are sent or `max_secs` have passed.
async fn send_forged(args: &FloodArgs<'_>) -> anyhow::Result<Forged> {
    let next = Arc::new(AtomicUsize::new(0));
    let deadline = Instant::now() + Duration::from_secs(args.max_secs);
    let padding = "f".repeat(args.header_bytes);
    // Each client paces itself to its share of the rate.
    let gap = (args.rate > 0)
        .then(|| Duration::from_secs_f64(args.flood_clients as f64 / f64::from(args.rate)));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..args.flood_clients {
        let address = IpAddr::V4(Ipv4Addr::new(
            127,
            0,
            1 + (i / 250) as u8,
            1 + (i % 250) as u8,
        ));
        unicity::tls::install();
        let http = reqwest::Client::builder()
            .local_address(address)
            .timeout(Duration::from_secs(60))
            .build()
            .context("cannot build a flood client")?;
        let (next, padding, base_url, total, gap) = (
            next.clone(),
            padding.clone(),
            args.base_url.to_owned(),
            args.flood,
            gap,
        );
        tasks.push(tokio::spawn(async move {
            let mut out = Forged::default();
            let mut due = tokio::time::Instant::now();
            loop {
                if let Some(gap) = gap {
                    tokio::time::sleep_until(due).await;
                    due += gap;
                }
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= total || Instant::now() > deadline {
                    return out;
                }
                let now = chrono::Utc::now().timestamp();
                let body = format!(r#"{{"type":"refund.created","id":"forged_{n}"}}"#);
                let request = match n % 2 {
                    0 => http
                        .post(format!("{base_url}/hooks/{NOREFID_SLUG}"))
                        .header("webhook-id", format!("msg_forged_{n}"))
                        .header("webhook-timestamp", now.to_string())
                        .header("webhook-signature", format!("v1,{}", "A".repeat(43) + "=")),
                    _ => http
                        .post(format!("{base_url}/hooks/{STRIPE_SLUG}"))
                        .header("stripe-signature", format!("t={now},v1={}", "0".repeat(64))),
                };
                let answer = request
                    .header("content-type", "application/json")
                    .header("x-flood-padding", padding.as_str())
                    .body(body)
                    .send()
                    .await;
                out.sent += 1;
                match answer {
                    Ok(response) => {
                        *out.statuses.entry(response.status().as_u16()).or_default() += 1;
                        let _ = response.bytes().await;
                    }
                    Err(_) => out.transport_errors += 1,
                }
            }
        }));
    }
    let mut total = Forged::default();
    for task in tasks {
        let out = task.await.context("a flood client panicked")?;
        total.sent += out.sent;
        total.transport_errors += out.transport_errors;
        for (status, n) in out.statuses {
            *total.statuses.entry(status).or_default() += n;
        }
    }
    total.elapsed_s = started.elapsed().as_secs_f64();
    total.per_s = total.sent as f64 / total.elapsed_s.max(1e-9);
    Ok(total)
}

/// Bytes the database takes: on SQLite its file with the WAL and shared
/// memory files, after a checkpoint that truncates the WAL (else the WAL's
/// size, which grows and is reused, hides the growth of the data); on
/// PostgreSQL `pg_database_size`.
async fn database_size(
    backend: Backend,
    url: &str,
    db: &DatabaseConnection,
) -> anyhow::Result<i64> {
    match backend {
        Backend::Sqlite => {
            db.execute_unprepared("PRAGMA wal_checkpoint(TRUNCATE)")
                .await
                .context("checkpoint failed")?;
            let path = url
                .trim_start_matches("sqlite://")
                .split('?')
                .next()
                .unwrap_or_default();
            Ok(["", "-wal", "-shm"]
                .iter()
                .filter_map(|suffix| std::fs::metadata(format!("{path}{suffix}")).ok())
                .map(|m| m.len() as i64)
                .sum())
        }
        Backend::Postgres => {
            scalar(db, "SELECT pg_database_size(current_database())::bigint").await
        }
    }
}

async fn scalar(db: &DatabaseConnection, sql: &str) -> anyhow::Result<i64> {
    let backend: DbBackend = db.get_database_backend();
    let row = db
        .query_one_raw(Statement::from_string(backend, sql.to_owned()))
        .await
        .with_context(|| format!("query failed: {sql}"))?
        .context("no row")?;
    row.try_get_by_index::<i64>(0)
        .with_context(|| format!("not an integer: {sql}"))
}
