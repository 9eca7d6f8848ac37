//! What the database does with a search by an id's beginning, its count and
//! its "did you mean" look-ups, on the backend under test: each reads the
//! searched columns' own indexes (`delivery_search`), never the table —
//! on PostgreSQL, in the database's collation, which the ranges must use.

use chrono::{Duration, Utc};
use sea_orm::{
    ConnectionTrait, DatabaseConnection, DbBackend, EntityTrait, QueryTrait, Statement,
    TransactionTrait,
};
use unicity::domain::search::spellings;
use unicity::store::entities::delivery;
use unicity::store::id_range;
use unicity::store::search::{
    After, Filter, Query, TextOrder, Window, counting, matching, neighbour_queries, page,
    text_order,
};

use crate::support::app::spawn_app;

/// `n` searchable deliveries, as the history of a busy day holds them.
/// Returns the moment row 0 was received; row i was received i seconds
/// before it.
async fn history(db: &DatabaseConnection, n: usize) -> chrono::DateTime<Utc> {
    let now = Utc::now();
    let rows: Vec<delivery::ActiveModel> = (0..n)
        .map(|i| {
            let received_at = now - Duration::seconds(i as i64);
            let row = delivery::Model {
                // The id a delivery is given at its reception.
                delivery_id: id_range::v7_at(received_at).to_string(),
                source: "open".into(),
                tenant: "acme".into(),
                provider: "norefid".into(),
                environment: "test".into(),
                received_at,
                status: "decided".into(),
                event_type: Some("refund.created".into()),
                provider_event_id: Some(format!("evt_{i:08}")),
                transport_key: None,
                business_key: Some(format!("norefid-refund-ref@1:{i:064x}")),
                strategy: Some("norefid-refund-ref@1".into()),
                strength: Some("strong".into()),
                decision: Some("process".into()),
                reason: Some("new_key".into()),
                layer: None,
                reference_delivery_id: None,
                effect_id: None,
                case_id: None,
                decided_at: None,
                resource: Some(format!("pay_{i:08}")),
                received_position: None,
            };
            sea_orm::IntoActiveModel::into_active_model(row)
        })
        .collect();
    for chunk in rows.chunks(500) {
        delivery::Entity::insert_many(chunk.to_vec())
            .exec_without_returning(db)
            .await
            .expect("rows written");
    }
    db.execute_unprepared("ANALYZE").await.expect("statistics");
    now
}

/// The plan of `statement`, one line a step. On PostgreSQL sequential scans
/// are priced out, so that a plan reads the table only when no index can
/// answer (a small table would otherwise be read whole by choice).
async fn plan(db: &DatabaseConnection, statement: Statement) -> String {
    let backend = db.get_database_backend();
    let (explain, column) = match backend {
        DbBackend::Postgres => ("EXPLAIN", "QUERY PLAN"),
        _ => ("EXPLAIN QUERY PLAN", "detail"),
    };
    let explain = Statement::from_sql_and_values(
        backend,
        format!("{explain} {}", statement.sql),
        statement.values.map(|v| v.0).unwrap_or_default(),
    );
    let txn = db.begin().await.expect("a transaction");
    if backend == DbBackend::Postgres {
        txn.execute_unprepared("SET LOCAL enable_seqscan = off")
            .await
            .expect("set");
    }
    let rows = txn.query_all_raw(explain).await.expect("a plan");
    txn.commit().await.expect("done");
    rows.iter()
        .map(|row| row.try_get::<String>("", column).expect("a step"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn reads_the_table(plan: &str) -> bool {
    plan.contains("Seq Scan on deliveries") || plan.contains("SCAN deliveries")
}

#[tokio::test]
async fn a_prefix_its_count_and_its_neighbours_read_the_searched_indexes() {
    let app = spawn_app().await;
    let db = &app.db;
    history(db, 3000).await;
    let backend = db.get_database_backend();
    let order = text_order(db).await.expect("the collation");
    // The test databases sort text by code point (`C.UTF-8`, SQLite's BINARY)
    assert_eq!(order, TextOrder::Indexed);
    let prefix = Filter {
        q: Some(Query::Prefix {
            spellings: spellings("pay_000012"),
        }),
        ..Filter::default()
    };

    // The count: a range of each searched column's index
    let count = plan(db, backend.build(&counting(&prefix, order, 1000))).await;
    assert!(!reads_the_table(&count), "{count}");
    for index in [
        "deliveries_resource",
        "deliveries_provider_event_id",
        "deliveries_business_key",
    ] {
        assert!(count.contains(index), "{index} in\n{count}");
    }
    // The page: the same ranges, or the newest-first index
    let page = plan(db, matching(&prefix, Window::Newest, order).build(backend)).await;
    assert!(!reads_the_table(&page), "{page}");
    // "Did you mean": one step into one index each, in its order, no sort
    for (column, query) in neighbour_queries("pay_00001234x") {
        let step = plan(db, query.build(backend)).await;
        assert!(!reads_the_table(&step), "{column}: {step}");
        assert!(
            !step.contains("Sort") && !step.contains("TEMP B-TREE"),
            "{column}: {step}"
        );
    }

    if backend == DbBackend::Postgres {
        // Named in the `C` collation, the same ranges no index can answer:
        // the collation the ranges use must be the indexes' own.
        let collated = plan(
            db,
            backend.build(&counting(&prefix, TextOrder::Explicit, 1000)),
        )
        .await;
        assert!(reads_the_table(&collated), "{collated}");
    }
}

#[tokio::test]
async fn newest_first_and_a_window_of_reception_times_read_the_primary_key() {
    let app = spawn_app().await;
    let db = &app.db;
    // Half a second after the history's own `now`, whatever the preload
    // took: row i is i + 0.5 seconds old, never on a window's edge.
    let now = history(db, 3000).await + Duration::milliseconds(500);
    let backend = db.get_database_backend();
    let order = TextOrder::Indexed;
    let window = Filter {
        from: Some(now - Duration::seconds(1500)),
        to: Some(now - Duration::seconds(1000)),
        ..Filter::default()
    };
    let middle = After {
        delivery_id: id_range::v7_at(now - Duration::seconds(1200)).to_string(),
    };
    // The first page walks the key from its end (a page's LIMIT stops it);
    // every other page and window starts at a position in it.
    for (filter, window, bounded) in [
        (&Filter::default(), Window::Newest, false),
        (&Filter::default(), Window::Older(&middle), true),
        (&Filter::default(), Window::Newer(&middle), true),
        (&window, Window::Newest, true),
    ] {
        let step = plan(db, matching(filter, window, order).build(backend)).await;
        assert!(!bounded || !reads_the_table(&step), "{step}");
        assert!(!step.contains("Seq Scan"), "{step}");
        assert!(
            step.contains("deliveries_pkey") || step.contains("sqlite_autoindex_deliveries_1"),
            "{step}"
        );
        assert!(
            !step.contains("Sort") && !step.contains("TEMP B-TREE"),
            "{step}"
        );
    }
    // The window holds the deliveries received in it, newest first, and no
    // other: row i was received i + 0.5 seconds before `now`.
    let found = page(db, &window, Window::Newest, 1000)
        .await
        .expect("a page");
    let ages: Vec<i64> = found
        .iter()
        .map(|row| (now - row.received_at).num_seconds())
        .collect();
    assert_eq!(ages.len(), 500, "{ages:?}");
    assert!(ages.windows(2).all(|w| w[0] < w[1]), "{ages:?}");
    assert!(
        ages.iter().all(|age| (1000..=1500).contains(age)),
        "{ages:?}"
    );
    let ids: Vec<&str> = found.iter().map(|r| r.delivery_id.as_str()).collect();
    let mut sorted = ids.clone();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(ids, sorted);
    // The dashboard's windows are ranges of the same key, exact at the edge:
    // rows 0 to 1,499 were received in the last 1,500 seconds.
    let counted = unicity::store::dashboard::collisions(db, now - Duration::seconds(1500))
        .await
        .expect("counts");
    assert_eq!(counted.len(), 1, "{counted:?}");
    assert_eq!(counted[0].deliveries, 1500, "{counted:?}");
}

/// A case is found by its delivery through an index: the writer looks up
/// the case a lease's expiry opened, and a breaker's evaluations skip the
/// ignored deliveries a case flags, one probe each.
#[tokio::test]
async fn a_case_is_found_by_its_delivery_without_reading_every_case() {
    let app = spawn_app().await;
    let db = &app.db;
    let by_delivery = Statement::from_string(
        db.get_database_backend(),
        "SELECT case_id FROM cases WHERE delivery_id = '01a24ed7-9730-74c0-9be7-73e53acf3715'",
    );
    let plan = plan(db, by_delivery).await;
    assert!(plan.contains("cases_delivery"), "{plan}");
}
