//! Appending to and reading from the journal. Rows are never updated or
//! deleted (the database refuses it); positions are assigned by the database.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait, Query};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbBackend, DbErr, EntityTrait, QueryFilter, QueryOrder,
};

use super::entities::journal;
use crate::domain::delivery::DeliveryId;
use crate::domain::journal::{JournalEvent, StoredEventError};

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
    let rows = journal::Entity::find()
        .filter(journal::Column::DeliveryId.eq(id.to_string()))
        .order_by_asc(journal::Column::Position)
        .all(conn)
        .await?;
    rows.into_iter().map(decode).collect()
}

fn decode(row: journal::Model) -> Result<StoredEvent, ReadError> {
    let event = JournalEvent::from_stored(&row.event_type, row.event_version, row.data).map_err(
        |source| ReadError::Corrupt {
            position: row.position,
            source,
        },
    )?;
    Ok(StoredEvent {
        position: row.position,
        delivery_id: row.delivery_id.and_then(|id| id.parse().ok()),
        recorded_at: row.recorded_at,
        event,
    })
}
