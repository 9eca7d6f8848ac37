//! `--fixtures DIR`: how long the regression fixtures take. Every fixture of
//! DIR is replayed by the library's own check (`services::fixtures::check`,
//! what `unicity fixtures check` runs), each on a fresh database of the
//! chosen backend and the demo configuration, as `tests/api/fixtures.rs`
//! replays `tests/fixtures/`; the run reports the suite's total time, each
//! fixture's replay time (median, slowest) and how many passed. The exit
//! status is non-zero if any fixture is decided otherwise.

use std::path::Path;
use std::time::Instant;

use anyhow::bail;
use serde::Serialize;
use unicity::services::fixtures::{self, Checked, Scratch};

use crate::database::{Backend, Fresh};

/// A fresh benchmark database per replay, dropped after it.
struct Databases<'a> {
    backend: Backend,
    location: Option<&'a str>,
    made: Vec<Fresh>,
}

impl Scratch for Databases<'_> {
    async fn create(&mut self) -> anyhow::Result<String> {
        let fresh = Fresh::create(self.backend, self.location).await?;
        let url = fresh.url.clone();
        self.made.push(fresh);
        Ok(url)
    }

    async fn remove(&mut self, url: &str) -> anyhow::Result<()> {
        match self.made.iter().position(|fresh| fresh.url == url) {
            Some(at) => self.made.swap_remove(at).cleanup().await,
            None => Ok(()),
        }
    }
}

/// One fixture's replay.
#[derive(Debug, Serialize)]
struct Timed {
    file: String,
    ms: f64,
    passed: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    differences: Vec<String>,
}

/// The JSON line: `{"fixtures": {…}}`, the report's fields in their order.
#[derive(Serialize)]
struct Line<'a> {
    fixtures: &'a Report,
}

/// The suite's figures.
#[derive(Debug, Serialize)]
struct Report {
    bench: &'static str,
    version: &'static str,
    at: String,
    backend: Backend,
    dir: String,
    fixtures: usize,
    passed: usize,
    failed: usize,
    /// Wall time of the whole suite: each database made, replayed into and
    /// removed.
    total_s: f64,
    /// The replays' part of it; the rest is making and removing databases.
    replays_s: f64,
    /// Each replay alone: the engine opened and migrated on its empty
    /// database, the deliveries decided, the case resolved.
    replay_median_ms: f64,
    replay_slowest_ms: f64,
    slowest: String,
    each: Vec<Timed>,
}

impl Report {
    fn new(backend: Backend, dir: &Path, checked: &[Checked], total_s: f64) -> Self {
        let mut each: Vec<Timed> = checked
            .iter()
            .map(|one| Timed {
                file: name_of(&one.file),
                ms: one.elapsed.as_secs_f64() * 1e3,
                passed: one.passed(),
                differences: one.differences.clone(),
            })
            .collect();
        each.sort_by(|a, b| b.ms.total_cmp(&a.ms));
        let mut times: Vec<f64> = each.iter().map(|t| t.ms).collect();
        times.sort_by(f64::total_cmp);
        let passed = each.iter().filter(|t| t.passed).count();
        Self {
            bench: "unicity-bench",
            version: env!("CARGO_PKG_VERSION"),
            at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            backend,
            dir: dir.display().to_string(),
            fixtures: each.len(),
            passed,
            failed: each.len() - passed,
            total_s,
            replays_s: times.iter().sum::<f64>() / 1e3,
            replay_median_ms: median(&times),
            replay_slowest_ms: times.last().copied().unwrap_or(0.0),
            slowest: each.first().map(|t| t.file.clone()).unwrap_or_default(),
            each,
        }
    }

    fn table(&self) -> String {
        let backend = match self.backend {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        };
        let mut lines = vec![format!(
            "unicity-bench {} | fixtures of {} | {backend}, a fresh database each",
            self.version, self.dir
        )];
        lines.push(format!(
            "fixtures                   {} replayed: {} passed, {} decided otherwise",
            self.fixtures, self.passed, self.failed
        ));
        lines.push(format!(
            "suite                      {:.2} s in all, {:.2} s of it replaying (the rest: databases made and removed)",
            self.total_s, self.replays_s
        ));
        lines.push(format!(
            "replay per fixture         median {:.0} ms, slowest {:.0} ms ({})",
            self.replay_median_ms, self.replay_slowest_ms, self.slowest
        ));
        for timed in &self.each {
            lines.push(format!(
                "  {:>8.0} ms  {}  {}",
                timed.ms,
                if timed.passed { "ok  " } else { "DIFF" },
                timed.file
            ));
            for difference in &timed.differences {
                lines.push(format!("                   {difference}"));
            }
        }
        lines.join("\n")
    }
}

fn name_of(file: &Path) -> String {
    file.file_name().map_or_else(
        || file.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// The middle of `sorted`, or the mean of its two middles.
fn median(sorted: &[f64]) -> f64 {
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// Replays the fixtures of `dir`; prints the table (unless `json_only`) and
/// the JSON line.
pub async fn run(
    backend: Backend,
    location: Option<&str>,
    dir: &Path,
    json_only: bool,
) -> anyhow::Result<()> {
    let base = unicity::config::FileConfig::read(None)?;
    let mut databases = Databases {
        backend,
        location,
        made: Vec::new(),
    };
    note!("unicity-bench: replaying the fixtures of {}", dir.display());
    let started = Instant::now();
    let checked = fixtures::check(dir, &base, &mut databases, |one| {
        note!(
            "unicity-bench: {} {} in {:.0} ms",
            if one.passed() { "ok  " } else { "DIFF" },
            name_of(&one.file),
            one.elapsed.as_secs_f64() * 1e3
        );
    })
    .await;
    let total_s = started.elapsed().as_secs_f64();
    let report = Report::new(backend, dir, &checked?, total_s);
    if !json_only {
        crate::emit(&report.table())?;
    }
    crate::emit(&serde_json::to_string(&Line { fixtures: &report })?)?;
    if report.fixtures == 0 {
        bail!("no fixture (*.json) in {}", dir.display());
    }
    if report.failed > 0 {
        bail!("{} fixture(s) decided otherwise", report.failed);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_of_an_even_count_is_between_its_middles() {
        assert_eq!(median(&[]), 0.0);
        assert_eq!(median(&[3.0]), 3.0);
        assert_eq!(median(&[1.0, 2.0, 10.0]), 2.0);
        assert_eq!(median(&[1.0, 2.0, 4.0, 10.0]), 3.0);
    }
}
