//! What each strategy version keyed, counted from the projections for the
//! strategies list (`unicity strategies list`, the engineers' page): its
//! deliveries and when it was first and last used, its keys still in the
//! fast index, the effects under its keys, and its open cases. Each is one
//! grouped read of a table, by the `name@version` prefix of the key.

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DbBackend, DbErr, FromQueryResult, Statement};

/// A count per strategy version.
#[derive(Debug, Clone, PartialEq, FromQueryResult)]
pub struct PerStrategy {
    pub strategy: String,
    pub n: i64,
}

/// A strategy version's deliveries, first and last.
#[derive(Debug, Clone, PartialEq, FromQueryResult)]
pub struct Used {
    pub strategy: String,
    pub deliveries: i64,
    pub first_at: DateTime<Utc>,
    pub last_at: DateTime<Utc>,
}

/// The `name@version` prefix of the key column `column`.
fn prefix(backend: DbBackend, column: &str) -> String {
    match backend {
        DbBackend::Postgres => format!("split_part({column}, ':', 1)"),
        _ => format!("substr({column}, 1, instr({column}, ':') - 1)"),
    }
}

async fn all<C: ConnectionTrait, T: FromQueryResult>(
    conn: &C,
    sql: String,
) -> Result<Vec<T>, DbErr> {
    let rows = conn
        .query_all_raw(Statement::from_string(conn.get_database_backend(), sql))
        .await?;
    rows.iter().map(|r| T::from_query_result(r, "")).collect()
}

/// Deliveries per strategy, with the first and last received.
pub async fn used<C: ConnectionTrait>(conn: &C) -> Result<Vec<Used>, DbErr> {
    all(
        conn,
        "SELECT strategy, COUNT(*) AS deliveries, MIN(received_at) AS first_at, \
         MAX(received_at) AS last_at FROM deliveries WHERE strategy IS NOT NULL \
         GROUP BY strategy"
            .to_owned(),
    )
    .await
}

/// Keys in the fast index whose horizon has not passed, per strategy.
pub async fn keys_alive<C: ConnectionTrait>(
    conn: &C,
    now: DateTime<Utc>,
) -> Result<Vec<PerStrategy>, DbErr> {
    let backend = conn.get_database_backend();
    let at = match backend {
        DbBackend::Postgres => "$1",
        _ => "?",
    };
    let sql = format!(
        "SELECT {} AS strategy, COUNT(*) AS n FROM effects WHERE expires_at > {at} GROUP BY 1",
        prefix(backend, "key")
    );
    let rows = conn
        .query_all_raw(Statement::from_sql_and_values(backend, sql, [now.into()]))
        .await?;
    rows.iter()
        .map(|r| PerStrategy::from_query_result(r, ""))
        .collect()
}

/// Effects of the ledger per strategy of their key.
pub async fn effects<C: ConnectionTrait>(conn: &C) -> Result<Vec<PerStrategy>, DbErr> {
    let backend = conn.get_database_backend();
    all(
        conn,
        format!(
            "SELECT {} AS strategy, COUNT(*) AS n FROM effects GROUP BY 1",
            prefix(backend, "key")
        ),
    )
    .await
}

/// Open cases per strategy of their key.
pub async fn open_cases<C: ConnectionTrait>(conn: &C) -> Result<Vec<PerStrategy>, DbErr> {
    let backend = conn.get_database_backend();
    all(
        conn,
        format!(
            "SELECT {} AS strategy, COUNT(*) AS n FROM cases \
             WHERE status = 'open' AND business_key IS NOT NULL GROUP BY 1",
            prefix(backend, "business_key")
        ),
    )
    .await
}

/// Keys of `strategy` (`name@version`) not settled: reserved (an
/// effect in flight, or being applied) or whose outcome is unknown.
pub async fn unsettled<C: ConnectionTrait>(conn: &C, strategy: &str) -> Result<i64, DbErr> {
    let backend = conn.get_database_backend();
    let (low, high) = match backend {
        DbBackend::Postgres => ("$1", "$2"),
        _ => ("?", "?"),
    };
    let sql = format!(
        "SELECT COUNT(*) AS n FROM effects WHERE key >= {low} AND key < {high} \
         AND state IN ('reserved', 'unknown')"
    );
    let row = conn
        .query_one_raw(Statement::from_sql_and_values(
            backend,
            sql,
            [format!("{strategy}:").into(), format!("{strategy};").into()],
        ))
        .await?;
    row.map_or(Ok(0), |r| r.try_get::<i64>("", "n"))
}
