//! Appending to and reading from the journal. Rows are never updated or
//! deleted (the database refuses it); positions are assigned by the database.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait, Query};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbBackend, DbErr, EntityTrait, FromQueryResult, QueryFilter,
    QueryOrder, QuerySelect,
};

use super::entities::journal;
use crate::domain::delivery::DeliveryId;
use crate::domain::journal::{JournalEvent, StoredEventError};
use crate::domain::strict_json::{self, Limits};

/// An event read back from the journal with its position and time.
#[derive(Debug, Clone)]
pub struct StoredEvent {
    pub position: i64,
    pub delivery_id: Option<DeliveryId>,
    pub recorded_at: DateTime<Utc>,
    pub event: JournalEvent,
}

/// Appends one event. Call it inside the transaction that also updates what
/// the event implies, so both commit or neither does.
pub async fn append<C: ConnectionTrait>(
    conn: &C,
    delivery_id: Option<DeliveryId>,
    event: &JournalEvent,
    at: DateTime<Utc>,
) -> Result<(), DbErr> {
    append_many(conn, &[(delivery_id, event.clone())], at).await
}

/// Appends events in order.
pub async fn append_many<C: ConnectionTrait>(
    conn: &C,
    events: &[(Option<DeliveryId>, JournalEvent)],
    at: DateTime<Utc>,
) -> Result<(), DbErr> {
    let rows = events
        .iter()
        .map(|(delivery_id, event)| row(*delivery_id, event, at))
        .collect();
    insert(conn, rows).await
}

/// A journal row, its payload serialised ahead (outside the writer where
/// possible).
#[derive(Debug, Clone)]
pub struct Row {
    delivery_id: Option<String>,
    event_type: &'static str,
    event_version: i32,
    data: String,
    recorded_at: DateTime<Utc>,
}

impl Row {
    /// Sets the time the row is recorded at (the write time).
    pub fn recorded_at(&mut self, at: DateTime<Utc>) {
        self.recorded_at = at;
    }
}

/// The row that journals `event`; its position is assigned on insert.
pub fn row(delivery_id: Option<DeliveryId>, event: &JournalEvent, at: DateTime<Utc>) -> Row {
    Row {
        delivery_id: delivery_id.map(|id| id.to_string()),
        event_type: event.event_type(),
        event_version: event.version(),
        data: event.data_text(),
        recorded_at: at,
    }
}

/// Inserts `rows` in order, in as few statements as `deferred::statements`
/// allows. The payload is bound as text, cast to `jsonb` on PostgreSQL.
pub(super) async fn insert<C: ConnectionTrait>(conn: &C, rows: Vec<Row>) -> Result<(), DbErr> {
    let backend = conn.get_database_backend();
    for chunk in super::deferred::statements(rows) {
        let mut insert = Query::insert();
        insert.into_table(journal::Entity).columns([
            journal::Column::DeliveryId,
            journal::Column::EventType,
            journal::Column::EventVersion,
            journal::Column::Data,
            journal::Column::RecordedAt,
        ]);
        for row in chunk {
            let data = match backend {
                DbBackend::Postgres => Expr::val(row.data).cast_as("jsonb"),
                _ => Expr::val(row.data),
            };
            insert.values_panic([
                row.delivery_id.into(),
                row.event_type.into(),
                row.event_version.into(),
                data,
                row.recorded_at.into(),
            ]);
        }
        conn.execute(&insert).await?;
    }
    Ok(())
}

/// Error reading the journal.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error(transparent)]
    Db(#[from] DbErr),
    #[error("journal row {position}: {source}")]
    Corrupt {
        position: i64,
        #[source]
        source: StoredEventError,
    },
}

/// Every event about one delivery, in journal order.
pub async fn for_delivery<C: ConnectionTrait>(
    conn: &C,
    id: DeliveryId,
) -> Result<Vec<StoredEvent>, ReadError> {
    let rows = select(conn)
        .filter(journal::Column::DeliveryId.eq(id.to_string()))
        .order_by_asc(journal::Column::Position)
        .into_model::<RawRow>()
        .all(conn)
        .await?;
    rows.into_iter().map(decode).collect()
}

/// Up to `limit` events after position `after`, in journal order.
pub async fn page_after<C: ConnectionTrait>(
    conn: &C,
    after: i64,
    limit: u64,
) -> Result<Vec<StoredEvent>, ReadError> {
    let rows = select(conn)
        .filter(journal::Column::Position.gt(after))
        .order_by_asc(journal::Column::Position)
        .limit(limit)
        .into_model::<RawRow>()
        .all(conn)
        .await?;
    rows.into_iter().map(decode).collect()
}

/// A journal row with its payload as text. Reading the payload through the
/// driver's JSON decoding would put every row under `serde_json`'s nesting
/// limit of 128, which rows written before bodies had a nesting limit of their
/// own can exceed: they must stay readable all the same.
#[derive(Debug, FromQueryResult)]
struct RawRow {
    position: i64,
    delivery_id: Option<String>,
    event_type: String,
    event_version: i32,
    data: String,
    recorded_at: DateTime<Utc>,
}

fn select<C: ConnectionTrait>(conn: &C) -> sea_orm::Select<journal::Entity> {
    let data = match conn.get_database_backend() {
        DbBackend::Postgres => Expr::col(journal::Column::Data).cast_as("text"),
        _ => Expr::col(journal::Column::Data),
    };
    journal::Entity::find()
        .select_only()
        .columns([
            journal::Column::Position,
            journal::Column::DeliveryId,
            journal::Column::EventType,
            journal::Column::EventVersion,
            journal::Column::RecordedAt,
        ])
        .column_as(data, "data")
}

fn decode(row: RawRow) -> Result<StoredEvent, ReadError> {
    let corrupt = |source| ReadError::Corrupt {
        position: row.position,
        source,
    };
    let data = strict_json::parse(&row.data, Limits::STORED).map_err(|refused| {
        corrupt(StoredEventError::Unreadable {
            event_type: row.event_type.clone(),
            reason: refused.to_string(),
        })
    })?;
    let event =
        JournalEvent::from_stored(&row.event_type, row.event_version, data).map_err(corrupt)?;
    Ok(StoredEvent {
        position: row.position,
        delivery_id: row.delivery_id.and_then(|id| id.parse().ok()),
        recorded_at: row.recorded_at,
        event,
    })
}
