//! Timing read queries: each asked `RUNS` times, its median and worst
//! reported; the queue's and search's timings share it.

use std::time::Instant;

/// Times each query is asked.
const RUNS: usize = 30;
/// Rows a page of the queue or of search holds.
pub const PAGE: u64 = 50;

/// Median and worst time of one query, in milliseconds.
#[derive(Debug, serde::Serialize)]
pub struct Timing {
    pub query: &'static str,
    pub median_ms: f64,
    pub max_ms: f64,
}

/// Runs `ask` `RUNS` times; each answer must hold at least one row.
pub async fn time<F, Fut>(query: &'static str, ask: F) -> anyhow::Result<Timing>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<usize>>,
{
    let mut ms = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let started = Instant::now();
        let rows = ask().await?;
        ms.push(started.elapsed().as_secs_f64() * 1000.0);
        anyhow::ensure!(rows > 0, "{query}: nothing found");
    }
    Ok(summarise(query, ms))
}

fn summarise(query: &'static str, mut ms: Vec<f64>) -> Timing {
    ms.sort_by(f64::total_cmp);
    Timing {
        query,
        median_ms: ms[ms.len() / 2],
        max_ms: ms[ms.len() - 1],
    }
}
