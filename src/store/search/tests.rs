//! The search queries' plans on SQLite, and what they find.
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

async fn database(
    n: usize,
) -> (
    tempfile::TempDir,
    sea_orm::DatabaseConnection,
    DateTime<Utc>,
) {
    let (dir, db) = crate::store::test_database().await;
    let now = Utc::now();
    // Ids sort as their reception times do, as UUIDv7 ids of a reception do.
    let rows: Vec<_> = (0..n)
        .map(|i| row(i, now - chrono::Duration::seconds((n - i) as i64)))
        .collect();
    for chunk in rows.chunks(500) {
        delivery::Entity::insert_many(chunk.to_vec())
            .exec_without_returning(&db)
            .await
            .unwrap();
    }
    db.execute_unprepared("ANALYZE").await.unwrap();
    (dir, db, now)
}

fn by(text: &str) -> Filter {
    Filter {
        q: Some(Query::Exact {
            texts: vec![text.to_owned(), text.to_ascii_uppercase()],
            resources: vec![text.to_owned(), format!("hmac:{text}")],
        }),
        ..Filter::default()
    }
}

fn starting(text: &str) -> Filter {
    Filter {
        q: Some(Query::Prefix {
            spellings: crate::domain::search::spellings(text),
        }),
        ..Filter::default()
    }
}

fn reads_no_table(plan: &[String]) {
    assert!(
        !plan.iter().any(|step| step.starts_with("SCAN deliveries")),
        "{plan:?}"
    );
}

async fn ids(db: &sea_orm::DatabaseConnection, filter: &Filter, window: Window<'_>) -> Vec<String> {
    page(db, filter, window, 500)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.delivery_id)
        .collect()
}

#[tokio::test]
async fn each_kind_of_search_and_every_page_reads_an_index_not_the_table() {
    let (_dir, db, _) = database(400).await;
    let after = After {
        delivery_id: "d0100".into(),
    };
    let indexed = TextOrder::Indexed;
    let queries = [
        matching(&by("pay_7"), Window::Newest, indexed),
        matching(&by("d0007"), Window::Older(&after), indexed),
        matching(&Filter::default(), Window::Older(&after), indexed),
        matching(&Filter::default(), Window::Newer(&after), indexed),
        matching(&starting("pay_7"), Window::Newest, indexed),
        matching(&starting("evt_12"), Window::Newer(&after), indexed),
    ];
    for query in queries {
        reads_no_table(&crate::store::sqlite_plan(&db, &query).await);
    }
    // Newest first is the primary key read backwards: nothing to sort.
    for window in [Window::Newest, Window::Older(&after), Window::Newer(&after)] {
        let plan =
            crate::store::sqlite_plan(&db, &matching(&Filter::default(), window, indexed)).await;
        assert!(
            plan.iter()
                .any(|s| s.contains("sqlite_autoindex_deliveries_1")),
            "{plan:?}"
        );
        assert!(!plan.iter().any(|s| s.contains("TEMP B-TREE")), "{plan:?}");
    }
    for filter in [by("pay_7"), starting("pay_7")] {
        let plan =
            crate::store::sqlite_plan(&db, &matching(&filter, Window::Newest, indexed)).await;
        for index in [
            "deliveries_resource",
            "deliveries_business_key",
            "deliveries_provider_event_id",
        ] {
            assert!(plan.iter().any(|step| step.contains(index)), "{plan:?}");
        }
    }
    // A count reads the same indexes, and no more of them than its cap.
    let counting = counting(&starting("pay_7"), indexed, 1000);
    let plan = crate::store::sqlite_plan_of(&db, db.get_database_backend().build(&counting)).await;
    reads_no_table(&plan);
    assert!(
        plan.iter()
            .any(|s| s.contains("deliveries_resource (resource>? AND resource<?)")),
        "{plan:?}"
    );
    // Each neighbour is one step into one index.
    for (_, query) in neighbour_queries("pay_77") {
        let plan = crate::store::sqlite_plan(&db, &query).await;
        reads_no_table(&plan);
        assert!(!plan.iter().any(|s| s.contains("TEMP B-TREE")), "{plan:?}");
    }
    // Walking pages by cursor sees each row once, newest first.
    let mut seen = Vec::new();
    let mut cursor: Option<After> = None;
    loop {
        let window = cursor.as_ref().map_or(Window::Newest, Window::Older);
        let page = page(&db, &by("pay_7"), window, 1).await.unwrap();
        let Some(last) = page.last() else { break };
        seen.push(last.delivery_id.clone());
        cursor = Some(After {
            delivery_id: last.delivery_id.clone(),
        });
    }
    assert_eq!(seen, ["d0307", "d0207", "d0107", "d0007"]);
}

#[tokio::test]
async fn a_prefix_finds_every_value_that_starts_with_it_in_any_searched_column() {
    let (_dir, db, _) = database(400).await;
    // `pay_7` starts pay_7 and pay_70…pay_79: rows 7, 70…79, 107, 170…
    let found = ids(&db, &starting("pay_7"), Window::Newest).await;
    assert_eq!(found.len(), 44, "{found:?}");
    assert!(found.iter().all(|id| {
        let i: usize = id[1..].parse().unwrap();
        (i % 100).to_string().starts_with('7')
    }));
    // the delivery id, the provider's id, the business key, upper-cased
    assert_eq!(ids(&db, &starting("D039"), Window::Newest).await.len(), 10);
    assert_eq!(ids(&db, &starting("evt_39"), Window::Newest).await.len(), 5);
    assert_eq!(ids(&db, &starting("k39"), Window::Newest).await.len(), 11);
    assert!(ids(&db, &starting("k_4"), Window::Newest).await.is_empty());
    // counted, up to the cap
    assert_eq!(count(&db, &starting("pay_7"), 1000).await.unwrap(), 44);
    assert_eq!(count(&db, &starting("pay_7"), 10).await.unwrap(), 11);
    assert_eq!(count(&db, &Filter::default(), 1000).await.unwrap(), 400);
    assert_eq!(count(&db, &by("nothing"), 1000).await.unwrap(), 0);
}

#[tokio::test]
async fn the_page_before_a_row_is_the_page_that_led_to_it() {
    let (_dir, db, _) = database(30).await;
    let all = ids(&db, &Filter::default(), Window::Newest).await;
    let row = delivery::Entity::find_by_id(all[10].clone())
        .one(&db)
        .await
        .unwrap()
        .unwrap();
    let tenth = After {
        delivery_id: row.delivery_id,
    };
    let before = page(&db, &Filter::default(), Window::Newer(&tenth), 4)
        .await
        .unwrap();
    let before: Vec<_> = before.into_iter().map(|r| r.delivery_id).collect();
    assert_eq!(before, all[6..10]);
    let after = page(&db, &Filter::default(), Window::Older(&tenth), 4)
        .await
        .unwrap();
    let after: Vec<_> = after.into_iter().map(|r| r.delivery_id).collect();
    assert_eq!(after, all[11..15]);
}
