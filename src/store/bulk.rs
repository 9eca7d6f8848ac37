//! Inserting many rows at once.
//!
//! SQLite: multi-row `VALUES`, at most `MAX_ROWS` rows to a statement.
//!
//! PostgreSQL: every table's rows in one statement whatever the row count,
//! `INSERT … SELECT … FROM UNNEST($1::text[], …)` per table, several tables
//! as data-modifying `WITH` queries of one statement (`unnest_all`). Each
//! column travels as one typed array, bound in binary as single values are,
//! and the statement's text depends only on which tables have rows: a
//! connection parses and plans it once (the driver keeps it prepared)
//! instead of once per batch size, and a batch makes one round trip for all
//! its rows. The ORM's binder cannot carry an array holding NULL, so a
//! nullable column travels as its values (a placeholder where the value is
//! NULL) beside a `bool[]` saying which are NULL.

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
        return Ok(unnest_all(conn, vec![Part::of(rows)?]).await?[0]);
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

/// How a part's rows are inserted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// A row whose key is taken is skipped (`ON CONFLICT DO NOTHING`).
    SkipTaken,
    /// Rows are appended in the order given, so that a serial column numbers
    /// them in that order; any conflict fails the statement.
    Append,
}

/// One table's rows, for a statement that may insert into several at once
/// (`unnest_all`).
pub(super) struct Part {
    pub table: &'static str,
    pub columns: Vec<Column>,
    pub mode: Mode,
    /// A call the statement makes before the part's first row (a lock to
    /// hold before a serial column hands out a number), or none.
    pub first: Option<String>,
}

impl Part {
    /// The part inserting `rows`, skipping those whose key is taken.
    pub(super) fn of<A: ActiveModelTrait>(rows: Vec<A>) -> Result<Self, DbErr> {
        Ok(Self {
            table: A::Entity::default().table_name(),
            columns: columns_of(rows)?,
            mode: Mode::SkipTaken,
            first: None,
        })
    }

    pub(super) fn rows(&self) -> usize {
        self.columns.first().map_or(0, |c| c.values.len())
    }
}

/// Inserts every part's rows on PostgreSQL in one statement, a
/// data-modifying `WITH` query per part, in one round trip whatever the
/// number of tables and rows; returns how many rows each part inserted, in
/// order. The statement's text depends only on which tables have rows.
pub(super) async fn unnest_all<C: ConnectionTrait>(
    conn: &C,
    parts: Vec<Part>,
) -> Result<Vec<u64>, DbErr> {
    let mut inserted = vec![0; parts.len()];
    let mut queries = Vec::new();
    let mut counts = Vec::new();
    let mut values = Vec::new();
    let mut written = Vec::new();
    for (p, part) in parts.into_iter().enumerate() {
        if part.rows() == 0 {
            continue;
        }
        let join = match &part.first {
            Some(call) => {
                queries.push(format!("f{p} AS MATERIALIZED (SELECT {call})"));
                format!(" CROSS JOIN f{p}")
            }
            None => String::new(),
        };
        queries.push(format!(
            "p{p} AS ({} RETURNING 1)",
            insert_sql(part, &join, &mut values)?
        ));
        counts.push(format!("(SELECT count(*) FROM p{p}) AS n{p}"));
        written.push(p);
    }
    if written.is_empty() {
        return Ok(inserted);
    }
    let sql = format!("WITH {} SELECT {}", queries.join(", "), counts.join(", "));
    let statement = Statement::from_sql_and_values(DbBackend::Postgres, sql, values);
    let row = conn
        .query_one_raw(statement)
        .await?
        .ok_or_else(|| DbErr::Custom("a bulk insert returned no counts".to_owned()))?;
    for p in written {
        let n: i64 = row.try_get("", &format!("n{p}"))?;
        inserted[p] = n.unsigned_abs();
    }
    Ok(inserted)
}

/// The `INSERT … SELECT … FROM UNNEST(…)` of `part`, its arrays bound after
/// `values`.
fn insert_sql(part: Part, join: &str, values: &mut Vec<Value>) -> Result<String, DbErr> {
    let Part {
        table,
        columns,
        mode,
        ..
    } = part;
    let mut names = Vec::with_capacity(columns.len());
    let mut selected = Vec::with_capacity(columns.len());
    let mut arrays = Vec::with_capacity(columns.len());
    let mut aliases = Vec::with_capacity(columns.len());
    for (i, column) in columns.into_iter().enumerate() {
        let unsupported = || {
            DbErr::Custom(format!(
                "column {}.{} has a type bulk inserts do not carry",
                table, column.name
            ))
        };
        let (element, sql_type) = column
            .values
            .first()
            .and_then(array_type)
            .ok_or_else(unsupported)?;
        names.push(format!("\"{}\"", column.name));
        let cast = column.cast.map(|c| format!("::{c}")).unwrap_or_default();
        let mut nulls = Vec::with_capacity(column.values.len());
        let mut present = Vec::with_capacity(column.values.len());
        for value in column.values {
            let (value, null) = placeholder_if_null(value);
            if null && !column.nullable {
                return Err(DbErr::Custom(format!(
                    "column {}.{} is NOT NULL and a row holds NULL",
                    table, column.name
                )));
            }
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
    Ok(format!(
        "INSERT INTO \"{table}\" ({}) SELECT {} FROM UNNEST({}){ordinality} AS u({}){join}{tail}",
        names.join(", "),
        selected.join(", "),
        arrays.join(", "),
        aliases.join(", "),
    ))
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
