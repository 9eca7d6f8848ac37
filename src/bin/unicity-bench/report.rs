//! Figures and their presentation: latency percentiles from the sorted
//! per-request durations, peak RSS from `/proc/self/status`, a human table and
//! one JSON line.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use crate::checks::ExactlyOnce;
use crate::database::Backend;
use crate::io::IoPerOp;
use crate::work::PerOp;
use crate::workload::Mix;

/// Issue 5's targets, reported next to the figures (they do not fail the run).
pub const TARGET_RATIO_SQLITE: f64 = 1.0;
pub const TARGET_RATIO_POSTGRES: f64 = 0.6;
pub const TARGET_P99_MS: f64 = 25.0;
pub const TARGET_RSS_MB: f64 = 200.0;

/// Throughput and latency of one measured phase.
#[derive(Debug, Clone, Serialize)]
pub struct Phase {
    pub operations: u64,
    pub elapsed_s: f64,
    pub per_s: f64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// This process's I/O per operation (SQLite only: PostgreSQL writes in
    /// its own processes).
    pub io: Option<IoPerOp>,
}

impl Phase {
    pub fn measure(mut latencies_ns: Vec<u64>, elapsed: Duration, io: Option<IoPerOp>) -> Self {
        latencies_ns.sort_unstable();
        let n = latencies_ns.len();
        let ms = |ns: u64| ns as f64 / 1e6;
        let elapsed_s = elapsed.as_secs_f64();
        Self {
            operations: n as u64,
            elapsed_s,
            per_s: if elapsed_s > 0.0 {
                n as f64 / elapsed_s
            } else {
                0.0
            },
            mean_ms: if n > 0 {
                ms(latencies_ns.iter().sum::<u64>()) / n as f64
            } else {
                0.0
            },
            p50_ms: ms(percentile(&latencies_ns, 50.0)),
            p99_ms: ms(percentile(&latencies_ns, 99.0)),
            max_ms: ms(latencies_ns.last().copied().unwrap_or(0)),
            io,
        }
    }
}

/// Nearest-rank percentile of sorted values (0 when empty).
pub fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// A `kB` field of `/proc/self/status` (`VmHWM`, `VmRSS`), in MB.
pub fn proc_status_mb(field: &str) -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status
        .lines()
        .find(|l| l.starts_with(field) && l[field.len()..].starts_with(':'))?;
    let kb: f64 = line[field.len() + 1..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb / 1024.0)
}

/// Resets the process's peak RSS (`VmHWM`) to its current RSS (Linux ≥ 4.0).
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

#[derive(Debug, Serialize)]
pub struct History {
    pub deliveries: u64,
    pub retries: u64,
    pub bodies: u64,
    pub load_s: f64,
    pub per_s: f64,
}

#[derive(Debug, Serialize)]
pub struct Targets {
    pub ratio_min: f64,
    pub ratio_ok: bool,
    pub p99_max_ms: f64,
    pub p99_ok: bool,
    pub rss_max_mb: f64,
    pub rss_ok: bool,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub bench: &'static str,
    pub version: &'static str,
    pub at: String,
    pub backend: Backend,
    pub database: String,
    pub requests: usize,
    pub clients: usize,
    /// Unicity server processes on the database.
    pub processes: usize,
    pub history: usize,
    pub seed: u64,
    pub body_bytes_mean: usize,
    pub unicity: Phase,
    pub baseline: Phase,
    /// The baseline's two halves (before and after the Unicity phase), inserts/s.
    pub baseline_halves_per_s: [f64; 2],
    /// Unicity deliveries/s over baseline inserts/s.
    pub ratio: f64,
    /// Peak RSS of the whole process (server + clients + baseline) during the
    /// measured phases; `peak_rss_scope` says whether the preload is excluded.
    pub peak_rss_mb: f64,
    pub peak_rss_scope: &'static str,
    pub peak_rss_preload_mb: Option<f64>,
    pub history_load: Option<History>,
    pub mix: Mix,
    pub planned_effects: u64,
    pub decisions: BTreeMap<String, u64>,
    pub ok: u64,
    pub failures: u64,
    pub refused: BTreeMap<String, u64>,
    pub missing_decision: u64,
    pub transport_errors: u64,
    pub journaled: i64,
    pub exactly_once: ExactlyOnce,
    /// The deliveries read model's lag during the load, and its catch-up.
    pub read_model: crate::read_model::ReadModelLag,
    pub targets: Targets,
    /// What each delivery and each baseline insert cost.
    pub work: Work,
}

/// Cost per delivery next to cost per baseline insert.
#[derive(Debug, Serialize)]
pub struct Work {
    pub unicity: PerOp,
    pub baseline: PerOp,
}

impl Work {
    /// The comparison, one line per figure, then the rows and index entries
    /// of each table and index Unicity wrote.
    fn table(&self, out: &mut String) {
        let (u, b) = (&self.unicity, &self.baseline);
        let ms = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.3}"));
        let bytes = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.0}"));
        let _ = writeln!(
            out,
            "{:<44} {:>12} {:>12}",
            "per delivery | per baseline insert", "unicity", "baseline"
        );
        let lines: [(&str, String, String); 11] = [
            (
                "cpu ms, this process (without clients)",
                ms(Some(u.cpu_ms)),
                ms(Some(b.cpu_ms)),
            ),
            (
                "cpu ms, the HTTP clients",
                ms(u.clients_cpu_ms),
                "-".to_owned(),
            ),
            (
                "cpu ms, database server",
                ms(u.database_cpu_ms),
                ms(b.database_cpu_ms),
            ),
            (
                "rows written",
                format!("{:.2}", u.rows),
                format!("{:.2}", b.rows),
            ),
            (
                "index entries",
                format!("{:.2}", u.index_entries),
                format!("{:.2}", b.index_entries),
            ),
            (
                "rows written before the 2xx",
                format!("{:.2}", u.hot_path_rows),
                format!("{:.2}", b.hot_path_rows),
            ),
            (
                "index entries before the 2xx",
                format!("{:.2}", u.hot_path_index_entries),
                format!("{:.2}", b.hot_path_index_entries),
            ),
            (
                "journal rows",
                format!("{:.2}", u.journal_rows),
                "-".to_owned(),
            ),
            (
                "journal bytes",
                format!("{:.0}", u.journal_bytes),
                "-".to_owned(),
            ),
            (
                "WAL bytes (PostgreSQL)",
                bytes(u.wal_bytes),
                bytes(b.wal_bytes),
            ),
            (
                "database growth bytes",
                format!("{:.0}", u.database_growth_bytes),
                format!("{:.0}", b.database_growth_bytes),
            ),
        ];
        for (name, unicity, baseline) in lines {
            let _ = writeln!(out, "  {name:<42} {unicity:>12} {baseline:>12}");
        }
        let listed = |m: &BTreeMap<String, f64>| -> String {
            m.iter()
                .map(|(k, v)| format!("{k} {v:.2}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(out, "  cpu ms by thread: {}", {
            let threads: Vec<String> = u
                .cpu_ms_by_thread
                .iter()
                .map(|(k, v)| format!("{k} {v:.3}"))
                .collect();
            threads.join(", ")
        });
        let _ = writeln!(out, "  rows by table: {}", listed(&u.rows_by_table));
        let _ = writeln!(
            out,
            "  index entries by index: {}",
            listed(&u.index_entries_by_index)
        );
    }
}

impl Report {
    pub fn targets(backend: Backend, ratio: f64, p99_ms: f64, rss_mb: f64) -> Targets {
        let ratio_min = match backend {
            Backend::Sqlite => TARGET_RATIO_SQLITE,
            Backend::Postgres => TARGET_RATIO_POSTGRES,
        };
        Targets {
            ratio_min,
            ratio_ok: ratio >= ratio_min,
            p99_max_ms: TARGET_P99_MS,
            p99_ok: p99_ms <= TARGET_P99_MS,
            rss_max_mb: TARGET_RSS_MB,
            rss_ok: rss_mb <= TARGET_RSS_MB,
        }
    }

    pub fn json_line(&self) -> anyhow::Result<String> {
        Ok(serde_json::to_string(self)?)
    }

    pub fn table(&self) -> String {
        let mut out = String::new();
        let backend = match self.backend {
            Backend::Sqlite => "sqlite (WAL, synchronous=FULL)",
            Backend::Postgres => "postgres (server defaults)",
        };
        let _ = writeln!(
            out,
            "unicity-bench {} | {backend} | {} requests, {} clients, {} process(es), history {}, seed {:#x}, mean body {} B",
            self.version,
            self.requests,
            self.clients,
            self.processes,
            self.history,
            self.seed,
            self.body_bytes_mean
        );
        let _ = writeln!(
            out,
            "{:<26} {:>10} {:>9} {:>9} {:>9} {:>9} {:>8} {:>10} {:>9}",
            "",
            "ops/s",
            "mean ms",
            "p50 ms",
            "p99 ms",
            "max ms",
            "secs",
            "disk KiB/op",
            "writes/op"
        );
        for (name, phase) in [
            ("unicity (deliveries)", &self.unicity),
            ("baseline (insert+commit)", &self.baseline),
        ] {
            let (disk, writes) = match &phase.io {
                Some(io) => (
                    format!("{:.1}", io.disk_kib),
                    format!("{:.1}", io.write_calls),
                ),
                None => ("-".to_owned(), "-".to_owned()),
            };
            let _ = writeln!(
                out,
                "{name:<26} {:>10.0} {:>9.2} {:>9.2} {:>9.2} {:>9.1} {:>8.2} {disk:>11} {writes:>9}",
                phase.per_s,
                phase.mean_ms,
                phase.p50_ms,
                phase.p99_ms,
                phase.max_ms,
                phase.elapsed_s
            );
        }
        let _ = writeln!(
            out,
            "baseline before / after    {:.0} / {:.0} inserts/s",
            self.baseline_halves_per_s[0], self.baseline_halves_per_s[1]
        );
        let t = &self.targets;
        let mark = |ok: bool| if ok { "ok" } else { "MISSED" };
        let _ = writeln!(
            out,
            "ratio unicity/baseline     {:.3}   (target >= {:.1}: {})",
            self.ratio,
            t.ratio_min,
            mark(t.ratio_ok)
        );
        let _ = writeln!(
            out,
            "p99 latency                {:.2} ms (target <= {:.0} ms: {})",
            self.unicity.p99_ms,
            t.p99_max_ms,
            mark(t.p99_ok)
        );
        let _ = writeln!(
            out,
            "peak RSS ({})      {:.1} MB (target <= {:.0} MB: {}){}",
            self.peak_rss_scope,
            self.peak_rss_mb,
            t.rss_max_mb,
            mark(t.rss_ok),
            self.peak_rss_preload_mb
                .map(|mb| format!("; preload child {mb:.1} MB"))
                .unwrap_or_default()
        );
        if let Some(h) = &self.history_load {
            let _ = writeln!(
                out,
                "history preload            {} deliveries ({} retries), {} bodies in {:.1} s ({:.0}/s)",
                h.deliveries, h.retries, h.bodies, h.load_s, h.per_s
            );
        }
        let m = &self.mix;
        let _ = writeln!(
            out,
            "mix                        new {} | repeat {} | retry {} (identical {}, reordered {}, whitespace {}, volatile {})",
            m.new,
            m.repeat,
            m.retries(),
            m.retry_identical,
            m.retry_reordered,
            m.retry_whitespace,
            m.retry_volatile
        );
        let decisions: Vec<String> = self
            .decisions
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        let _ = writeln!(
            out,
            "answers                    2xx {} ({}) | failures {} | journaled {}",
            self.ok,
            decisions.join(", "),
            self.failures,
            self.journaled
        );
        let _ = writeln!(
            out,
            "exactly-once               {} (planned: new events + repeats = {})",
            match self.exactly_once {
                ExactlyOnce::Skipped => "skipped: no effects table yet".to_owned(),
                ExactlyOnce::Held { effects, keys } =>
                    format!("held: {effects} effects on {keys} keys"),
            },
            self.planned_effects
        );
        let lag = &self.read_model;
        let _ = writeln!(
            out,
            "read model lag             p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms ({} rows) over {} samples; caught up {:.0} ms after the load",
            lag.p50_ms, lag.p99_ms, lag.max_ms, lag.max_behind_rows, lag.samples, lag.catch_up_ms
        );
        self.work.table(&mut out);
        out
    }
}
