//! What the dashboard and the collision breakers count, over the
//! `deliveries` and `cases` projections. Every delivery query is bounded by
//! a time window read as a range of the primary key (`id_range`: delivery
//! ids are UUIDv7 of their reception), and grouped in the database: a page never reads the deliveries one by one,
//! however long the journal grows.

use chrono::{DateTime, NaiveDateTime, Utc};
use sea_orm::{ConnectionTrait, DbBackend, DbErr, FromQueryResult, Statement, Value};

/// Deliveries received in one hour (UTC) with one decision, reason,
/// strategy and key strength.
#[derive(Debug, Clone, PartialEq)]
pub struct HourCount {
    pub hour: DateTime<Utc>,
    pub decision: String,
    pub reason: String,
    pub strategy: Option<String>,
    pub strength: String,
    pub deliveries: i64,
}

/// A strategy's deliveries and collisions (same key, discriminating fields
/// that differ) in a window.
#[derive(Debug, Clone, PartialEq, FromQueryResult)]
pub struct CollisionCount {
    pub strategy: String,
    pub deliveries: i64,
    pub collisions: i64,
}

fn placeholder(backend: DbBackend, n: usize) -> String {
    match backend {
        DbBackend::Postgres => format!("${n}"),
        _ => "?".to_owned(),
    }
}

/// Runs `sql`, whose `{since}` (`{d.since}` for a table named `d`) stands
/// for the deliveries received since the window's start.
async fn since<C: ConnectionTrait, T: FromQueryResult>(
    conn: &C,
    sql: &str,
    since: DateTime<Utc>,
) -> Result<Vec<T>, DbErr> {
    let backend = conn.get_database_backend();
    let window = |table: &str| {
        format!(
            "{table}delivery_id >= {} AND {table}received_at >= {}",
            placeholder(backend, 1),
            placeholder(backend, 2)
        )
    };
    let sql = sql
        .replace("{since}", &window(""))
        .replace("{d.since}", &window("d."));
    let values = [super::id_range::made_since(since).into(), since.into()];
    let rows = conn
        .query_all_raw(Statement::from_sql_and_values(backend, sql, values))
        .await?;
    rows.iter()
        .map(|row| T::from_query_result(row, ""))
        .collect()
}

#[derive(FromQueryResult)]
struct HourRow {
    hour: String,
    decision: String,
    reason: String,
    strategy: Option<String>,
    strength: String,
    deliveries: i64,
}

/// Deliveries since `since` per hour (UTC), decision, reason, strategy and
/// strength: one range scan, a few hundred groups at most, from which every
/// delivery chart of the dashboard is folded. Undecided ones read `none`;
/// refused ones (a bad signature, too large) are not deliveries to decide
/// and are left out (`unicity_deliveries_refused_total` counts them).
pub async fn per_hour<C: ConnectionTrait>(
    conn: &C,
    since: DateTime<Utc>,
) -> Result<Vec<HourCount>, DbErr> {
    // The hour as `YYYY-MM-DD?HH`: SQLite stores instants as text (UTC).
    let hour = match conn.get_database_backend() {
        DbBackend::Postgres => "to_char(received_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24')",
        _ => "substr(received_at, 1, 13)",
    };
    let sql = format!(
        "SELECT {hour} AS hour, COALESCE(decision, 'none') AS decision, \
         COALESCE(reason, 'none') AS reason, strategy, COALESCE(strength, 'none') AS strength, \
         COUNT(*) AS deliveries FROM deliveries WHERE {{since}} AND status = 'received' \
         GROUP BY 1, 2, 3, 4, 5"
    );
    let rows: Vec<HourRow> = self::since(conn, &sql, since).await?;
    Ok(rows
        .into_iter()
        .filter_map(|r| {
            let text = format!("{}:00", r.hour.replacen(' ', "T", 1));
            let hour = NaiveDateTime::parse_from_str(&text, "%Y-%m-%dT%H:%M").ok()?;
            Some(HourCount {
                hour: hour.and_utc(),
                decision: r.decision,
                reason: r.reason,
                strategy: r.strategy,
                strength: r.strength,
                deliveries: r.deliveries,
            })
        })
        .collect())
}

/// Each strategy's deliveries and collisions since `since`.
pub async fn collisions<C: ConnectionTrait>(
    conn: &C,
    since: DateTime<Utc>,
) -> Result<Vec<CollisionCount>, DbErr> {
    let sql = "SELECT strategy, COUNT(*) AS deliveries, \
         SUM(CASE WHEN reason = 'discriminants_differ' THEN 1 ELSE 0 END) AS collisions \
         FROM deliveries WHERE strategy IS NOT NULL AND {since} GROUP BY strategy";
    self::since(conn, sql, since).await
}

/// Open cases opened before each of `bounds` (newest bound first): the
/// counts of cases at least that old.
pub async fn open_cases_older_than<C: ConnectionTrait>(
    conn: &C,
    bounds: &[DateTime<Utc>],
) -> Result<Vec<i64>, DbErr> {
    let backend = conn.get_database_backend();
    let columns: Vec<String> = (0..bounds.len())
        .map(|i| {
            format!(
                "COALESCE(SUM(CASE WHEN opened_at < {} THEN 1 ELSE 0 END), 0) AS c{i}",
                placeholder(backend, i + 1)
            )
        })
        .collect();
    let sql = format!(
        "SELECT COUNT(*) AS total, {} FROM cases WHERE status = 'open'",
        columns.join(", ")
    );
    let values: Vec<Value> = bounds.iter().map(|b| (*b).into()).collect();
    let row = conn
        .query_one_raw(Statement::from_sql_and_values(backend, sql, values))
        .await?;
    let Some(row) = row else {
        return Ok(vec![0; bounds.len() + 1]);
    };
    let mut counts = vec![row.try_get::<i64>("", "total")?];
    for i in 0..bounds.len() {
        counts.push(row.try_get::<i64>("", &format!("c{i}"))?);
    }
    Ok(counts)
}

/// Cases of one reason, status, resolution and settler, and for open ones
/// their age bucket: the index of the first of `bounds` (oldest first) they
/// were opened before, `bounds.len()` when younger than all, `-1` when
/// resolved.
#[derive(Debug, Clone, PartialEq, FromQueryResult)]
pub struct CaseCount {
    /// `name@version` of the strategy that keyed the case's delivery, empty
    /// without a key.
    pub strategy: String,
    pub reason: String,
    pub status: String,
    pub resolution: String,
    /// `person`, `look-up`, `effect` (settled by its late effect), or empty
    /// while open.
    pub settled_by: String,
    pub age: i32,
    pub cases: i64,
}

/// Every case counted by reason, status, resolution, who settled it and,
/// while open, its age (see `CaseCount`): one grouped read of `cases`.
pub async fn cases_by_state<C: ConnectionTrait>(
    conn: &C,
    bounds: &[DateTime<Utc>],
) -> Result<Vec<CaseCount>, DbErr> {
    let backend = conn.get_database_backend();
    let ages: Vec<String> = bounds
        .iter()
        .enumerate()
        .map(|(i, _)| format!("WHEN opened_at < {} THEN {i}", placeholder(backend, i + 1)))
        .collect();
    let strategy = match backend {
        DbBackend::Postgres => "split_part(business_key, ':', 1)",
        _ => "substr(business_key, 1, instr(business_key, ':') - 1)",
    };
    let sql = format!(
        "SELECT COALESCE({strategy}, '') AS strategy, reason, status, \
         COALESCE(resolution, '') AS resolution, \
         CASE WHEN status = 'open' THEN '' WHEN resolved_by IS NULL THEN 'effect' \
         WHEN resolved_by IN ('look-up', 'reconciliation', 'engine') THEN resolved_by \
         ELSE 'person' END AS settled_by, \
         CAST(CASE WHEN status <> 'open' THEN -1 {} ELSE {} END AS INTEGER) AS age, \
         COUNT(*) AS cases FROM cases GROUP BY 1, 2, 3, 4, 5, 6",
        ages.join(" "),
        bounds.len()
    );
    let values: Vec<Value> = bounds.iter().map(|b| (*b).into()).collect();
    let rows = conn
        .query_all_raw(Statement::from_sql_and_values(backend, sql, values))
        .await?;
    rows.iter()
        .map(|row| CaseCount::from_query_result(row, ""))
        .collect()
}

/// Deliveries received since `since`, per strategy (`none`: unkeyed), by how
/// their decision accounts for an effect: `effect` (processed, its effect in
/// the ledger and not failed), `duplicate` (ignored), `held` (deferred,
/// quarantined or sent to reconciliation: a case or a wait says why) and
/// `undocumented` — a delivery processed with no effect to show for it (the
/// downstream refused it: nothing else says so), or never decided. A
/// batch's own row, which only sums up its items', is left out.
#[derive(Debug, Clone, PartialEq, FromQueryResult)]
pub struct Accounted {
    pub strategy: String,
    pub accounted: String,
    pub deliveries: i64,
}

pub async fn accounted<C: ConnectionTrait>(
    conn: &C,
    since: DateTime<Utc>,
) -> Result<Vec<Accounted>, DbErr> {
    let sql = "SELECT COALESCE(d.strategy, 'none') AS strategy, \
         CASE WHEN d.decision = 'process' AND e.effect_id IS NOT NULL \
         AND e.state <> 'failed' THEN 'effect' \
         WHEN d.decision = 'ignore' THEN 'duplicate' \
         WHEN d.decision IN ('defer', 'quarantine', 'reconcile') THEN 'held' \
         ELSE 'undocumented' END AS accounted, COUNT(*) AS deliveries \
         FROM deliveries d LEFT JOIN effects e ON e.effect_id = d.effect_id \
         WHERE {d.since} \
         AND NOT (d.decision = 'process' AND d.business_key IS NULL) \
         GROUP BY 1, 2";
    self::since(conn, sql, since).await
}
