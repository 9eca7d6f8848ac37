//! What observe mode compares with a legacy handler's log: the effects
//! Unicity recorded for a source's deliveries (by resource and
//! discriminants), its open cases and its collisions.

use sea_orm::{ConnectionTrait, DbBackend, DbErr, FromQueryResult, Statement, Value};

/// An effect recorded for one of the source's deliveries.
#[derive(Debug, Clone, FromQueryResult)]
pub struct Recorded {
    pub effect_type: String,
    pub resource: Option<String>,
    pub discriminants: String,
    pub status: String,
    pub delivery_id: String,
}

/// A delivery of the source left for a person, or decided a collision.
#[derive(Debug, Clone, FromQueryResult)]
pub struct Held {
    pub delivery_id: String,
    pub reason: String,
    /// `name@version` of the strategy that keyed it, whose effect type it
    /// asks for; none when nothing keyed it.
    pub strategy: Option<String>,
}

fn parameter(backend: DbBackend) -> &'static str {
    match backend {
        DbBackend::Postgres => "$1",
        _ => "?",
    }
}

async fn rows<C: ConnectionTrait, T: FromQueryResult>(
    conn: &C,
    sql: String,
    source: &str,
) -> Result<Vec<T>, DbErr> {
    let backend = conn.get_database_backend();
    let value: Value = source.into();
    let rows = conn
        .query_all_raw(Statement::from_sql_and_values(backend, sql, [value]))
        .await?;
    rows.iter().map(|r| T::from_query_result(r, "")).collect()
}

/// Every effect whose first delivery came from `source`.
pub async fn recorded<C: ConnectionTrait>(conn: &C, source: &str) -> Result<Vec<Recorded>, DbErr> {
    let backend = conn.get_database_backend();
    let discriminants = match backend {
        DbBackend::Postgres => "e.discriminants::text",
        _ => "e.discriminants",
    };
    let sql = format!(
        "SELECT e.effect_type AS effect_type, d.resource AS resource, {discriminants} AS discriminants, e.state AS status, \
         d.delivery_id AS delivery_id FROM effects e \
         JOIN deliveries d ON d.delivery_id = e.first_delivery_id WHERE d.source = {}",
        parameter(backend)
    );
    rows(conn, sql, source).await
}

/// The source's deliveries whose case is open.
pub async fn for_a_person<C: ConnectionTrait>(conn: &C, source: &str) -> Result<Vec<Held>, DbErr> {
    let sql = format!(
        "SELECT d.delivery_id AS delivery_id, c.reason AS reason, d.strategy AS strategy FROM cases c \
         JOIN deliveries d ON d.delivery_id = c.delivery_id \
         WHERE c.status = 'open' AND d.source = {} ORDER BY c.opened_at",
        parameter(conn.get_database_backend())
    );
    rows(conn, sql, source).await
}

/// The source's deliveries decided a collision.
pub async fn collisions<C: ConnectionTrait>(conn: &C, source: &str) -> Result<Vec<Held>, DbErr> {
    let sql = format!(
        "SELECT delivery_id, reason, strategy FROM deliveries WHERE source = {} \
         AND reason IN ('discriminants_differ', 'transport_id_collision') ORDER BY received_at",
        parameter(conn.get_database_backend())
    );
    rows(conn, sql, source).await
}
