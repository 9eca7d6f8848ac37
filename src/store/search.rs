//! Finding deliveries in the `deliveries` projection: by what a person pastes
//! (a delivery id, a provider event or delivery id, a business key, a
//! resource such as a payment id), by filters, newest first.
//!
//! Pages are keyset pages on `(received_at, delivery_id)` (index
//! `deliveries_newest`), never OFFSET: a page costs the same at any depth,
//! and a delivery arriving meanwhile shifts nothing. Each kind of `q` is an
//! equality on an indexed column (migration `delivery_search`).

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect, Select,
};

use super::entities::{delivery, effect, effect_delivery};

/// What a search asks for. Every field narrows; none set is every delivery.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// The pasted text, and each form a stored resource may take (the text,
    /// and its keyed hash when the resource is sensitive).
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
pub struct Query {
    /// The spellings to find (the text as typed, other cases of it).
    pub texts: Vec<String>,
    pub resources: Vec<String>,
}

/// Where the previous page ended: its last row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct After {
    pub received_at: DateTime<Utc>,
    pub delivery_id: String,
}

/// Up to `limit` deliveries matching `filter`, newest first, after `after`.
pub async fn page<C: ConnectionTrait>(
    conn: &C,
    filter: &Filter,
    after: Option<&After>,
    limit: u64,
) -> Result<Vec<delivery::Model>, DbErr> {
    matching(filter, after).limit(limit).all(conn).await
}

/// The query behind `page`, unbounded (its plan is tested).
pub fn matching(filter: &Filter, after: Option<&After>) -> Select<delivery::Entity> {
    use delivery::Column as C;
    let mut query = delivery::Entity::find();
    if let Some(q) = &filter.q {
        let texts = || q.texts.iter().map(String::as_str);
        query = query.filter(
            Condition::any()
                .add(C::DeliveryId.is_in(texts()))
                .add(C::ProviderEventId.is_in(texts()))
                .add(C::BusinessKey.is_in(texts()))
                .add(C::Resource.is_in(q.resources.iter().map(String::as_str))),
        );
    }
    for (column, value) in [
        (C::Source, &filter.source),
        (C::EventType, &filter.event_type),
        (C::Decision, &filter.decision),
    ] {
        if let Some(value) = value {
            query = query.filter(column.eq(value.as_str()));
        }
    }
    if let Some(from) = filter.from {
        query = query.filter(C::ReceivedAt.gte(from));
    }
    if let Some(to) = filter.to {
        query = query.filter(C::ReceivedAt.lt(to));
    }
    if let Some(after) = after {
        // A row value, so that the bound is one position in the index.
        query = query.filter(
            Expr::tuple([Expr::col(C::ReceivedAt), Expr::col(C::DeliveryId)]).lt(Expr::tuple([
                Expr::val(after.received_at),
                Expr::val(after.delivery_id.as_str()),
            ])),
        );
    }
    query
        .order_by_desc(C::ReceivedAt)
        .order_by_desc(C::DeliveryId)
}

/// What links deliveries to one another: its business key, its provider id
/// (with the source it is scoped by), and the deliveries that asked for its
/// effects or that its decisions name.
#[derive(Debug, Clone, Default)]
pub struct Links<'a> {
    pub business_key: Option<&'a str>,
    pub provider_event_id: Option<(&'a str, &'a str)>,
    pub deliveries: &'a [String],
}

/// Every delivery linked to one by `links`, oldest first, at most `limit`:
/// its first reception, retries, duplicates, collisions.
pub async fn linked<C: ConnectionTrait>(
    conn: &C,
    links: &Links<'_>,
    limit: u64,
) -> Result<Vec<delivery::Model>, DbErr> {
    use delivery::Column as C;
    let mut any = Condition::any();
    if let Some(key) = links.business_key {
        any = any.add(C::BusinessKey.eq(key));
    }
    if let Some((source, id)) = links.provider_event_id {
        any = any.add(C::ProviderEventId.eq(id).and(C::Source.eq(source)));
    }
    if !links.deliveries.is_empty() {
        any = any.add(C::DeliveryId.is_in(links.deliveries.iter().map(String::as_str)));
    }
    if any.is_empty() {
        return Ok(Vec::new());
    }
    delivery::Entity::find()
        .filter(any)
        .order_by_asc(C::ReceivedAt)
        .order_by_asc(C::DeliveryId)
        .limit(limit)
        .all(conn)
        .await
}

/// The deliveries that asked for any of the effects `ids` (at most `limit`):
/// each effect's first delivery, then those linked to it later (duplicates,
/// resolutions). Databases written before 2026-12-01 also hold a link for
/// the first delivery; each delivery is named once.
pub async fn asked_for<C: ConnectionTrait>(
    conn: &C,
    ids: &[String],
    limit: u64,
) -> Result<Vec<String>, DbErr> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut asked: Vec<String> = effect::Entity::find()
        .select_only()
        .column(effect::Column::FirstDeliveryId)
        .filter(effect::Column::EffectId.is_in(ids.iter().map(String::as_str)))
        .limit(limit)
        .into_tuple()
        .all(conn)
        .await?;
    let linked: Vec<String> = effect_delivery::Entity::find()
        .select_only()
        .column(effect_delivery::Column::DeliveryId)
        .filter(effect_delivery::Column::EffectId.is_in(ids.iter().map(String::as_str)))
        .limit(limit)
        .into_tuple()
        .all(conn)
        .await?;
    for id in linked {
        if !asked.contains(&id) {
            asked.push(id);
        }
    }
    asked.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    Ok(asked)
}

/// The effects `ids`, as the ledger holds them.
pub async fn effects<C: ConnectionTrait>(
    conn: &C,
    ids: &[String],
) -> Result<Vec<effect::Model>, DbErr> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    effect::Entity::find()
        .filter(effect::Column::EffectId.is_in(ids.iter().map(String::as_str)))
        .order_by_asc(effect::Column::CreatedAt)
        .all(conn)
        .await
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
    }
}

#[cfg(test)]
mod tests {
    use sea_orm::{ConnectionTrait, IntoActiveModel};

    use super::*;

    fn row(i: usize, at: DateTime<Utc>) -> delivery::ActiveModel {
        let mut row = sample(&format!("d{i:04}"), at);
        row.event_type = Some("refund.created".into());
        row.provider_event_id = i.is_multiple_of(2).then(|| format!("evt_{i}"));
        row.business_key = Some(format!("k{i}"));
        row.decision = Some("process".into());
        row.resource = Some(format!("pay_{}", i % 100));
        row.into_active_model()
    }

    #[tokio::test]
    async fn each_kind_of_search_and_every_page_reads_an_index_not_the_table() {
        let (_dir, db) = crate::store::test_database().await;
        let now = Utc::now();
        let rows = (0..400).map(|i| row(i, now - chrono::Duration::seconds(i as i64)));
        delivery::Entity::insert_many(rows)
            .exec_without_returning(&db)
            .await
            .unwrap();
        db.execute_unprepared("ANALYZE").await.unwrap();
        let by = |text: &str| Filter {
            q: Some(Query {
                texts: vec![text.to_owned(), text.to_ascii_uppercase()],
                resources: vec![text.to_owned(), format!("hmac:{text}")],
            }),
            ..Filter::default()
        };
        let after = After {
            received_at: now,
            delivery_id: "d0100".into(),
        };
        let queries = [
            matching(&by("pay_7"), None),
            matching(&by("d0007"), Some(&after)),
            matching(&Filter::default(), Some(&after)),
        ];
        for query in queries {
            let plan = crate::store::sqlite_plan(&db, &query).await;
            assert!(
                !plan.iter().any(|step| step.starts_with("SCAN deliveries")),
                "{plan:?}"
            );
        }
        let plan = crate::store::sqlite_plan(&db, &matching(&by("pay_7"), None)).await;
        for index in [
            "deliveries_resource",
            "deliveries_business_key",
            "deliveries_provider_event_id",
        ] {
            assert!(plan.iter().any(|step| step.contains(index)), "{plan:?}");
        }
        // Walking pages by cursor sees each row once, newest first.
        let mut seen = Vec::new();
        let mut cursor: Option<After> = None;
        loop {
            let page = page(&db, &by("pay_7"), cursor.as_ref(), 1).await.unwrap();
            let Some(last) = page.last() else { break };
            seen.push(last.delivery_id.clone());
            cursor = Some(After {
                received_at: last.received_at,
                delivery_id: last.delivery_id.clone(),
            });
        }
        assert_eq!(seen, ["d0007", "d0107", "d0207", "d0307"]);
    }
}
