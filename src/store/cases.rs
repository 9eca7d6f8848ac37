//! Reading cases (the `cases` projection).

use sea_orm::{ConnectionTrait, DbErr, EntityTrait};

use super::entities::case;
use crate::domain::cases::CaseStatus;

/// The case `case_id`, if there is one.
pub async fn find<C: ConnectionTrait>(
    conn: &C,
    case_id: uuid::Uuid,
) -> Result<Option<case::Model>, DbErr> {
    case::Entity::find_by_id(case_id.to_string())
        .one(conn)
        .await
}

/// The open case the expiry of `effect_id`'s lease under `fencing_token`
/// opened (outcome unknown), filed under the key's first delivery.
pub async fn open_expiry<C: ConnectionTrait>(
    conn: &C,
    first_delivery_id: &str,
    effect_id: uuid::Uuid,
    fencing_token: i64,
) -> Result<Option<uuid::Uuid>, DbErr> {
    use crate::domain::decision::Reason;
    use sea_orm::{ColumnTrait, QueryFilter};
    let open = case::Entity::find()
        .filter(case::Column::DeliveryId.eq(first_delivery_id))
        .filter(case::Column::Reason.eq(Reason::OutcomeUnknown.as_str()))
        .filter(case::Column::Status.eq(CaseStatus::Open.as_str()))
        .all(conn)
        .await?;
    let effect_id = effect_id.to_string();
    Ok(open
        .into_iter()
        .find(|c| {
            c.details["effect_id"].as_str() == Some(effect_id.as_str())
                && c.details["fencing_token"].as_i64() == Some(fencing_token)
        })
        .and_then(|c| c.case_id.parse().ok()))
}

/// An open missing-effect finding: its case, the operation it stands for,
/// and the effect it was raised for, when an effect that cited the
/// operation failed (`services::reconcile::findings::owed`).
#[derive(Debug, Clone)]
pub struct OpenFinding {
    pub case_id: uuid::Uuid,
    pub operation: crate::domain::journal::ProviderOperation,
    pub failed_effect: Option<uuid::Uuid>,
}

/// The open missing-effect findings of `provider`, at most `limit` (an
/// operation may have more than one: a finding raised again for an effect
/// that failed). Read a page at a time (the provider is in each
/// case's details, which no index reads): another provider's findings never
/// take this one's places.
pub async fn open_missing<C: ConnectionTrait>(
    conn: &C,
    provider: &str,
    limit: usize,
) -> Result<Vec<OpenFinding>, DbErr> {
    use crate::domain::journal::DiscrepancyKind;
    use sea_orm::{ColumnTrait, QueryFilter, QueryOrder, QuerySelect};
    const PAGE: u64 = 1_000;
    let mut operations = Vec::new();
    let mut after = String::new();
    while operations.len() < limit {
        let page = case::Entity::find()
            .filter(case::Column::Reason.eq(DiscrepancyKind::MissingEffect.as_str()))
            .filter(case::Column::Status.eq(CaseStatus::Open.as_str()))
            .filter(case::Column::CaseId.gt(after.as_str()))
            .order_by_asc(case::Column::CaseId)
            .limit(PAGE)
            .all(conn)
            .await?;
        let Some(last) = page.last() else {
            break;
        };
        after = last.case_id.clone();
        operations.extend(
            page.into_iter()
                .filter(|c| c.details["provider"].as_str() == Some(provider))
                .filter_map(|c| {
                    let operation = serde_json::from_value(c.details["operation"].clone()).ok()?;
                    Some(OpenFinding {
                        case_id: c.case_id.parse().ok()?,
                        operation,
                        failed_effect: c.details["effect_id"]
                            .as_str()
                            .and_then(|id| id.parse().ok()),
                    })
                }),
        );
    }
    operations.truncate(limit);
    Ok(operations)
}

/// Which of `case_ids` are open (read in chunks: a run may name thousands).
pub async fn open_among<C: ConnectionTrait>(
    conn: &C,
    case_ids: &[uuid::Uuid],
) -> Result<Vec<uuid::Uuid>, DbErr> {
    Ok(among(conn, case_ids, Some(CaseStatus::Open))
        .await?
        .into_iter()
        .map(|(id, _)| id)
        .collect())
}

/// Which of `case_ids` exist, each with when it was resolved (`None`:
/// open).
pub async fn existing_among<C: ConnectionTrait>(
    conn: &C,
    case_ids: &[uuid::Uuid],
) -> Result<std::collections::HashMap<uuid::Uuid, Option<chrono::DateTime<chrono::Utc>>>, DbErr> {
    Ok(among(conn, case_ids, None).await?.into_iter().collect())
}

async fn among<C: ConnectionTrait>(
    conn: &C,
    case_ids: &[uuid::Uuid],
    status: Option<CaseStatus>,
) -> Result<Vec<(uuid::Uuid, Option<chrono::DateTime<chrono::Utc>>)>, DbErr> {
    use sea_orm::{ColumnTrait, QueryFilter, QuerySelect};
    let mut found = Vec::new();
    for chunk in case_ids.chunks(500) {
        let ids: Vec<String> = chunk.iter().map(uuid::Uuid::to_string).collect();
        let mut query = case::Entity::find()
            .select_only()
            .column(case::Column::CaseId)
            .column(case::Column::ResolvedAt)
            .filter(case::Column::CaseId.is_in(ids));
        if let Some(status) = status {
            query = query.filter(case::Column::Status.eq(status.as_str()));
        }
        let rows: Vec<(String, Option<chrono::DateTime<chrono::Utc>>)> =
            query.into_tuple().all(conn).await?;
        found.extend(
            rows.into_iter()
                .filter_map(|(id, at)| Some((id.parse::<uuid::Uuid>().ok()?, at))),
        );
    }
    Ok(found)
}

/// The queue status that lists cases whatever their status.
pub const ANY_STATUS: &str = "all";

/// Which cases a queue shows.
#[derive(Debug, Clone, Default)]
pub struct QueueFilter {
    /// `open` (the default), `resolved`, or [`ANY_STATUS`].
    pub status: Option<String>,
    pub reason: Option<String>,
    pub source: Option<String>,
    pub provider: Option<String>,
    pub event_type: Option<String>,
    /// Opened before this instant (older than an age).
    pub opened_before: Option<chrono::DateTime<chrono::Utc>>,
    /// Given to this operator (by name).
    pub assignee: Option<String>,
    /// Only cases keyed by these strategies (an effect type, a criticality).
    pub keys: Option<KeyScope>,
}

/// Cases whose business key a strategy of `strategies` (`name@version`)
/// derived, and, when `keyless`, cases without a key.
#[derive(Debug, Clone, Default)]
pub struct KeyScope {
    pub strategies: Vec<String>,
    pub keyless: bool,
}

impl KeyScope {
    /// Keys are `name@version:…`: a strategy's keys are those that begin
    /// with `name@version:`, compared as an equality of their first
    /// characters. Not a range between `name@version:` and `name@version;`:
    /// in a database whose collation sorts text by language (ICU, glibc
    /// `en_US`), punctuation weighs less than letters and such a range
    /// holds no key at all.
    fn condition(&self) -> sea_orm::Condition {
        use sea_orm::sea_query::{Expr, ExprTrait, Func};
        let mut any = sea_orm::Condition::any();
        if self.keyless {
            any = any.add(Expr::col(case::Column::BusinessKey).is_null());
        }
        for strategy in &self.strategies {
            let prefix = format!("{strategy}:");
            let length = i32::try_from(prefix.chars().count()).unwrap_or(i32::MAX);
            let head = Func::cust("substr")
                .arg(Expr::col(case::Column::BusinessKey))
                .arg(1_i32)
                .arg(length);
            any = any.add(Expr::expr(head).eq(prefix));
        }
        if any.is_empty() {
            // No strategy of the kind asked for: no case is of it.
            any = any.add(Expr::val(1).eq(0));
        }
        any
    }
}

/// One page of cases, oldest first.
pub async fn queue<C: ConnectionTrait>(
    conn: &C,
    filter: &QueueFilter,
    limit: u64,
    offset: u64,
) -> Result<Vec<case::Model>, DbErr> {
    use sea_orm::{QueryOrder, QuerySelect};
    matching(filter)
        .order_by_asc(case::Column::OpenedAt)
        .order_by_asc(case::Column::CaseId)
        .limit(limit)
        .offset(offset)
        .all(conn)
        .await
}

/// Where a listed case's delivery came from.
#[derive(Debug, Clone, sea_orm::FromQueryResult)]
pub struct QueueDelivery {
    pub delivery_id: String,
    pub source: String,
    pub provider: String,
    pub event_type: Option<String>,
}

/// The origin of the deliveries `ids` (one page of the queue), by primary key.
pub async fn queue_deliveries<C: ConnectionTrait>(
    conn: &C,
    ids: &[&str],
) -> Result<Vec<QueueDelivery>, DbErr> {
    use sea_orm::{ColumnTrait, QueryFilter, QuerySelect};

    use super::entities::delivery;

    if ids.is_empty() {
        return Ok(Vec::new());
    }
    delivery::Entity::find()
        .select_only()
        .column(delivery::Column::DeliveryId)
        .column(delivery::Column::Source)
        .column(delivery::Column::Provider)
        .column(delivery::Column::EventType)
        .filter(delivery::Column::DeliveryId.is_in(ids.iter().copied()))
        .into_model()
        .all(conn)
        .await
}

/// How many cases `filter` matches, per reason, whatever reason it names
/// (the queue's header: each count is the link that narrows to it).
pub async fn counts_matching<C: ConnectionTrait>(
    conn: &C,
    filter: &QueueFilter,
) -> Result<Vec<(String, i64)>, DbErr> {
    use sea_orm::{ColumnTrait, QuerySelect};
    let any_reason = QueueFilter {
        reason: None,
        ..filter.clone()
    };
    matching(&any_reason)
        .select_only()
        .column(case::Column::Reason)
        .column_as(case::Column::CaseId.count(), "n")
        .group_by(case::Column::Reason)
        .into_tuple()
        .all(conn)
        .await
}

/// The cases `filter` lets through, unordered.
fn matching(filter: &QueueFilter) -> sea_orm::Select<case::Entity> {
    use sea_orm::sea_query::{Expr, ExprTrait};
    use sea_orm::{ColumnTrait, QueryFilter};

    use super::entities::delivery;

    let status = filter
        .status
        .as_deref()
        .unwrap_or(CaseStatus::Open.as_str());
    let mut query = case::Entity::find();
    if status != ANY_STATUS {
        query = query.filter(case::Column::Status.eq(status));
    }
    if let Some(reason) = &filter.reason {
        query = query.filter(case::Column::Reason.eq(reason.as_str()));
    }
    if let Some(before) = filter.opened_before {
        query = query.filter(case::Column::OpenedAt.lt(before));
    }
    if let Some(assignee) = &filter.assignee {
        query = query.filter(case::Column::Assignee.eq(assignee.as_str()));
    }
    if let Some(keys) = &filter.keys {
        query = query.filter(keys.condition());
    }
    // A filter on the delivery is a primary-key probe per case, walking the
    // open cases oldest first (index `cases_status`) until the page is full:
    // measured with 1M deliveries and 10k open cases, an `IN (SELECT … WHERE
    // source = ?)` read every delivery of the source instead (281 ms median).
    let mut deliveries = super::delivery_named_by((case::Entity, case::Column::DeliveryId));
    let mut by_delivery = false;
    for (column, value) in [
        (delivery::Column::Source, &filter.source),
        (delivery::Column::Provider, &filter.provider),
        (delivery::Column::EventType, &filter.event_type),
    ] {
        if let Some(value) = value {
            deliveries.and_where(Expr::col((delivery::Entity, column)).eq(value.as_str()));
            by_delivery = true;
        }
    }
    if by_delivery {
        query = query.filter(Expr::exists(deliveries));
    }
    query
}

/// How many cases of `status` (any, for [`ANY_STATUS`]) there are per reason.
pub async fn counts_by_reason<C: ConnectionTrait>(
    conn: &C,
    status: &str,
) -> Result<Vec<(String, i64)>, DbErr> {
    let filter = QueueFilter {
        status: Some(status.to_owned()),
        ..QueueFilter::default()
    };
    counts_matching(conn, &filter).await
}

/// Open cases whose look-up is due again at `now`, oldest due first. Only
/// reasons a look-up settles: a case of another reason made due by an
/// earlier version would be asked nothing, stay due and take a place in
/// every batch.
pub async fn lookups_due<C: ConnectionTrait>(
    conn: &C,
    now: chrono::DateTime<chrono::Utc>,
    limit: u64,
) -> Result<Vec<uuid::Uuid>, DbErr> {
    use crate::domain::decision::Reason;
    use sea_orm::{ColumnTrait, QueryFilter, QueryOrder, QuerySelect};
    let asked = Reason::ALL
        .into_iter()
        .filter(|r| r.settled_by_asking())
        .map(Reason::as_str);
    let ids: Vec<String> = case::Entity::find()
        .select_only()
        .column(case::Column::CaseId)
        .filter(case::Column::NextLookupAt.lte(now))
        .filter(case::Column::Status.eq(CaseStatus::Open.as_str()))
        .filter(case::Column::Reason.is_in(asked))
        .order_by_asc(case::Column::NextLookupAt)
        .limit(limit)
        .into_tuple()
        .all(conn)
        .await?;
    Ok(ids.iter().filter_map(|id| id.parse().ok()).collect())
}

/// Cases opened at or after `at`, oldest first (a simulation's report).
pub async fn opened_since<C: ConnectionTrait>(
    conn: &C,
    at: chrono::DateTime<chrono::Utc>,
) -> Result<Vec<case::Model>, DbErr> {
    use sea_orm::{ColumnTrait, QueryFilter, QueryOrder};
    case::Entity::find()
        .filter(case::Column::OpenedAt.gte(at))
        .order_by_asc(case::Column::OpenedAt)
        .all(conn)
        .await
}

#[cfg(test)]
mod tests {
    use chrono::{Duration, Utc};
    use sea_orm::{ActiveModelTrait, IntoActiveModel};

    use super::*;

    fn due_case(reason: &str, minutes_ago: i64) -> case::Model {
        let now = Utc::now();
        case::Model {
            case_id: uuid::Uuid::now_v7().to_string(),
            delivery_id: String::new(),
            business_key: None,
            action: "reconcile".to_owned(),
            reason: reason.to_owned(),
            status: CaseStatus::Open.as_str().to_owned(),
            lookup_first: true,
            details: serde_json::json!({}),
            opened_at: now,
            resolved_at: None,
            resolution: None,
            resolved_by: None,
            lookups: 0,
            next_lookup_at: Some(now - Duration::minutes(minutes_ago)),
            assignee: None,
        }
    }

    #[tokio::test]
    async fn the_operations_carried_for_a_provider_are_its_own_however_many_others_have() {
        let (_dir, db) = crate::store::test_database().await;
        let finding = |provider: &str, operation: &str, minutes_ago: i64| {
            let mut case = due_case("missing_effect", minutes_ago);
            case.next_lookup_at = None;
            case.opened_at = Utc::now() - Duration::minutes(minutes_ago);
            case.details = serde_json::json!({
                "provider": provider,
                "operation": {"id": operation, "amount": 700, "currency": "EUR", "status": "succeeded"},
            });
            case
        };
        let rows = [
            finding("stripe", "re_s1", 30),
            finding("stripe", "re_s2", 20),
            finding("stripe", "re_s3", 15),
            finding("norefid", "re_n1", 10),
        ];
        for case in rows {
            case.into_active_model()
                .reset_all()
                .insert(&db)
                .await
                .unwrap();
        }
        let carried = open_missing(&db, "norefid", 2).await.unwrap();
        let ids: Vec<&str> = carried.iter().map(|f| f.operation.id.as_str()).collect();
        assert_eq!(ids, ["re_n1"]);
        assert_eq!(open_missing(&db, "stripe", 2).await.unwrap().len(), 2);
    }

    #[tokio::test]
    async fn a_case_no_look_up_settles_is_never_due_whatever_its_row_says() {
        let (_dir, db) = crate::store::test_database().await;
        // Rows an earlier version left due: a tripped breaker's case, older
        // than the look-alike and the unknown outcome a look-up settles.
        let stuck = due_case("breaker_tripped", 30);
        let look_alike = due_case("weak_match_critical", 20);
        let unknown = due_case("outcome_unknown", 10);
        for case in [&stuck, &look_alike, &unknown] {
            case.clone()
                .into_active_model()
                .reset_all()
                .insert(&db)
                .await
                .unwrap();
        }
        let due = lookups_due(&db, Utc::now(), 2).await.unwrap();
        let expected: Vec<uuid::Uuid> = [&look_alike, &unknown]
            .iter()
            .map(|c| c.case_id.parse().unwrap())
            .collect();
        assert_eq!(due, expected);
    }
}
