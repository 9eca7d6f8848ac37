//! A batch's rows for one table in one statement on PostgreSQL, whatever
//! their number: the rows travel as one JSON array, unpacked into the
//! table's own row type by `jsonb_populate_recordset`. The statement's text
//! depends only on the table and its columns, so each connection prepares it
//! once; a multi-row `VALUES` list was a new statement for every batch size,
//! parsed and planned again for its number of rows.
//!
//! Values keep their meaning on the way: text as text, bytes as `\x` hex
//! (`bytea`'s own input form), instants in microseconds (what PostgreSQL
//! keeps, truncated as a bound parameter is), JSON as JSON.

use chrono::SecondsFormat;
use sea_orm::sea_query::Value;
use sea_orm::{
    ActiveModelTrait, ConnectionTrait, DbBackend, DbErr, EntityName, EntityTrait, IdenStatic,
    Iterable, Statement,
};
use serde_json::{Map, Value as Json};

/// Inserts `rows` (each with the same columns set), skipping those whose key
/// exists; returns how many took. `None` when the rows cannot travel this way
/// (columns set differently, a type it does not carry): the caller inserts
/// them as it would on any backend.
pub(super) async fn insert<C, A>(conn: &C, rows: &[A]) -> Result<Option<u64>, DbErr>
where
    C: ConnectionTrait,
    A: ActiveModelTrait,
{
    let Some(statement) = statement(rows) else {
        return Ok(None);
    };
    Ok(Some(conn.execute_raw(statement).await?.rows_affected()))
}

/// The statement inserting `rows`, or `None` (see `insert`).
fn statement<A: ActiveModelTrait>(rows: &[A]) -> Option<Statement> {
    let first = rows.first()?;
    let all: Vec<_> = <A::Entity as EntityTrait>::Column::iter().collect();
    let set = |row: &A| -> Vec<bool> { all.iter().map(|c| row.get(*c).is_set()).collect() };
    let columns: Vec<_> = all
        .iter()
        .copied()
        .filter(|c| first.get(*c).is_set())
        .collect();
    let mut array = Vec::with_capacity(rows.len());
    let shape = set(first);
    for row in rows {
        if set(row) != shape {
            return None;
        }
        let mut object = Map::with_capacity(columns.len());
        for column in &columns {
            let value = row.get(*column).into_value()?;
            object.insert(column.as_str().to_owned(), json_of(&value)?);
        }
        array.push(Json::Object(object));
    }
    let table = A::Entity::default().table_name().to_owned();
    let names = columns
        .iter()
        .map(|column| format!("\"{}\"", column.as_str()))
        .collect::<Vec<_>>()
        .join(", ");
    let sql = format!(
        "INSERT INTO \"{table}\" ({names}) SELECT {names} \
         FROM jsonb_populate_recordset(NULL::\"{table}\", $1) ON CONFLICT DO NOTHING"
    );
    Some(Statement::from_sql_and_values(
        DbBackend::Postgres,
        sql,
        [Value::Json(Some(Box::new(Json::Array(array))))],
    ))
}

/// `value` as `jsonb_populate_recordset` reads it back into its column;
/// `None` for a type the store's tables do not use.
fn json_of(value: &Value) -> Option<Json> {
    Some(match value {
        Value::Bool(v) => v.map_or(Json::Null, Json::Bool),
        Value::Int(v) => v.map_or(Json::Null, Json::from),
        Value::BigInt(v) => v.map_or(Json::Null, Json::from),
        Value::String(v) => v.clone().map_or(Json::Null, Json::String),
        Value::Json(v) => v.as_deref().cloned().unwrap_or(Json::Null),
        Value::Bytes(v) => v.as_ref().map_or(Json::Null, |bytes| {
            Json::String(format!("\\x{}", hex::encode(bytes)))
        }),
        Value::ChronoDateTimeUtc(v) => v.as_ref().map_or(Json::Null, |at| {
            Json::String(at.to_rfc3339_opts(SecondsFormat::Micros, true))
        }),
        _ => return None,
    })
}

#[cfg(test)]
mod tests;
