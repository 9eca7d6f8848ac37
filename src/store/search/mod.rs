//! Finding deliveries in the `deliveries` projection: by what a person pastes
//! (a delivery id, a provider event or delivery id, a business key, a
//! resource such as a payment id) or its beginning, by filters, newest first.
//!
//! Pages are keyset pages on the primary key, never OFFSET: delivery ids
//! are UUIDv7 of their reception (`id_range`), so newest first is the
//! primary key's index read backwards, with no index of its own to write
//! per delivery. A page costs the same at any depth, and a delivery
//! arriving meanwhile shifts nothing; the page before one is the same index
//! read the other way. A window of reception times is a range of the same
//! index, and `received_at` decides at its edges. Each kind of `q` is an equality on an
//! indexed column (migration `delivery_search`), or for a prefix `p` the
//! range `p <= column < successor(p)` on the same index: text compares in
//! code point order there (see `near::text_order` for PostgreSQL databases
//! whose collation is another). Counts stop at a cap, so that a prefix
//! shared by a million deliveries costs what a thousand do.

mod links;
mod near;

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Alias, Expr, Query as Sql};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect, QueryTrait, Select,
};

pub use links::{Links, asked_for, effects, linked};
pub use near::{TextOrder, neighbour_queries, neighbours, text_order};

use super::entities::delivery;
use super::id_range;
use crate::domain::search::successor;

/// What a search asks for. Every field narrows; none set is every delivery.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// The pasted text, as equalities or as a prefix.
    pub q: Option<Query>,
    pub source: Option<String>,
    pub event_type: Option<String>,
    pub decision: Option<String>,
    /// Received at or after.
    pub from: Option<DateTime<Utc>>,
    /// Received before.
    pub to: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone)]
pub enum Query {
    /// A searched column equal to one of `texts` (the text as typed, other
    /// cases of it), or the resource to one of `resources` (each form a
    /// stored resource may take: the text, and its keyed hash when the
    /// resource is sensitive).
    Exact {
        texts: Vec<String>,
        resources: Vec<String>,
    },
    /// A searched column starting with one of `spellings`. A resource
    /// stored as its keyed hash has no beginning to find.
    Prefix { spellings: Vec<String> },
}

/// A position in the newest-first order: a page's first or last row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct After {
    pub delivery_id: String,
}

/// Which page of the newest-first order to read.
#[derive(Debug, Clone, Copy)]
pub enum Window<'a> {
    /// The newest deliveries: the first page.
    Newest,
    /// The deliveries older than a row: the page after the one it ends.
    Older(&'a After),
    /// The deliveries newer than a row, the nearest to it: the page before
    /// the one it starts.
    Newer(&'a After),
}

/// Up to `limit` deliveries matching `filter` in `window`, newest first.
pub async fn page<C: ConnectionTrait>(
    conn: &C,
    filter: &Filter,
    window: Window<'_>,
    limit: u64,
) -> Result<Vec<delivery::Model>, DbErr> {
    let order = order_for(conn, filter).await?;
    let mut rows = matching(filter, window, order)
        .limit(limit)
        .all(conn)
        .await?;
    if let Window::Newer(_) = window {
        rows.reverse();
    }
    Ok(rows)
}

/// How many deliveries match `filter`, counting no further than `cap + 1`:
/// an answer over `cap` means "more than `cap`". Each searched column's
/// index is read no further than that many matches.
pub async fn count<C: ConnectionTrait>(conn: &C, filter: &Filter, cap: u64) -> Result<u64, DbErr> {
    let order = order_for(conn, filter).await?;
    let statement = counting(filter, order, cap);
    let builder = conn.get_database_backend();
    let row = conn.query_one_raw(builder.build(&statement)).await?;
    let counted: i64 = match row {
        Some(row) => row.try_get_by_index(0)?,
        None => 0,
    };
    Ok(u64::try_from(counted).unwrap_or(0))
}

/// `SELECT COUNT(*) FROM (SELECT delivery_id … LIMIT cap + 1)`, for `count`
/// and its plan test.
pub fn counting(
    filter: &Filter,
    order: TextOrder,
    cap: u64,
) -> sea_orm::sea_query::SelectStatement {
    let matches = filtered(filter, order)
        .select_only()
        .column(delivery::Column::DeliveryId)
        .limit(cap.saturating_add(1))
        .into_query();
    Sql::select()
        .expr(Expr::cust("COUNT(*)"))
        .from_subquery(matches, Alias::new("matches"))
        .to_owned()
}

async fn order_for<C: ConnectionTrait>(conn: &C, filter: &Filter) -> Result<TextOrder, DbErr> {
    match filter.q {
        Some(Query::Prefix { .. }) => text_order(conn).await,
        _ => Ok(TextOrder::Indexed),
    }
}

/// The query behind `page`, unbounded (its plan is tested).
pub fn matching(filter: &Filter, window: Window<'_>, order: TextOrder) -> Select<delivery::Entity> {
    use delivery::Column as C;
    let query = filtered(filter, order);
    match window {
        Window::Newest => query.order_by_desc(C::DeliveryId),
        Window::Older(at) => query
            .filter(C::DeliveryId.lt(at.delivery_id.as_str()))
            .order_by_desc(C::DeliveryId),
        Window::Newer(at) => query
            .filter(C::DeliveryId.gt(at.delivery_id.as_str()))
            .order_by_asc(C::DeliveryId),
    }
}

/// The deliveries matching `filter`, in no order.
fn filtered(filter: &Filter, order: TextOrder) -> Select<delivery::Entity> {
    use delivery::Column as C;
    let mut query = delivery::Entity::find();
    const SEARCHED: [C; 4] = [
        C::DeliveryId,
        C::ProviderEventId,
        C::BusinessKey,
        C::Resource,
    ];
    match &filter.q {
        Some(Query::Exact { texts, resources }) => {
            let texts = || texts.iter().map(String::as_str);
            query = query.filter(
                Condition::any()
                    .add(C::DeliveryId.is_in(texts()))
                    .add(C::ProviderEventId.is_in(texts()))
                    .add(C::BusinessKey.is_in(texts()))
                    .add(C::Resource.is_in(resources.iter().map(String::as_str))),
            );
        }
        Some(Query::Prefix { spellings }) => {
            let mut any = Condition::any();
            for column in SEARCHED {
                for prefix in spellings {
                    any = any.add(starts_with(column, prefix, order));
                }
            }
            query = query.filter(any);
        }
        None => {}
    }
    for (column, value) in [(C::Source, &filter.source), (C::Decision, &filter.decision)] {
        if let Some(value) = value {
            query = query.filter(column.eq(value.as_str()));
        }
    }
    // An event type ending in `*` (`refund.*`) stands for every type that
    // begins with what comes before it.
    match filter
        .event_type
        .as_deref()
        .map(|t| (t, t.strip_suffix('*')))
    {
        Some((_, Some(head))) => query = query.filter(starts_with(C::EventType, head, order)),
        Some((exact, None)) => query = query.filter(C::EventType.eq(exact)),
        None => {}
    }
    if let Some(from) = filter.from {
        query = query
            .filter(C::DeliveryId.gte(id_range::made_since(from)))
            .filter(C::ReceivedAt.gte(from));
    }
    if let Some(to) = filter.to {
        query = query
            .filter(C::DeliveryId.lt(id_range::made_before(to)))
            .filter(C::ReceivedAt.lt(to));
    }
    query
}

/// `prefix <= column < successor(prefix)`: the range of the column's index
/// holding exactly the values that start with `prefix`, compared in code
/// point order.
fn starts_with(column: delivery::Column, prefix: &str, order: TextOrder) -> Condition {
    let compare = |operator: &'static str, bound: String| match order {
        TextOrder::Indexed => match operator {
            ">=" => column.gte(bound),
            _ => column.lt(bound),
        },
        TextOrder::Explicit => Expr::cust_with_exprs(
            match operator {
                ">=" => r#"$1 COLLATE "C" >= $2"#,
                _ => r#"$1 COLLATE "C" < $2"#,
            },
            [Expr::col(column), Expr::val(bound)],
        ),
    };
    let mut range = Condition::all().add(compare(">=", prefix.to_owned()));
    if let Some(end) = successor(prefix) {
        range = range.add(compare("<", end));
    }
    range
}

/// A received delivery with nothing derived yet, for tests.
#[cfg(test)]
pub(crate) fn sample(id: &str, at: DateTime<Utc>) -> delivery::Model {
    delivery::Model {
        delivery_id: id.to_owned(),
        source: "s".into(),
        tenant: "t".into(),
        provider: "p".into(),
        environment: "e".into(),
        received_at: at,
        status: "received".into(),
        event_type: None,
        provider_event_id: None,
        transport_key: None,
        business_key: None,
        strategy: None,
        strength: None,
        decision: None,
        reason: None,
        layer: None,
        reference_delivery_id: None,
        effect_id: None,
        case_id: None,
        decided_at: None,
        resource: None,
        received_position: None,
    }
}

#[cfg(test)]
mod tests;
