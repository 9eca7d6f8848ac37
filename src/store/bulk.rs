//! Inserting many rows of one table at once.
//!
//! SQLite: multi-row `VALUES`, at most `MAX_ROWS` rows to a statement.
//!
//! PostgreSQL: one statement per table whatever the row count,
//! `INSERT … SELECT … FROM UNNEST($1::text[], …)`. Each column travels as one
//! typed array, bound in binary as single values are, and the statement's
//! text depends only on the table: a connection parses and plans it once
//! (the driver keeps it prepared) instead of once per batch size, and a batch
//! sends no `Parse` for it. The ORM's binder cannot carry an array holding
//! NULL, so a nullable column travels as its values (a placeholder where the
//! value is NULL) beside a `bool[]` saying which are NULL.

use chrono::DateTime;
use sea_orm::sea_query::{ArrayType, Value};
use sea_orm::{
    ActiveModelTrait, ActiveValue, ColumnTrait, ConnectionTrait, DbBackend, DbErr, EntityName,
    EntityTrait, IdenStatic, Iterable, Statement,
};

/// Most rows per statement on SQLite: well under its 32766 bound parameters
/// for the widest row (`deliveries`, 21 columns).
const MAX_ROWS: usize = 500;

/// Splits `rows` into statements of at most `MAX_ROWS` rows, in order.
pub(super) fn statements<A>(rows: Vec<A>) -> Vec<Vec<A>> {
    let mut out = Vec::with_capacity(rows.len().div_ceil(MAX_ROWS));
    let mut rows = rows.into_iter().peekable();
    while rows.peek().is_some() {
        out.push(rows.by_ref().take(MAX_ROWS).collect());
    }
    out
}

/// Inserts `rows`, skipping those whose key is taken; returns how many were
/// inserted. Every row sets the same columns.
pub async fn insert<C, A>(conn: &C, rows: Vec<A>) -> Result<u64, DbErr>
where
    C: ConnectionTrait,
    A: ActiveModelTrait + Send,
{
    if rows.is_empty() {
        return Ok(0);
    }
    if conn.get_database_backend() == DbBackend::Postgres {
        let table = A::Entity::default().table_name().to_owned();
        let columns = columns_of(rows)?;
        return unnest(conn, &table, columns, Mode::SkipTaken).await;
    }
    let mut inserted = 0;
    for chunk in statements(rows) {
        inserted += match <A::Entity as EntityTrait>::insert_many(chunk)
            .on_conflict_do_nothing()
            .exec_without_returning(conn)
            .await?
        {
            sea_orm::TryInsertResult::Inserted(n) => n,
            _ => 0,
        };
    }
    Ok(inserted)
}

/// One column's values, in row order.
pub(super) struct Column {
    pub name: &'static str,
    pub values: Vec<Value>,
    pub nullable: bool,
    /// A type the value is cast to on its way in (`json` for text holding
    /// JSON that must be kept as written).
    pub cast: Option<&'static str>,
}

/// Each column of `rows` that any row sets, with its values in row order.
fn columns_of<A: ActiveModelTrait>(mut rows: Vec<A>) -> Result<Vec<Column>, DbErr> {
    let mut columns = Vec::new();
    for column in <A::Entity as EntityTrait>::Column::iter() {
        let taken: Vec<ActiveValue<Value>> = rows.iter_mut().map(|r| r.take(column)).collect();
        if taken.iter().all(|v| matches!(v, ActiveValue::NotSet)) {
            continue;
        }
        let values = taken
            .into_iter()
            .map(ActiveValue::into_value)
            .collect::<Option<Vec<Value>>>()
            .ok_or_else(|| {
                DbErr::Custom(format!(
                    "column {} is set in some rows of a bulk insert only",
                    column.as_str()
                ))
            })?;
        columns.push(Column {
            name: column.as_str(),
            values,
            nullable: column.def().is_null(),
            cast: None,
        });
    }
    Ok(columns)
}

/// How an `unnest` insert treats its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// A row whose key is taken is skipped (`ON CONFLICT DO NOTHING`).
    SkipTaken,
    /// Rows are appended in the order given, so that a serial column numbers
    /// them in that order; any conflict fails the statement.
    Append,
}

/// Inserts the rows `columns` hold into `table` on PostgreSQL in one
/// statement; returns how many were inserted.
pub(super) async fn unnest<C: ConnectionTrait>(
    conn: &C,
    table: &str,
    columns: Vec<Column>,
    mode: Mode,
) -> Result<u64, DbErr> {
    let mut names = Vec::with_capacity(columns.len());
    let mut selected = Vec::with_capacity(columns.len());
    let mut arrays = Vec::with_capacity(columns.len());
    let mut aliases = Vec::with_capacity(columns.len());
    let mut values = Vec::with_capacity(columns.len());
    for (i, column) in columns.into_iter().enumerate() {
        names.push(format!("\"{}\"", column.name));
        let Some(first) = column.values.first() else {
            return Ok(0);
        };
        let (element, sql_type) = array_type(first).ok_or_else(|| {
            DbErr::Custom(format!(
                "column {} has a type bulk inserts do not carry",
                column.name
            ))
        })?;
        let cast = column.cast.map(|c| format!("::{c}")).unwrap_or_default();
        let mut nulls = Vec::new();
        let mut present = Vec::with_capacity(column.values.len());
        for value in column.values {
            let (value, null) = placeholder_if_null(value);
            present.push(value);
            nulls.push(Value::Bool(Some(null)));
        }
        values.push(Value::Array(element, Some(Box::new(present))));
        arrays.push(format!("${}::{sql_type}[]", values.len()));
        aliases.push(format!("c{i}"));
        if column.nullable {
            values.push(Value::Array(ArrayType::Bool, Some(Box::new(nulls))));
            arrays.push(format!("${}::bool[]", values.len()));
            aliases.push(format!("n{i}"));
            selected.push(format!("CASE WHEN n{i} THEN NULL ELSE c{i}{cast} END"));
        } else {
            selected.push(format!("c{i}{cast}"));
        }
    }
    let (ordinality, tail) = match mode {
        Mode::SkipTaken => ("", " ON CONFLICT DO NOTHING"),
        Mode::Append => {
            aliases.push("i".to_owned());
            (" WITH ORDINALITY", " ORDER BY i")
        }
    };
    let sql = format!(
        "INSERT INTO \"{table}\" ({}) SELECT {} FROM UNNEST({}){ordinality} AS u({}){tail}",
        names.join(", "),
        selected.join(", "),
        arrays.join(", "),
        aliases.join(", "),
    );
    let statement = Statement::from_sql_and_values(DbBackend::Postgres, sql, values);
    Ok(conn.execute_raw(statement).await?.rows_affected())
}

/// The array type a column of values like `value` travels as, and its name in
/// SQL.
fn array_type(value: &Value) -> Option<(ArrayType, &'static str)> {
    Some(match value {
        Value::Bool(_) => (ArrayType::Bool, "bool"),
        Value::Int(_) => (ArrayType::Int, "int4"),
        Value::BigInt(_) => (ArrayType::BigInt, "int8"),
        Value::String(_) => (ArrayType::String, "text"),
        Value::Bytes(_) => (ArrayType::Bytes, "bytea"),
        Value::Json(_) => (ArrayType::Json, "jsonb"),
        Value::ChronoDateTimeUtc(_) => (ArrayType::ChronoDateTimeUtc, "timestamptz"),
        _ => return None,
    })
}

/// `value`, or a placeholder of its type when it is NULL, and whether it was.
fn placeholder_if_null(value: Value) -> (Value, bool) {
    match value {
        Value::Bool(None) => (Value::Bool(Some(false)), true),
        Value::Int(None) => (Value::Int(Some(0)), true),
        Value::BigInt(None) => (Value::BigInt(Some(0)), true),
        Value::String(None) => (Value::String(Some(String::new())), true),
        Value::Bytes(None) => (Value::Bytes(Some(Vec::new())), true),
        Value::Json(None) => (Value::Json(Some(Box::default())), true),
        Value::ChronoDateTimeUtc(None) => {
            (Value::ChronoDateTimeUtc(Some(DateTime::UNIX_EPOCH)), true)
        }
        value => (value, false),
    }
}
