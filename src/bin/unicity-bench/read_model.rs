//! The deliveries read model during the load: how far behind the journal it
//! was (sampled every 100 ms, in milliseconds since the oldest row it did not
//! hold yet was recorded), and how long it took to hold everything once the
//! load stopped. The measured phase ends only then, so the projector's work
//! is charged to Unicity's deliveries, never to the baseline's half after.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

/// How often the lag is sampled.
const EVERY: Duration = Duration::from_millis(100);
/// How long catching up may take before the run fails.
const CATCH_UP_WITHIN: Duration = Duration::from_secs(120);

#[derive(Debug, Clone, Default, Serialize)]
pub struct ReadModelLag {
    pub samples: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Most journal rows it was behind at a sample.
    pub max_behind_rows: i64,
    /// From the end of the load to the read model holding every row.
    pub catch_up_ms: f64,
}

/// Runs `work` while sampling the read model's lag on the database at `url`,
/// then waits for it to catch up.
pub async fn during<T>(
    url: &str,
    work: impl Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<(T, ReadModelLag)> {
    let db = unicity::store::connect(url).await?;
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (db, stop) = (db.clone(), stop.clone());
        tokio::spawn(async move {
            let mut samples: Vec<(f64, i64)> = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                if let Ok(lag) = unicity::store::projector::lag(&db).await {
                    samples.push((age_ms(&lag), lag.rows));
                }
                tokio::time::sleep(EVERY).await;
            }
            samples
        })
    };
    let value = work.await;
    stop.store(true, Ordering::Relaxed);
    let samples = sampler.await.unwrap_or_default();
    let value = value?;
    let ended = Instant::now();
    loop {
        let lag = unicity::store::projector::lag(&db).await?;
        if lag.rows <= 0 {
            break;
        }
        anyhow::ensure!(
            ended.elapsed() < CATCH_UP_WITHIN,
            "the read model is still {} journal rows behind {} s after the load",
            lag.rows,
            CATCH_UP_WITHIN.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let catch_up_ms = ended.elapsed().as_secs_f64() * 1000.0;
    let _ = db.close().await;
    let mut ages: Vec<f64> = samples.iter().map(|(age, _)| *age).collect();
    ages.sort_by(f64::total_cmp);
    let at = |q: f64| {
        ages.get(((ages.len() as f64 * q).ceil() as usize).saturating_sub(1))
            .copied()
            .unwrap_or(0.0)
    };
    Ok((
        value,
        ReadModelLag {
            samples: ages.len(),
            p50_ms: at(0.50),
            p99_ms: at(0.99),
            max_ms: ages.last().copied().unwrap_or(0.0),
            max_behind_rows: samples.iter().map(|(_, rows)| *rows).max().unwrap_or(0),
            catch_up_ms,
        },
    ))
}

fn age_ms(lag: &unicity::store::projector::Lag) -> f64 {
    match lag.since {
        Some(since) if lag.rows > 0 => {
            (chrono::Utc::now() - since)
                .num_microseconds()
                .unwrap_or(0)
                .max(0) as f64
                / 1000.0
        }
        _ => 0.0,
    }
}
