//! `unicity-bench`: durable ingest measured against the storage engine itself.
//! In one run it starts Unicity in-process on a fresh database,
//! optionally preloads history, measures the raw storage baseline, sends a
//! realistic signed delivery mix over HTTP, checks every answer and the
//! journal, and prints a table and one JSON line.
//!
//! ```sh
//! cargo run --release --bin unicity-bench -- --requests 20000 --clients 32
//! cargo run --release --bin unicity-bench -- --backend postgres --database-url postgres://postgres@127.0.0.1:5432/postgres
//! cargo run --release --bin unicity-bench -- --requests 10000 --flood 100000
//! cargo run --release --bin unicity-bench -- --history 1000000 --queue-cases 10000
//! cargo run --release --bin unicity-bench -- --fixtures tests/fixtures
//! ```
//!
//! Progress goes to stderr; stdout carries the table (unless `--json-only`)
//! and the JSON line. The exit status is non-zero on any refused delivery,
//! missing decision, lost delivery or duplicate effect.

/// Progress and diagnostics on stderr. A closed stderr is ignored rather than
/// a panic, so that the run still removes its database.
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

mod baseline;
mod checks;
mod database;
mod fixtures;
mod flood;
mod history;
mod history_rows;
mod io;
mod load;
mod payloads;
use unicity::simulate::prng;
mod queue;
mod read_model;
mod report;
mod searches;
mod server;
mod shadow;
mod timing;
mod work;
mod workload;

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::Parser;

use database::{Backend, Fresh};
use io::IoPerOp;
use report::{Phase, Report};
use work::Side;
use workload::Plan;

/// glibc malloc fragments under many small, short-lived allocations across
/// threads (a profile showed ~15 % of CPU in it); mimalloc does not.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Measures Unicity's durable ingest against the storage engine's own speed.
#[derive(Debug, Parser)]
#[command(name = "unicity-bench", version)]
struct Cli {
    /// Storage backend.
    #[arg(long, value_enum, default_value_t = Backend::Sqlite)]
    backend: Backend,
    /// PostgreSQL: an existing database on the target server; the run creates
    /// `unicity_bench_<uuid>` next to it and drops it at the end.
    #[arg(long, value_name = "URL")]
    database_url: Option<String>,
    /// SQLite: directory in which the fresh database file is made (its disk is
    /// what gets measured; default: the system temp directory).
    #[arg(long, value_name = "DIR")]
    sqlite_dir: Option<PathBuf>,
    /// Signed deliveries to send (and baseline rows to insert).
    #[arg(long, default_value_t = 20_000)]
    requests: usize,
    /// Concurrent HTTP clients (and concurrent baseline writers).
    #[arg(long, default_value_t = 32)]
    clients: usize,
    /// Journaled deliveries to preload before measuring (bulk path).
    #[arg(long, default_value_t = 0)]
    history: usize,
    /// Seed of the delivery mix.
    #[arg(long, default_value_t = 0x5EED)]
    seed: u64,
    /// Print only the JSON line on stdout.
    #[arg(long)]
    json_only: bool,
    /// PostgreSQL: group-commit writers (`[engine] postgres_writers`; default:
    /// the server's default).
    #[arg(long, value_name = "N")]
    postgres_writers: Option<usize>,
    /// Keep the run's database afterwards (its location goes to stderr), to
    /// look at table and index sizes or replay queries against it.
    #[arg(long)]
    keep_database: bool,
    /// Flood mode: measure valid deliveries alone, then alongside this many
    /// forged ones (bad signature, one large header), and the database growth
    /// per forged request (see `flood.rs`).
    #[arg(long, default_value_t = 0, value_name = "N")]
    flood: usize,
    /// Flood mode: concurrent forged-request clients, each on its own
    /// loopback address (127.0.1.x).
    #[arg(long, default_value_t = 64)]
    flood_clients: usize,
    /// Flood mode: bytes of the padding header each forged request carries.
    #[arg(long, default_value_t = 8000)]
    flood_header_bytes: usize,
    /// Flood mode: the flood stops after this many seconds if not done.
    #[arg(long, default_value_t = 300)]
    flood_secs: u64,
    /// Flood mode: forged requests per second, all flood clients together
    /// (0: as fast as they go, which on one host takes CPU from the server).
    #[arg(long, default_value_t = 0)]
    flood_rate: u32,
    /// Queue mode: after `--history`, open this many cases on the preloaded
    /// deliveries and time the case queue's and delivery search's queries
    /// (see `queue.rs`).
    #[arg(long, default_value_t = 0, value_name = "N")]
    queue_cases: usize,
    /// After the run, replay its journal with this candidate strategy set
    /// (`unicity replay`'s shadow replay: the live set and the candidate, on
    /// scratch SQLite databases) and report the deliveries replayed per
    /// second, the noise and the merges.
    #[arg(long, value_name = "FILE")]
    shadow_candidate: Option<PathBuf>,
    /// Fixtures mode: replay every regression fixture (`*.json`) of DIR,
    /// each on a fresh database of `--backend`, as the test suite does, and
    /// report the suite's time, each replay's (median, slowest) and how many
    /// passed (see `fixtures.rs`). Nothing else is measured.
    #[arg(long, value_name = "DIR")]
    fixtures: Option<PathBuf>,
    /// Unicity server processes on the database (PostgreSQL): this one and
    /// `N - 1` more, the clients spread across them.
    #[arg(long, default_value_t = 1, value_name = "N")]
    processes: usize,
    /// Internal: run one more Unicity server on the database named by
    /// `SERVER_URL_ENV`, print its port, and stop when stdin closes.
    #[arg(long, hide = true)]
    server_child: bool,
    /// Internal: preload `--history` deliveries into the database named by
    /// `PRELOAD_URL_ENV` and print the outcome as JSON. The benchmark runs
    /// its preload this way, in a child process, so that the bulk loader's
    /// memory stays out of the measured peak RSS.
    #[arg(long, hide = true)]
    preload_child: bool,
}

/// How the parent passes the database URL to the preloading child (not on
/// the command line, where a password would show in `ps`).
const PRELOAD_URL_ENV: &str = "UNICITY_BENCH_PRELOAD_URL";

fn main() -> ExitCode {
    // As the server does: its figures are the server's.
    if let Err(error) = unicity::memory::small_pages_only() {
        eprintln!("unicity-bench: transparent huge pages left to the host's setting: {error}");
    }
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .thread_name(work::CLIENT_THREAD)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            note!("unicity-bench: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = if cli.server_child {
        server::child(cli.postgres_writers)
    } else if cli.preload_child {
        runtime.block_on(preload_child(cli))
    } else {
        runtime.block_on(bench(cli))
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            note!("unicity-bench: FAILED: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Creates the fresh database, runs, and removes the database whatever
/// happened (unless `--keep-database`).
async fn bench(cli: Cli) -> anyhow::Result<()> {
    if cli.requests == 0 || cli.clients == 0 {
        bail!("--requests and --clients must be at least 1");
    }
    let location = match cli.backend {
        Backend::Sqlite => {
            if cli.database_url.is_some() {
                bail!(
                    "--database-url is for --backend postgres; SQLite always uses a fresh file (see --sqlite-dir)"
                );
            }
            cli.sqlite_dir.as_ref().map(|d| d.display().to_string())
        }
        Backend::Postgres => cli.database_url.clone(),
    };
    if let Some(dir) = &cli.fixtures {
        return fixtures::run(cli.backend, location.as_deref(), dir, cli.json_only).await;
    }
    let fresh = Fresh::create(cli.backend, location.as_deref()).await?;
    let result = run(&cli, &fresh).await;
    if cli.keep_database {
        note!("unicity-bench: database kept: {}", fresh.describe());
    } else if let Err(error) = fresh.cleanup().await {
        note!("unicity-bench: cleanup failed: {error:#}");
    }
    result
}

async fn run(cli: &Cli, fresh: &Fresh) -> anyhow::Result<()> {
    note!("unicity-bench: database {}", fresh.describe());
    let base_url = server::start(&fresh.url, cli.postgres_writers)?;
    note!("unicity-bench: Unicity listening on {base_url}");
    if cli.processes > 1 && cli.backend != Backend::Postgres {
        bail!("--processes is for --backend postgres: SQLite has one writer per database");
    }
    let others = server::Others::start(&fresh.url, cli.processes - 1, cli.postgres_writers)?;
    let mut base_urls = vec![base_url.clone()];
    base_urls.extend(others.base_urls.iter().cloned());
    if cli.flood > 0 {
        return run_flood(cli, fresh, &base_url).await;
    }

    let plan = Arc::new(Plan::new(cli.seed, cli.requests, 2 * cli.clients));
    let body_bytes_mean = plan.mean_body_bytes();

    let mut peak_rss_preload_mb = None;
    let history_load = if cli.history > 0 {
        note!("unicity-bench: preloading {} deliveries", cli.history);
        let h = preload_history(&fresh.url, cli.history, cli.seed).await?;
        let load_s = h.elapsed_s;
        note!(
            "unicity-bench: history preloaded in {load_s:.1} s ({} read back through the store)",
            h.verified.len()
        );
        peak_rss_preload_mb = h.peak_rss_mb;
        if cli.queue_cases > 0 {
            note!(
                "unicity-bench: opening {} cases and timing the queue and search",
                cli.queue_cases
            );
            let timings = queue::run(&fresh.url, cli.queue_cases).await?;
            for t in &timings {
                println!(
                    "queue, {} deliveries, {} open cases: {:<27} median {:>7.2} ms, max {:>7.2} ms",
                    h.deliveries, cli.queue_cases, t.query, t.median_ms, t.max_ms
                );
            }
            println!("{}", serde_json::json!({ "queue": timings }));
            return Ok(());
        }
        Some(report::History {
            deliveries: h.deliveries,
            retries: h.retries,
            bodies: h.bodies,
            load_s,
            per_s: h.deliveries as f64 / load_s.max(1e-9),
        })
    } else {
        None
    };
    let peak_rss_scope = if report::reset_peak_rss() {
        "run"
    } else {
        "process"
    };

    // The baseline runs in two halves around the Unicity phase, so that a
    // drift of the disk's speed during the run weighs on both sides alike.
    let half = cli.requests / 2;
    note!(
        "unicity-bench: baseline (1/2): {half} single-row insert commits of {body_bytes_mean} B, {} writers",
        cli.clients
    );
    let meter = work::Meter {
        url: &fresh.url,
        backend: cli.backend,
        others: others.pids(),
    };
    let (mut baseline_work, mut unicity_work) = (work::Phase::default(), work::Phase::default());
    let baseline_half = |rows: std::ops::Range<usize>| async move {
        let outcome = baseline::run(&fresh.url, rows, cli.clients, body_bytes_mean, cli.seed)
            .await
            .context("baseline failed")?;
        let inserted = outcome.inserted;
        Ok((outcome, inserted))
    };
    let (first, io_first) = meter
        .measure(Side::Baseline, &mut baseline_work, baseline_half(0..half))
        .await?;

    note!(
        "unicity-bench: sending {} deliveries from {} clients",
        cli.requests,
        cli.clients
    );
    let load = async {
        let run = load::run(&base_urls, plan.clone(), cli.clients, None);
        let (sent, lag) = read_model::during(&fresh.url, run).await?;
        let ok = sent.ok;
        Ok(((sent, lag), ok))
    };
    let ((sent, read_model), io_sent) = meter
        .measure(Side::Unicity, &mut unicity_work, load)
        .await?;
    let unicity_io = IoPerOp::between(io_sent.0, io_sent.1, sent.ok);
    let failures = sent.failures();
    let unicity = Phase::measure(sent.latencies_ns.clone(), sent.elapsed, unicity_io);

    note!(
        "unicity-bench: baseline (2/2): {} single-row insert commits",
        cli.requests - half
    );
    let (second, io_second) = meter
        .measure(
            Side::Baseline,
            &mut baseline_work,
            baseline_half(half..cli.requests),
        )
        .await?;
    let baseline_halves = [first.per_s(), second.per_s()];
    let inserted = first.inserted + second.inserted;
    let baseline_io = match (
        IoPerOp::between(io_first.0, io_first.1, 1),
        IoPerOp::between(io_second.0, io_second.1, 1),
    ) {
        (Some(a), Some(b)) => Some(IoPerOp {
            disk_kib: (a.disk_kib + b.disk_kib) / inserted.max(1) as f64,
            write_calls: (a.write_calls + b.write_calls) / inserted.max(1) as f64,
        }),
        _ => None,
    };
    let mut latencies = first.latencies_ns;
    latencies.extend(second.latencies_ns);
    let baseline = Phase::measure(latencies, first.elapsed + second.elapsed, baseline_io);
    let peak_rss_mb = report::proc_status_mb("VmHWM").unwrap_or(0.0);

    let db = unicity::store::connect(&fresh.url).await?;
    let journaled = checks::check_journaled(&db, sent.ok + cli.history as u64).await;
    let exactly_once = checks::check_exactly_once(&db).await;
    let _ = db.close().await;
    let (journaled, exactly_once) = (journaled?, exactly_once?);

    let ratio = if baseline.per_s > 0.0 {
        unicity.per_s / baseline.per_s
    } else {
        0.0
    };
    let report = Report {
        bench: "unicity-bench",
        version: env!("CARGO_PKG_VERSION"),
        at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        backend: cli.backend,
        database: fresh.describe(),
        requests: cli.requests,
        clients: cli.clients,
        processes: cli.processes,
        history: cli.history,
        seed: cli.seed,
        body_bytes_mean,
        targets: Report::targets(cli.backend, ratio, unicity.p99_ms, peak_rss_mb),
        unicity,
        baseline,
        baseline_halves_per_s: baseline_halves,
        ratio,
        peak_rss_mb,
        peak_rss_scope,
        peak_rss_preload_mb,
        history_load,
        mix: plan.mix.clone(),
        planned_effects: plan.mix.planned_effects(),
        decisions: sent.decisions.clone(),
        ok: sent.ok,
        failures,
        refused: sent.refused.clone(),
        missing_decision: sent.missing_decision,
        transport_errors: sent.transport_errors,
        journaled,
        exactly_once,
        read_model,
        work: report::Work {
            unicity: unicity_work.per_op(true),
            baseline: baseline_work.per_op(false),
        },
    };
    if !cli.json_only {
        emit(&report.table())?;
    }
    emit(&report.json_line()?)?;
    if let Some(candidate) = &cli.shadow_candidate {
        shadow::run(cli.sqlite_dir.as_deref(), fresh, candidate).await?;
    }

    if failures > 0 {
        for sample in &sent.samples {
            note!("  {sample}");
        }
        bail!(
            "{failures} of {} deliveries failed: refused {:?}, missing decision {}, transport errors {}",
            cli.requests,
            sent.refused,
            sent.missing_decision,
            sent.transport_errors
        );
    }
    Ok(())
}

/// Replays the run's journal with `candidate` and reports how fast.
async fn run_flood(cli: &Cli, fresh: &Fresh, base_url: &str) -> anyhow::Result<()> {
    let report = flood::run(flood::FloodArgs {
        backend: cli.backend,
        url: &fresh.url,
        base_url,
        requests: cli.requests,
        clients: cli.clients,
        seed: cli.seed,
        flood: cli.flood,
        flood_clients: cli.flood_clients.max(1),
        header_bytes: cli.flood_header_bytes,
        max_secs: cli.flood_secs,
        rate: cli.flood_rate,
    })
    .await?;
    if !cli.json_only {
        emit(&report.table())?;
    }
    emit(&serde_json::to_string(&report)?)?;
    if report.valid_failures > 0 {
        bail!("{} valid deliveries failed", report.valid_failures);
    }
    Ok(())
}

/// Runs the preload in a child process (this same program, `--preload-child`).
async fn preload_history(
    url: &str,
    history: usize,
    seed: u64,
) -> anyhow::Result<history::HistoryOutcome> {
    let exe = std::env::current_exe().context("cannot find the benchmark's own executable")?;
    let mut child = Command::new(exe);
    child
        .args(["--preload-child", "--history", &history.to_string()])
        .args(["--seed", &seed.to_string()])
        .env(PRELOAD_URL_ENV, url)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit());
    let output = tokio::task::spawn_blocking(move || child.output())
        .await
        .context("the preload waiter panicked")?
        .context("cannot run the preload child")?;
    if !output.status.success() {
        bail!("history preload failed ({})", output.status);
    }
    serde_json::from_slice(&output.stdout).context("unreadable preload outcome")
}

/// The child side of `preload_history`.
async fn preload_child(cli: Cli) -> anyhow::Result<()> {
    let url = std::env::var(PRELOAD_URL_ENV)
        .with_context(|| format!("{PRELOAD_URL_ENV} is not set (internal option)"))?;
    let mut outcome = history::preload(&url, cli.history, cli.seed).await?;
    outcome.peak_rss_mb = report::proc_status_mb("VmHWM");
    emit(&serde_json::to_string(&outcome)?)
}

/// Writes a line to stdout; a closed pipe is an error, not a panic, so the
/// database is still removed.
fn emit(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")
        .and_then(|()| out.flush())
        .context("cannot write to stdout")
}
