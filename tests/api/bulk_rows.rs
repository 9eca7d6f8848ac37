//! A batch's rows reach each table as they were made, on either backend. On
//! PostgreSQL a table's rows travel in one statement of typed arrays, where a
//! NULL is carried as a placeholder of its type beside a flag: a value equal
//! to that placeholder (empty text, zero, the epoch, no bytes, JSON `null`)
//! stays a value and NULL stays NULL; a row whose key is taken is skipped and
//! counted out; journal rows keep the order they were appended in. A batch's
//! rows of every table go in one statement there, unless a key it claims is
//! also settled (the update must see the claim): a claim the database
//! refuses fails the batch with nothing of it committed. The
//! writer's statements never change text, so PostgreSQL plans each once per
//! connection: a plan made on an empty table still finds keys by index.

use chrono::{DateTime, TimeDelta, Utc};
use migration::{Migrator, MigratorTrait};
use sea_orm::{
    ActiveModelTrait, ConnectionTrait, Database, DatabaseConnection, DbBackend, DbErr, EntityTrait,
    IntoActiveModel, QueryOrder, Statement, TransactionTrait,
};
use serde_json::json;
use unicity::domain::delivery::DeliveryId;
use unicity::domain::journal::{CaseCommented, EffectSettled, JournalEvent, SettlementOutcome};
use unicity::store::deferred::Deferred;
use unicity::store::entities::{effect, journal as journal_row, raw_body, transport_link};
use unicity::store::key_index::KeyIndex;
use unicity::store::{self, bulk, journal};

use crate::support::app::fresh_database;

async fn migrated() -> (DatabaseConnection, Option<tempfile::TempDir>) {
    let (db, _, dir) = migrated_at().await;
    (db, dir)
}

async fn migrated_at() -> (DatabaseConnection, String, Option<tempfile::TempDir>) {
    let (url, dir) = fresh_database().await;
    let db = Database::connect(url.as_str()).await.expect("connects");
    Migrator::up(&db, None).await.expect("migrations apply");
    (db, url, dir)
}

fn at(secs: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000 + secs, 0).unwrap()
}

/// An effect with every optional column empty.
fn bare(id: &str) -> effect::Model {
    effect::Model {
        effect_id: id.to_owned(),
        key: format!("stripe-refund@1:{id}"),
        effect_type: "refund".to_owned(),
        criticality: "critical".to_owned(),
        state: "reserved".to_owned(),
        fencing_token: None,
        lease_until: None,
        expires_at: None,
        key_purged: false,
        sink: "record".to_owned(),
        result: None,
        downstream_ref: None,
        provider_ref: None,
        first_delivery_id: format!("delivery-{id}"),
        discriminants: json!({}),
        created_at: at(0),
        settled_at: None,
        evidence_purged_at: None,
    }
}

#[tokio::test]
async fn null_and_the_values_standing_for_it_stay_apart_and_taken_keys_are_skipped() {
    let (db, _dir) = migrated().await;
    // Every optional column holding exactly what a NULL travels as.
    let placeholders = effect::Model {
        fencing_token: Some(0),
        lease_until: Some(DateTime::UNIX_EPOCH),
        expires_at: Some(DateTime::UNIX_EPOCH),
        result: Some(serde_json::Value::Null),
        downstream_ref: Some(String::new()),
        provider_ref: Some(String::new()),
        settled_at: Some(DateTime::UNIX_EPOCH),
        evidence_purged_at: Some(DateTime::UNIX_EPOCH),
        ..bare("b")
    };
    let full = effect::Model {
        state: "applied".to_owned(),
        fencing_token: Some(7),
        lease_until: Some(at(30)),
        expires_at: Some(at(86_400)),
        key_purged: true,
        result: Some(json!({"refund": "re_1", "amount": 1200})),
        downstream_ref: Some("dr_1".to_owned()),
        provider_ref: Some("re_1".to_owned()),
        discriminants: json!({"amount": 1200, "reason": "duplicate"}),
        settled_at: Some(at(2)),
        ..bare("c")
    };
    let first = vec![bare("a"), placeholders.clone(), full.clone()];
    let models = |rows: &[effect::Model]| {
        rows.iter()
            .cloned()
            .map(|r| r.into_active_model().reset_all())
            .collect::<Vec<_>>()
    };
    assert_eq!(bulk::insert(&db, models(&first)).await.unwrap(), 3);
    // A second batch whose first row's key is taken: only the new row lands.
    let again = vec![placeholders.clone(), bare("d")];
    assert_eq!(bulk::insert(&db, models(&again)).await.unwrap(), 1);
    assert_eq!(bulk::insert(&db, models(&[])).await.unwrap(), 0);

    let stored = effect::Entity::find()
        .order_by_asc(effect::Column::EffectId)
        .all(&db)
        .await
        .unwrap();
    assert_eq!(stored, vec![bare("a"), placeholders, full, bare("d")]);
}

fn link(key: &str) -> transport_link::Model {
    transport_link::Model {
        transport_key: key.to_owned(),
        first_delivery_id: format!("delivery-{key}"),
        body_fingerprint: "sha256:00".to_owned(),
        business_key: None,
        created_at: at(0),
    }
}

fn comment(i: usize) -> (Option<DeliveryId>, JournalEvent) {
    let event = JournalEvent::CaseCommented(CaseCommented {
        case_id: uuid::Uuid::now_v7(),
        commented_by: format!("operator-{i}"),
        note: String::new(),
    });
    (None, event)
}

#[tokio::test]
async fn a_claim_the_database_refuses_fails_the_batch_and_nothing_of_it_commits() {
    let (db, _dir) = migrated().await;
    // Another writer took a transport key meanwhile.
    let txn = db.begin().await.unwrap();
    let mut other = Deferred::with_index(KeyIndex::default());
    other.link(link("taken"));
    other.flush(&txn).await.unwrap();
    txn.commit().await.unwrap();

    // This batch claimed it in memory too, beside rows of other tables.
    let txn = db.begin().await.unwrap();
    let mut batch = Deferred::with_index(KeyIndex::default());
    batch.link(link("new"));
    batch.link(link("taken"));
    batch.effect(bare("e"));
    batch.journal(vec![comment(0), comment(1)], at(1));
    let refused = batch.flush(&txn).await.unwrap_err();
    assert!(
        refused.to_string().contains("refused by the database"),
        "{refused}"
    );
    txn.rollback().await.unwrap();

    let links = transport_link::Entity::find().all(&db).await.unwrap();
    assert_eq!(links, vec![link("taken")]);
    assert!(effect::Entity::find().all(&db).await.unwrap().is_empty());
    assert!(
        journal_row::Entity::find()
            .all(&db)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn a_key_claimed_and_settled_in_one_batch_is_settled() {
    let (db, _dir) = migrated().await;
    let reserved = effect::Model {
        fencing_token: Some(1),
        lease_until: Some(at(30)),
        ..bare("s")
    };
    let txn = db.begin().await.unwrap();
    let mut batch = Deferred::with_index(KeyIndex::default());
    batch.link(link("t"));
    batch.effect(reserved.clone());
    batch.settlement(
        EffectSettled {
            key: reserved.key.clone(),
            effect_id: uuid::Uuid::now_v7(),
            fencing_token: 1,
            outcome: SettlementOutcome::Applied,
            result: Some(json!({"refund": "re_9"})),
            authoritative_ref: Some("re_9".to_owned()),
            error: None,
            case_id: None,
            delivery_id: DeliveryId::from_uuid(uuid::Uuid::now_v7()),
            call: None,
        },
        at(3),
    );
    batch.journal(vec![comment(0)], at(3));
    batch.flush(&txn).await.unwrap();
    txn.commit().await.unwrap();

    let stored = effect::Entity::find().all(&db).await.unwrap();
    let settled = effect::Model {
        state: SettlementOutcome::Applied.state().to_owned(),
        lease_until: None,
        result: Some(json!({"refund": "re_9"})),
        downstream_ref: Some("re_9".to_owned()),
        settled_at: Some(at(3)),
        ..reserved
    };
    assert_eq!(stored, vec![settled]);
    assert_eq!(journal_row::Entity::find().all(&db).await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_body_that_is_null_differs_from_an_empty_one() {
    let (db, _dir) = migrated().await;
    let body = |sha: &str, body: Option<Vec<u8>>| raw_body::Model {
        sha256: sha.to_owned(),
        size: body.as_ref().map_or(3, |b| b.len() as i64),
        body,
        stored_at: at(1),
        redacted_at: None,
    };
    let rows = vec![
        raw_body::Model {
            redacted_at: Some(at(5)),
            ..body("redacted", None)
        },
        body("empty", Some(Vec::new())),
        body("bytes", Some(vec![0, 159, 146, 150, 255])),
    ];
    let active = rows
        .iter()
        .cloned()
        .map(|r| r.into_active_model().reset_all())
        .collect();
    assert_eq!(bulk::insert(&db, active).await.unwrap(), 3);
    let mut stored = raw_body::Entity::find().all(&db).await.unwrap();
    stored.sort_by(|a, b| a.sha256.cmp(&b.sha256));
    let mut expected = rows;
    expected.sort_by(|a, b| a.sha256.cmp(&b.sha256));
    assert_eq!(stored, expected);
}

#[tokio::test]
async fn journal_rows_keep_the_order_they_were_appended_in_and_their_text() {
    let (db, _dir) = migrated().await;
    let case_id = uuid::Uuid::now_v7();
    // More rows than one SQLite statement takes; every third without a
    // delivery; notes whose JSON must come back as written.
    let events: Vec<(Option<DeliveryId>, JournalEvent)> = (0..700)
        .map(|i| {
            let delivery = (i % 3 != 0).then(|| DeliveryId::from_uuid(uuid::Uuid::now_v7()));
            let note = match i % 4 {
                0 => String::new(),
                1 => "null".to_owned(),
                2 => format!("refund {i} \u{e9}\u{2028}\"quoted\" \\ {{}}"),
                _ => "{\"a\":1}".to_owned(),
            };
            let event = JournalEvent::CaseCommented(CaseCommented {
                case_id,
                commented_by: format!("operator-{i}"),
                note,
            });
            (delivery, event)
        })
        .collect();
    let appended = events.clone();
    store::transaction(&db, async move |tx| {
        for (i, (delivery, event)) in appended.iter().enumerate() {
            tx.append(*delivery, event, at(0) + TimeDelta::milliseconds(i as i64));
        }
        Ok::<_, DbErr>(())
    })
    .await
    .unwrap();

    let stored = journal::page_after(&db, 0, 1_000).await.unwrap();
    assert_eq!(stored.len(), events.len());
    assert!(stored.windows(2).all(|w| w[0].position < w[1].position));
    for (i, (row, (delivery, event))) in stored.iter().zip(&events).enumerate() {
        assert_eq!(row.delivery_id, *delivery, "row {i}");
        assert_eq!(&row.event, event, "row {i}");
        assert_eq!(row.recorded_at, at(0) + TimeDelta::milliseconds(i as i64));
    }
}

/// The plan `conn` keeps for a batch's key read once it stops planning each
/// execution (as it does after five), made now, on an empty table.
async fn kept_plan_of_a_key_read(conn: &DatabaseConnection) -> String {
    let txn = conn.begin().await.unwrap();
    for sql in [
        "SET LOCAL plan_cache_mode = force_generic_plan",
        "PREPARE key_read(text[]) AS SELECT * FROM effects WHERE key = ANY($1)",
    ] {
        txn.execute_unprepared(sql).await.unwrap();
    }
    let rows = txn
        .query_all_raw(Statement::from_string(
            DbBackend::Postgres,
            "EXPLAIN EXECUTE key_read('{a,b}')",
        ))
        .await
        .unwrap();
    txn.execute_unprepared("DEALLOCATE key_read").await.unwrap();
    txn.rollback().await.unwrap();
    rows.iter()
        .map(|row| row.try_get::<String>("", "QUERY PLAN").unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn a_writer_finds_keys_by_index_with_a_plan_made_on_an_empty_table() {
    let (db, url, _dir) = migrated_at().await;
    if db.get_database_backend() != DbBackend::Postgres {
        // SQLite plans each statement when it is prepared, against the
        // schema only: its key reads always use the index.
        return;
    }
    // A plan made now on any other connection reads the table whole, and
    // would go on doing so as it grows.
    let shared = unicity::store::connect(&url).await.unwrap();
    let plan = kept_plan_of_a_key_read(&shared).await;
    assert!(plan.contains("Seq Scan on effects"), "{plan}");
    let writer = unicity::store::connect_writer(&url).await.unwrap();
    let plan = kept_plan_of_a_key_read(&writer).await;
    assert!(!plan.contains("Seq Scan"), "{plan}");
    assert!(plan.contains("effects_key_key"), "{plan}");
}
