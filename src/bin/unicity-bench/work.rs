//! What one delivery costs beside its throughput, and what one baseline
//! insert costs, counted the same way: CPU (this process without its HTTP
//! clients, the clients, the PostgreSQL server's processes), rows written per
//! table, index entries, journal rows and bytes, bytes written to disk
//! (SQLite: this process's `write_bytes`, WAL and checkpoints) or to the WAL
//! (PostgreSQL: `pg_current_wal_lsn` moved), and database growth.
//!
//! Database counters are read outside the timed phases (`Tables::read`);
//! CPU counters right at their edges (`Cpu::now`), so that the queries that
//! count rows are not charged to anyone.

use std::collections::BTreeMap;

use anyhow::Context;
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};
use serde::Serialize;

/// The bench's own runtime names its threads so: the HTTP clients in the
/// Unicity phase, the baseline's inserting tasks in the baseline's.
pub const CLIENT_THREAD: &str = "bench-client";

/// `/proc` reports CPU times in USER_HZ ticks, 100 per second on Linux.
const TICKS_PER_S: f64 = 100.0;

/// CPU seconds consumed so far.
#[derive(Debug, Clone, Default)]
pub struct Cpu {
    /// The same, by kind of thread (its name without a trailing number).
    by_thread: BTreeMap<String, f64>,
    /// Threads of this process other than the clients' (the server, its
    /// writers, its database driver's threads).
    server_s: f64,
    /// The bench's client threads.
    clients_s: f64,
    /// Every PostgreSQL process, exited children included (PostgreSQL only).
    database_s: Option<f64>,
}

impl Cpu {
    /// `others`: the pids of the other Unicity processes the run started
    /// (`--processes`), counted with this process's server threads.
    pub fn now(backend: crate::database::Backend, others: &[u32]) -> Self {
        let (mut server_s, mut clients_s) = (0.0, 0.0);
        let mut by_thread = BTreeMap::new();
        if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
            for task in tasks.flatten() {
                let Some((comm, used)) = stat(&task.path().join("stat")) else {
                    continue;
                };
                let kind = comm.trim_end_matches(|c: char| c.is_ascii_digit() || c == '-');
                *by_thread.entry(kind.to_owned()).or_insert(0.0) += used.own;
                if comm.starts_with(CLIENT_THREAD) {
                    clients_s += used.own;
                } else {
                    server_s += used.own;
                }
            }
        }
        for pid in others {
            if let Some((_, used)) = stat(std::path::Path::new(&format!("/proc/{pid}/stat"))) {
                server_s += used.own;
                *by_thread.entry("other processes".to_owned()).or_insert(0.0) += used.own;
            }
        }
        let database_s = (backend == crate::database::Backend::Postgres).then(postgres_cpu_s);
        Self {
            by_thread,
            server_s,
            clients_s,
            database_s,
        }
    }
}

/// CPU a process or thread used itself, and what its waited-for children did.
struct Used {
    own: f64,
    children: f64,
}

/// `comm` and CPU seconds from a `/proc/…/stat` file.
fn stat(path: &std::path::Path) -> Option<(String, Used)> {
    let text = std::fs::read_to_string(path).ok()?;
    // `comm` is in parentheses and may hold spaces or parentheses itself.
    let (head, rest) = text.rsplit_once(')')?;
    let comm = head.split_once('(')?.1.to_owned();
    // After `comm`: state is field 3; utime, stime, cutime, cstime are 14–17.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let tick = |n: usize| -> f64 {
        fields
            .get(n - 3)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
            / TICKS_PER_S
    };
    Some((
        comm,
        Used {
            own: tick(14) + tick(15),
            children: tick(16) + tick(17),
        },
    ))
}

/// Every `postgres` process's CPU, plus what the postmaster's exited
/// children (backends that closed, autovacuum workers) left in its counters.
fn postgres_cpu_s() -> f64 {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    let mut total = 0.0;
    for entry in procs.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Some((comm, used)) = stat(&entry.path().join("stat")) else {
            continue;
        };
        if comm == "postgres" {
            total += used.own + used.children;
        }
    }
    total
}

/// The tables written after the commit, from the journal, not before the 2xx.
const READ_MODEL: [&str; 3] = ["deliveries", "effect_horizons", "projector_checkpoints"];

/// What the database holds, as far as cost goes.
#[derive(Debug, Clone, Default)]
pub struct Tables {
    rows: BTreeMap<String, i64>,
    /// Entries of each index (a partial index: the rows it covers; SQLite's
    /// automatic index of a TEXT primary key or UNIQUE column included).
    index_entries: BTreeMap<String, i64>,
    /// Rows and index entries of the tables the read model's projector
    /// writes after the commit (`READ_MODEL`), counted in the above too.
    read_model_rows: i64,
    read_model_index_entries: i64,
    journal_rows: i64,
    journal_bytes: i64,
    database_bytes: i64,
    /// PostgreSQL: the WAL position, in bytes since the cluster began.
    wal_lsn: Option<i64>,
}

impl Tables {
    /// Reads the counters of every table but `except`'s of the other phase
    /// (`bench_baseline` in the Unicity phase, everything else in the
    /// baseline's), so each side counts only its own.
    pub async fn read(db: &DatabaseConnection, only: Side) -> anyhow::Result<Self> {
        let backend = db.get_database_backend();
        let mut out = Self::default();
        for (table, indexes) in schema(db).await? {
            if !only.owns(&table) {
                continue;
            }
            let read_model = READ_MODEL.contains(&table.as_str());
            let rows = count(db, &format!(r#"SELECT COUNT(*) FROM "{table}""#)).await?;
            out.rows.insert(table.clone(), rows);
            if read_model {
                out.read_model_rows += rows;
            }
            for (index, predicate) in indexes {
                let sql = match predicate {
                    Some(p) => format!(r#"SELECT COUNT(*) FROM "{table}" WHERE {p}"#),
                    None => format!(r#"SELECT COUNT(*) FROM "{table}""#),
                };
                let entries = count(db, &sql).await?;
                if read_model {
                    out.read_model_index_entries += entries;
                }
                out.index_entries.insert(index, entries);
            }
        }
        if only == Side::Unicity {
            let bytes = match backend {
                DbBackend::Postgres => "COALESCE(SUM(octet_length(data::text)), 0)::bigint",
                _ => "COALESCE(SUM(LENGTH(CAST(data AS BLOB))), 0)",
            };
            out.journal_rows = count(db, "SELECT COUNT(*) FROM journal").await?;
            out.journal_bytes = count(db, &format!("SELECT {bytes} FROM journal")).await?;
        }
        out.database_bytes = match backend {
            DbBackend::Postgres => count(db, "SELECT pg_database_size(current_database())").await?,
            _ => {
                count(
                    db,
                    "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()",
                )
                .await?
            }
        };
        if backend == DbBackend::Postgres {
            out.wal_lsn = Some(
                count(
                    db,
                    "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint",
                )
                .await?,
            );
        }
        Ok(out)
    }
}

/// Whose tables a reading counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Unicity,
    Baseline,
}

impl Side {
    fn owns(self, table: &str) -> bool {
        let baseline = table == crate::baseline::TABLE;
        let bookkeeping = table == "seaql_migrations" || table.starts_with("sqlite_");
        match self {
            Self::Unicity => !baseline && !bookkeeping,
            Self::Baseline => baseline,
        }
    }
}

/// Every table with its indexes and their predicates (`None`: every row).
async fn schema(
    db: &DatabaseConnection,
) -> anyhow::Result<BTreeMap<String, Vec<(String, Option<String>)>>> {
    let mut tables: BTreeMap<String, Vec<(String, Option<String>)>> = BTreeMap::new();
    match db.get_database_backend() {
        DbBackend::Postgres => {
            for row in query(
                db,
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()",
            )
            .await?
            {
                tables
                    .entry(row.try_get_by_index::<String>(0)?)
                    .or_default();
            }
            let sql = "SELECT i.relname, t.relname, pg_get_expr(x.indpred, x.indrelid)
                       FROM pg_index x
                       JOIN pg_class i ON i.oid = x.indexrelid
                       JOIN pg_class t ON t.oid = x.indrelid
                       JOIN pg_namespace n ON n.oid = t.relnamespace
                       WHERE n.nspname = current_schema()";
            for row in query(db, sql).await? {
                let index = row.try_get_by_index::<String>(0)?;
                let table = row.try_get_by_index::<String>(1)?;
                let predicate = row.try_get_by_index::<Option<String>>(2)?;
                tables.entry(table).or_default().push((index, predicate));
            }
        }
        _ => {
            let sql = "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE type IN ('table', 'index')";
            for row in query(db, sql).await? {
                let kind = row.try_get_by_index::<String>(0)?;
                let name = row.try_get_by_index::<String>(1)?;
                let table = row.try_get_by_index::<String>(2)?;
                let entry = tables.entry(table).or_default();
                if kind == "index" {
                    // An automatic index has no SQL; a partial one ends in WHERE.
                    let sql = row.try_get_by_index::<Option<String>>(3)?;
                    let predicate = sql
                        .as_deref()
                        .and_then(|s| s.rsplit_once(" WHERE "))
                        .map(|(_, p)| p.to_owned());
                    entry.push((name, predicate));
                }
            }
        }
    }
    Ok(tables)
}

/// Opens the database for one reading: a single connection with a small
/// page cache, closed after, so that counting adds nothing to the peak RSS
/// the run reports, nor keeps pages of its own between phases.
async fn counting(url: &str) -> anyhow::Result<DatabaseConnection> {
    let mut options = sea_orm::ConnectOptions::new(url.to_owned());
    options
        .max_connections(1)
        .sqlx_logging(false)
        .map_sqlx_sqlite_opts(|o| o.pragma("cache_size", "-1024"));
    sea_orm::Database::connect(options)
        .await
        .context("cannot open the database to count")
}

impl Tables {
    /// `read` on a connection of its own.
    pub async fn read_at(url: &str, only: Side) -> anyhow::Result<Self> {
        let db = counting(url).await?;
        let read = Self::read(&db, only).await;
        let _ = db.close().await;
        read
    }
}

/// Where a measured phase runs and what it counts.
pub struct Meter<'a> {
    pub url: &'a str,
    pub backend: crate::database::Backend,
    /// Other Unicity processes of the run (`--processes`).
    pub others: Vec<u32>,
}

impl Meter<'_> {
    /// Runs `phase` (returning its result and how many operations it did),
    /// adding its cost to `into`: `side`'s tables read before and after it,
    /// CPU and this process's I/O counters at its very edges.
    pub async fn measure<T>(
        &self,
        side: Side,
        into: &mut Phase,
        phase: impl std::future::Future<Output = anyhow::Result<(T, u64)>>,
    ) -> anyhow::Result<(T, Io)> {
        // PostgreSQL writes in its own processes: this one's I/O says nothing.
        let sqlite = self.backend == crate::database::Backend::Sqlite;
        let io_now = || sqlite.then(crate::io::IoCounters::now).flatten();
        let tables = Tables::read_at(self.url, side).await?;
        let cpu = Cpu::now(self.backend, &self.others);
        let io = io_now();
        let (out, operations) = phase.await?;
        let io = (io, io_now());
        let cpu = (cpu, Cpu::now(self.backend, &self.others));
        into.part(
            operations,
            cpu,
            (tables, Tables::read_at(self.url, side).await?),
        );
        Ok((out, io))
    }
}

/// This process's I/O counters before and after a phase.
pub type Io = (Option<crate::io::IoCounters>, Option<crate::io::IoCounters>);

/// One phase's cost, per operation.
#[derive(Debug, Clone, Serialize)]
pub struct PerOp {
    pub operations: u64,
    /// This process without its client threads (Unicity phase), or the whole
    /// process (baseline phase: its clients are the inserting tasks).
    pub cpu_ms: f64,
    /// The HTTP clients' CPU (Unicity phase only).
    pub clients_cpu_ms: Option<f64>,
    /// The PostgreSQL server's CPU.
    pub database_cpu_ms: Option<f64>,
    /// This process's CPU by kind of thread (`actix-rt|system`: the HTTP
    /// workers; `unicity-writer`: the group-commit writers; `sqlx-sqlite-wor`:
    /// SQLite's connection threads, where statements run).
    pub cpu_ms_by_thread: BTreeMap<String, f64>,
    pub rows: f64,
    pub rows_by_table: BTreeMap<String, f64>,
    pub index_entries: f64,
    pub index_entries_by_index: BTreeMap<String, f64>,
    /// Rows and index entries written before the 2xx: all of the above but
    /// the read model's, which its projector writes after the commit.
    pub hot_path_rows: f64,
    pub hot_path_index_entries: f64,
    pub journal_rows: f64,
    pub journal_bytes: f64,
    /// PostgreSQL: WAL generated.
    pub wal_bytes: Option<f64>,
    pub database_growth_bytes: f64,
}

/// A phase's counters, added up over its parts (the baseline's two halves).
#[derive(Debug, Default)]
pub struct Phase {
    operations: u64,
    cpu: Vec<(Cpu, Cpu)>,
    tables: Vec<(Tables, Tables)>,
}

impl Phase {
    pub fn part(&mut self, operations: u64, cpu: (Cpu, Cpu), tables: (Tables, Tables)) {
        self.operations += operations;
        self.cpu.push(cpu);
        self.tables.push(tables);
    }

    /// Per operation; `with_clients`: the clients are counted apart.
    pub fn per_op(&self, with_clients: bool) -> PerOp {
        let n = self.operations.max(1) as f64;
        let cpu = |f: fn(&Cpu) -> f64| -> f64 {
            self.cpu.iter().map(|(a, b)| f(b) - f(a)).sum::<f64>() * 1000.0 / n
        };
        let mut cpu_ms_by_thread: BTreeMap<String, f64> = BTreeMap::new();
        for (a, b) in &self.cpu {
            for (kind, after) in &b.by_thread {
                let before = a.by_thread.get(kind).copied().unwrap_or(0.0);
                *cpu_ms_by_thread.entry(kind.clone()).or_insert(0.0) +=
                    (after - before) * 1000.0 / n;
            }
        }
        cpu_ms_by_thread.retain(|_, ms| *ms >= 0.001);
        let server = cpu(|c| c.server_s);
        let clients = cpu(|c| c.clients_s);
        let database = self
            .cpu
            .iter()
            .all(|(a, _)| a.database_s.is_some())
            .then(|| cpu(|c| c.database_s.unwrap_or(0.0)));
        let sum_map = |f: fn(&Tables) -> &BTreeMap<String, i64>| -> BTreeMap<String, f64> {
            let mut out = BTreeMap::new();
            for (a, b) in &self.tables {
                for (name, after) in f(b) {
                    let before = f(a).get(name).copied().unwrap_or(0);
                    *out.entry(name.clone()).or_insert(0.0) += (after - before) as f64 / n;
                }
            }
            out.retain(|_, v| *v != 0.0);
            out
        };
        let diff = |f: fn(&Tables) -> i64| -> f64 {
            self.tables.iter().map(|(a, b)| f(b) - f(a)).sum::<i64>() as f64 / n
        };
        let rows_by_table = sum_map(|t| &t.rows);
        let index_entries_by_index = sum_map(|t| &t.index_entries);
        let wal = self
            .tables
            .iter()
            .all(|(a, _)| a.wal_lsn.is_some())
            .then(|| diff(|t| t.wal_lsn.unwrap_or(0)));
        PerOp {
            operations: self.operations,
            cpu_ms: if with_clients {
                server
            } else {
                server + clients
            },
            clients_cpu_ms: with_clients.then_some(clients),
            database_cpu_ms: database,
            cpu_ms_by_thread,
            rows: rows_by_table.values().sum(),
            hot_path_rows: rows_by_table.values().sum::<f64>() - diff(|t| t.read_model_rows),
            rows_by_table,
            index_entries: index_entries_by_index.values().sum(),
            hot_path_index_entries: index_entries_by_index.values().sum::<f64>()
                - diff(|t| t.read_model_index_entries),
            index_entries_by_index,
            journal_rows: diff(|t| t.journal_rows),
            journal_bytes: diff(|t| t.journal_bytes),
            wal_bytes: wal,
            database_growth_bytes: diff(|t| t.database_bytes),
        }
    }
}

async fn query(db: &DatabaseConnection, sql: &str) -> anyhow::Result<Vec<sea_orm::QueryResult>> {
    db.query_all_raw(Statement::from_string(
        db.get_database_backend(),
        sql.to_owned(),
    ))
    .await
    .with_context(|| format!("query failed: {sql}"))
}

async fn count(db: &DatabaseConnection, sql: &str) -> anyhow::Result<i64> {
    let rows = query(db, sql).await?;
    let row = rows.first().with_context(|| format!("no row: {sql}"))?;
    Ok(row.try_get_by_index::<i64>(0)?)
}
