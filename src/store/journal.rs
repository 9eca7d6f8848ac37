//! Appending to and reading from the journal. Rows are never updated or
//! deleted (the database refuses it); positions are assigned by the database.

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveValue::{NotSet, Set},
    ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder,
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

/// Appends events in order with one statement.
pub async fn append_many<C: ConnectionTrait>(
    conn: &C,
    events: &[(Option<DeliveryId>, JournalEvent)],
    at: DateTime<Utc>,
) -> Result<(), DbErr> {
    if events.is_empty() {
        return Ok(());
    }
    let rows = events
        .iter()
        .map(|(delivery_id, event)| row(*delivery_id, event, at));
    journal::Entity::insert_many(rows)
        .exec_without_returning(conn)
        .await?;
    Ok(())
}

/// The row that journals `event`; its position is assigned on insert.
pub fn row(
    delivery_id: Option<DeliveryId>,
    event: &JournalEvent,
    at: DateTime<Utc>,
) -> journal::ActiveModel {
    journal::ActiveModel {
        position: NotSet,
        delivery_id: Set(delivery_id.map(|id| id.to_string())),
        event_type: Set(event.event_type().to_owned()),
        event_version: Set(event.version()),
        data: Set(event.data()),
        recorded_at: Set(at),
    }
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
