//! The storage engine's own speed, measured in the same run: `n` single-row
//! `INSERT … ON CONFLICT DO NOTHING` autocommits of a row the size of an
//! average delivery body, into a table with a unique (SHA-256-like, random)
//! key, from `clients` concurrent tasks, through `unicity::store::connect` so
//! the pool and durability pragmas are exactly Unicity's. `rows` is a range
//! of row numbers so the run can be split around the Unicity phase (keys stay
//! unique across the parts).

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement, Value};

use crate::prng::{hash3, mix};

/// The baseline's table, apart from Unicity's.
pub const TABLE: &str = "bench_baseline";

/// What the baseline measured.
#[derive(Debug, Default)]
pub struct BaselineOutcome {
    pub elapsed: Duration,
    pub latencies_ns: Vec<u64>,
    pub inserted: u64,
}

impl BaselineOutcome {
    pub fn per_s(&self) -> f64 {
        self.latencies_ns.len() as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Creates `bench_baseline` and fills it as described above.
pub async fn run(
    database_url: &str,
    rows: Range<usize>,
    clients: usize,
    row_bytes: usize,
    seed: u64,
) -> anyhow::Result<BaselineOutcome> {
    let db = unicity::store::connect(database_url).await?;
    let backend = db.get_database_backend();
    let ddl = match backend {
        DbBackend::Postgres => {
            "CREATE TABLE IF NOT EXISTS bench_baseline (k TEXT PRIMARY KEY, payload BYTEA NOT NULL)"
        }
        _ => {
            "CREATE TABLE IF NOT EXISTS bench_baseline (k TEXT PRIMARY KEY, payload BLOB NOT NULL)"
        }
    };
    db.execute_unprepared(ddl)
        .await
        .context("cannot create bench_baseline")?;
    let sql = match backend {
        DbBackend::Postgres => {
            "INSERT INTO bench_baseline (k, payload) VALUES ($1, $2) ON CONFLICT DO NOTHING"
        }
        _ => "INSERT INTO bench_baseline (k, payload) VALUES (?, ?) ON CONFLICT DO NOTHING",
    };
    let payload: Arc<Vec<u8>> = Arc::new(
        (0..row_bytes as u64)
            .map(|i| b'a' + (mix(i ^ seed) % 26) as u8)
            .collect(),
    );

    let n = rows.end;
    let next = Arc::new(AtomicUsize::new(rows.start));
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(clients);
    for _ in 0..clients {
        let (db, next, payload) = (db.clone(), next.clone(), payload.clone());
        tasks.push(tokio::spawn(async move {
            writer(&db, backend, sql, n, seed, &next, &payload).await
        }));
    }
    let mut outcome = BaselineOutcome::default();
    for task in tasks {
        let (latencies, inserted) = task.await.context("a baseline task panicked")??;
        outcome.latencies_ns.extend(latencies);
        outcome.inserted += inserted;
    }
    outcome.elapsed = started.elapsed();
    let _ = db.close().await;
    Ok(outcome)
}

async fn writer(
    db: &DatabaseConnection,
    backend: DbBackend,
    sql: &str,
    n: usize,
    seed: u64,
    next: &AtomicUsize,
    payload: &[u8],
) -> anyhow::Result<(Vec<u64>, u64)> {
    let mut latencies = Vec::new();
    let mut inserted = 0;
    loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= n {
            return Ok((latencies, inserted));
        }
        let key = format!(
            "{:016x}{:016x}{:016x}{:016x}",
            hash3(seed, i as u64, 1),
            hash3(seed, i as u64, 2),
            hash3(seed, i as u64, 3),
            hash3(seed, i as u64, 4)
        );
        let values: [Value; 2] = [key.into(), payload.to_vec().into()];
        let statement = Statement::from_sql_and_values(backend, sql, values);
        let sent = Instant::now();
        let result = db
            .execute_raw(statement)
            .await
            .with_context(|| format!("baseline insert {i} failed"))?;
        latencies.push(sent.elapsed().as_nanos() as u64);
        inserted += result.rows_affected();
    }
}
