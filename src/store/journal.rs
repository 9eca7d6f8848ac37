//! Appending to and reading from the journal. Rows are never updated or
//! deleted (the database refuses it); positions are assigned by the database.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbBackend, DbErr, EntityTrait, FromQueryResult, QueryFilter,
    QueryOrder, QuerySelect,
};

use migration::m20261206_000051_receptions_found_by_read_model::RECEPTIONS;

use super::checkpoint::{DELIVERIES, checkpoint};
use super::entities::{delivery, journal};
use crate::domain::delivery::DeliveryId;
use crate::domain::journal::audit::AUDITED;
use crate::domain::journal::{
    DecisionMade, DeliveryReceived, JournalEvent, KeyDerived, KeyTaken, Reserved, StoredEventError,
};
use crate::domain::strict_json::{self, Limits};

/// An event read back from the journal with its position and time.
#[derive(Debug, Clone)]
pub struct StoredEvent {
    pub position: i64,
    pub delivery_id: Option<DeliveryId>,
    pub recorded_at: DateTime<Utc>,
    pub event: JournalEvent,
}

/// A journal row, its payload serialised ahead (outside the writer where
/// possible).
#[derive(Debug, Clone)]
pub struct Row {
    pub(super) delivery_id: Option<String>,
    pub(super) event_type: &'static str,
    pub(super) event_version: i32,
    pub(super) data: String,
    pub(super) recorded_at: DateTime<Utc>,
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

/// A reception's `DeliveryReceived` and `KeyDerived`, serialised ahead
/// (outside the writer that every delivery waits on), to be journaled folded
/// with its decision (`decided_row`) or, when that does not fold, as rows of
/// their own (`rows`).
#[derive(Debug, Clone, Default)]
pub struct ReceptionText {
    received: String,
    key: String,
}

impl ReceptionText {
    /// The payloads as `JournalEvent::data_text` serialises them.
    pub fn new(received: &DeliveryReceived, key: &KeyDerived) -> Self {
        let null = |_| "null".to_owned();
        Self {
            received: serde_json::to_string(received).unwrap_or_else(null),
            key: serde_json::to_string(key).unwrap_or_else(null),
        }
    }

    /// Its two events as rows of their own.
    pub fn rows(self, delivery_id: DeliveryId, at: DateTime<Utc>) -> [Row; 2] {
        let row = |event_type, event_version, data| Row {
            delivery_id: Some(delivery_id.to_string()),
            event_type,
            event_version,
            data,
            recorded_at: at,
        };
        [
            row("DeliveryReceived", 1, self.received),
            row("KeyDerived", 2, self.key),
        ]
    }
}

/// A reception's journal rows: one `DeliveryDecided` folding its reception,
/// key, decision and the key that decision took, or, when those do not
/// fold, each event in a row of its own.
pub fn decided(
    delivery_id: DeliveryId,
    reception: ReceptionText,
    derived: &KeyDerived,
    taken: Option<KeyTaken>,
    decision: &DecisionMade,
    at: DateTime<Utc>,
) -> Vec<Row> {
    if let Ok(reserved) = Reserved::fold(taken.as_ref(), derived, delivery_id) {
        return vec![decided_row(
            delivery_id,
            reception,
            reserved.as_ref(),
            decision,
            at,
        )];
    }
    let mut rows: Vec<Row> = reception.rows(delivery_id, at).into();
    let taken = taken.map(KeyTaken::events).unwrap_or_default();
    rows.extend(taken.iter().map(|event| row(Some(delivery_id), event, at)));
    rows.push(row(
        Some(delivery_id),
        &JournalEvent::DecisionMade(decision.clone()),
        at,
    ));
    rows
}

/// The one `DeliveryDecided` row of a reception, its decision and what that
/// decision reserved: the same JSON as serialising the `DeliveryDecided`,
/// spliced from the parts serialised ahead.
fn decided_row(
    delivery_id: DeliveryId,
    reception: ReceptionText,
    reserved: Option<&Reserved>,
    decision: &DecisionMade,
    at: DateTime<Utc>,
) -> Row {
    let reserved = reserved
        .and_then(|r| serde_json::to_string(r).ok())
        .map(|r| format!(r#","reserved":{r}"#))
        .unwrap_or_default();
    let decision = serde_json::to_string(decision).unwrap_or_else(|_| "null".to_owned());
    let ReceptionText { received, key } = reception;
    Row {
        delivery_id: Some(delivery_id.to_string()),
        event_type: "DeliveryDecided",
        event_version: 1,
        data: format!(r#"{{"received":{received},"key":{key}{reserved},"decision":{decision}}}"#),
        recorded_at: at,
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

/// Every event about one delivery, in journal order: the row that
/// journaled its reception, found through the deliveries read model
/// (`received_position`) or, when the projector has not reached it yet, in
/// the journal's tail past the projector's checkpoint; then the rows that
/// followed it, through the index of those (`journal_after_reception`). The
/// reception's row has no entry in any index by delivery: it is written
/// before every 2xx (migration `receptions_found_by_read_model`).
pub async fn for_delivery<C: ConnectionTrait>(
    conn: &C,
    id: DeliveryId,
) -> Result<Vec<StoredEvent>, ReadError> {
    let id = id.to_string();
    let mut rows = reception_rows(conn, &id).await?;
    rows.extend(
        later_rows(conn, &id)
            .into_model::<RawRow>()
            .all(conn)
            .await?,
    );
    rows.sort_by_key(|row| row.position);
    decode_all(rows)
}

/// The row that journaled delivery `id`'s reception, if any. The checkpoint
/// is read before the read model: a row past it is in the tail; a row the
/// projector applies in between is then in the read model.
async fn reception_rows<C: ConnectionTrait>(conn: &C, id: &str) -> Result<Vec<RawRow>, DbErr> {
    let applied = checkpoint(conn, DELIVERIES).await?;
    let projected: Option<Option<i64>> = delivery::Entity::find_by_id(id.to_owned())
        .select_only()
        .column(delivery::Column::ReceivedPosition)
        .into_tuple()
        .one(conn)
        .await?;
    let query = match projected {
        Some(Some(position)) => select(conn).filter(journal::Column::Position.eq(position)),
        // A row a projector older than migration 051 wrote, running beside
        // this version (an upgrade should stop those first): found the slow
        // way, the whole journal read for it.
        Some(None) => {
            tracing::warn!(
                delivery.id = id,
                "the read model does not say where this delivery's reception is journaled \
                 (a row an older version wrote); reading the whole journal for it"
            );
            reception_in_tail(conn, 0, id)
        }
        None => reception_in_tail(conn, applied, id),
    };
    query.into_model::<RawRow>().all(conn).await
}

/// The reception of delivery `id` among the rows after `applied`. The
/// position is written literally: bound, it would let a generic plan on
/// PostgreSQL read the whole journal instead of its tail.
fn reception_in_tail<C: ConnectionTrait>(
    conn: &C,
    applied: i64,
    id: &str,
) -> sea_orm::Select<journal::Entity> {
    select(conn)
        .filter(Expr::cust(format!("position > {applied}")))
        .filter(journal::Column::DeliveryId.eq(id))
        .filter(Expr::cust(format!("event_type IN ({RECEPTIONS})")))
}

/// The rows about delivery `id` that follow its reception, in journal
/// order (index `journal_after_reception`).
fn later_rows<C: ConnectionTrait>(conn: &C, id: &str) -> sea_orm::Select<journal::Entity> {
    after_reception(select(conn))
        .filter(journal::Column::DeliveryId.eq(id))
        .order_by_asc(journal::Column::Position)
}

/// `query` narrowed to the rows that follow a reception, the condition
/// written as the partial index's, literally, so that both databases see
/// the query implies it.
fn after_reception(query: sea_orm::Select<journal::Entity>) -> sea_orm::Select<journal::Entity> {
    query.filter(Expr::cust(format!("event_type NOT IN ({RECEPTIONS})")))
}

/// Every event of `types` journaled for any of `deliveries`, in journal
/// order (index `journal_after_reception`: `types` are never a reception's).
pub async fn for_deliveries<C: ConnectionTrait>(
    conn: &C,
    deliveries: &[&str],
    types: &[&str],
) -> Result<Vec<StoredEvent>, ReadError> {
    debug_assert!(
        types
            .iter()
            .all(|t| !RECEPTIONS.contains(&format!("'{t}'")))
    );
    if deliveries.is_empty() {
        return Ok(Vec::new());
    }
    let rows = after_reception(select(conn))
        .filter(journal::Column::DeliveryId.is_in(deliveries.iter().copied()))
        .filter(journal::Column::EventType.is_in(types.iter().copied()))
        .order_by_asc(journal::Column::Position)
        .into_model::<RawRow>()
        .all(conn)
        .await?;
    decode_all(rows)
}

/// Every event of `types` journaled with no delivery (the findings of
/// reconciliation and what was done about them), in journal order.
pub async fn without_delivery<C: ConnectionTrait>(
    conn: &C,
    types: &[&str],
) -> Result<Vec<StoredEvent>, ReadError> {
    debug_assert!(
        types
            .iter()
            .all(|t| !RECEPTIONS.contains(&format!("'{t}'")))
    );
    let rows = without_delivery_query(conn, types)
        .into_model::<RawRow>()
        .all(conn)
        .await?;
    decode_all(rows)
}

/// `without_delivery`, only the rows recorded from `from` to `until`: what
/// one stretch of time saw of events that accumulate (purges), without
/// decoding every one ever journaled.
pub async fn without_delivery_between<C: ConnectionTrait>(
    conn: &C,
    types: &[&str],
    from: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Result<Vec<StoredEvent>, ReadError> {
    let rows = without_delivery_query(conn, types)
        .filter(journal::Column::RecordedAt.gte(from))
        .filter(journal::Column::RecordedAt.lte(until))
        .into_model::<RawRow>()
        .all(conn)
        .await?;
    decode_all(rows)
}

/// The rows of `types` with no delivery, through `journal_after_reception`
/// (`types` are never a reception's).
fn without_delivery_query<C: ConnectionTrait>(
    conn: &C,
    types: &[&str],
) -> sea_orm::Select<journal::Entity> {
    after_reception(select(conn))
        .filter(journal::Column::DeliveryId.is_null())
        .filter(journal::Column::EventType.is_in(types.iter().copied()))
        .order_by_asc(journal::Column::Position)
}

/// Up to `limit` rows of the audit trail (`audit::AUDITED`) before position
/// `before` (from the newest without one), newest first.
pub async fn newest_audited<C: ConnectionTrait>(
    conn: &C,
    before: Option<i64>,
    limit: u64,
) -> Result<Vec<StoredEvent>, ReadError> {
    let rows = newest_audited_query(select(conn), before)
        .limit(limit)
        .into_model::<RawRow>()
        .all(conn)
        .await?;
    decode_all(rows)
}

/// `query` narrowed to the audit trail's rows before `before`, newest
/// first. The list of types is written literally, in the order of the
/// partial index `journal_audit_trail_2` (migration `look_ups_audited`), so that the
/// planner can see the query implies the index's condition: a bound
/// parameter hides it, and the whole journal is scanned.
fn newest_audited_query(
    query: sea_orm::Select<journal::Entity>,
    before: Option<i64>,
) -> sea_orm::Select<journal::Entity> {
    let listed: Vec<String> = AUDITED.iter().map(|t| format!("'{t}'")).collect();
    let mut query = query.filter(Expr::cust(format!("event_type IN ({})", listed.join(", "))));
    if let Some(before) = before {
        query = query.filter(journal::Column::Position.lt(before));
    }
    query.order_by_desc(journal::Column::Position)
}

/// The events of the rows after position `after`, up to `limit` rows, in
/// journal order (a row folding several events gives them all).
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
    decode_all(rows)
}

/// The rows after `after` and at or before `through` of the event types
/// `types`, at most `limit`, in journal order, with the position of the last
/// row read when the page is full (`None`: nothing more up to `through`).
pub async fn page_between<C: ConnectionTrait>(
    conn: &C,
    range: (i64, i64),
    types: &[&str],
    limit: u64,
) -> Result<(Vec<StoredEvent>, Option<i64>), ReadError> {
    page_holding(conn, range, types, None, limit).await
}

/// `page_between`, of the rows whose payload's text holds `text` (a
/// `*` in it matches anything, and SQLite's LIKE ignores the case of
/// ASCII letters: what comes back may need the caller's own test). Only
/// the rows selected are decoded.
pub async fn page_between_holding<C: ConnectionTrait>(
    conn: &C,
    range: (i64, i64),
    types: &[&str],
    text: &str,
    limit: u64,
) -> Result<(Vec<StoredEvent>, Option<i64>), ReadError> {
    page_holding(conn, range, types, Some(text), limit).await
}

async fn page_holding<C: ConnectionTrait>(
    conn: &C,
    (after, through): (i64, i64),
    types: &[&str],
    holding: Option<&str>,
    limit: u64,
) -> Result<(Vec<StoredEvent>, Option<i64>), ReadError> {
    let mut query = select(conn)
        .filter(journal::Column::Position.gt(after))
        .filter(journal::Column::Position.lte(through))
        .filter(journal::Column::EventType.is_in(types.iter().copied()));
    if let Some(text) = holding {
        let data = Expr::col(journal::Column::Data).cast_as("text");
        query = query.filter(data.like(super::ledger::like(&format!("*{text}*"))));
    }
    let rows = query
        .order_by_asc(journal::Column::Position)
        .limit(limit)
        .into_model::<RawRow>()
        .all(conn)
        .await?;
    let full = u64::try_from(rows.len()).is_ok_and(|n| n >= limit);
    let last = rows.last().filter(|_| full).map(|row| row.position);
    Ok((decode_all(rows)?, last))
}

/// The journal read from its start, a page at a time, in journal order:
/// `while let Some(page) = pages.next(conn).await? { … }`.
#[derive(Debug, Default)]
pub struct Pages {
    after: i64,
}

impl Pages {
    /// Rows per page.
    const SIZE: u64 = 5_000;

    /// The next page's events; `None` past the last row.
    pub async fn next<C: ConnectionTrait>(
        &mut self,
        conn: &C,
    ) -> Result<Option<Vec<StoredEvent>>, ReadError> {
        let page = page_after(conn, self.after, Self::SIZE).await?;
        let Some(last) = page.last() else {
            return Ok(None);
        };
        self.after = last.position;
        Ok(Some(page))
    }
}

fn decode_all(rows: Vec<RawRow>) -> Result<Vec<StoredEvent>, ReadError> {
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        out.extend(decode(row)?);
    }
    Ok(out)
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

/// The events of one row: one, or the parts of a folded row, each with the
/// row's position and time.
fn decode(row: RawRow) -> Result<Vec<StoredEvent>, ReadError> {
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
    let delivery_id: Option<DeliveryId> = row.delivery_id.and_then(|id| id.parse().ok());
    let parts = JournalEvent::from_stored(&row.event_type, row.event_version, data)
        .and_then(|event| event.into_parts(delivery_id))
        .map_err(corrupt)?;
    Ok(parts
        .into_iter()
        .map(|event| StoredEvent {
            position: row.position,
            delivery_id,
            recorded_at: row.recorded_at,
            event,
        })
        .collect())
}

#[cfg(test)]
mod tests;
