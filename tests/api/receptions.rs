//! A delivery's reception is found through the deliveries read model
//! (migration 051): an upgrade fills each row's `received_position` from
//! the journal and replaces the index of every journal row by delivery with
//! one of the rows that follow a reception, and a delivery's events read the
//! same afterwards, folded or not, with what followed them.

use migration::{Migrator, MigratorTrait};
use sea_orm::{ConnectionTrait, DatabaseConnection};
use unicity::domain::delivery::DeliveryId;
use unicity::domain::journal::JournalEvent;

use crate::support::app::fresh_database;
use crate::support::schema::{first_column, has_index};

/// The migrations up to and including 050.
const BEFORE_RECEPTIONS: u32 = 27;

const DECIDED: &str = include_str!("../../src/domain/journal/frozen/DeliveryDecided.v1.json");
const RECEIVED: &str = include_str!("../../src/domain/journal/frozen/DeliveryReceived.v1.json");
const DERIVED: &str = include_str!("../../src/domain/journal/frozen/KeyDerived.v2.json");
const MADE: &str = include_str!("../../src/domain/journal/frozen/DecisionMade.v1.json");
const RESOLVED: &str = include_str!("../../src/domain/journal/frozen/CaseResolved.v1.json");

async fn journal(
    db: &DatabaseConnection,
    id: &str,
    (event_type, version, data): (&str, i32, &str),
) {
    let data = data.replace('\'', "''");
    db.execute_unprepared(&format!(
        "INSERT INTO journal (delivery_id, event_type, event_version, data, recorded_at) \
         VALUES ('{id}', '{event_type}', {version}, '{data}', '2026-12-01T00:00:00Z')"
    ))
    .await
    .expect("a journal row");
}

async fn delivery(db: &DatabaseConnection, id: &str) {
    db.execute_unprepared(&format!(
        "INSERT INTO deliveries (delivery_id, source, tenant, provider, environment, \
         received_at, status) VALUES ('{id}', 's', 't', 'p', 'e', '2026-12-01T00:00:00Z', \
         'received')"
    ))
    .await
    .expect("a read-model row");
}

async fn types_of(db: &DatabaseConnection, id: &str) -> Vec<(i64, &'static str)> {
    let id: DeliveryId = id.parse().unwrap();
    unicity::store::journal::for_delivery(db, id)
        .await
        .expect("its events read")
        .iter()
        .map(|e| (e.position, JournalEvent::event_type(&e.event)))
        .collect()
}

#[tokio::test]
async fn an_upgrade_finds_each_reception_through_the_read_model_and_keeps_every_event() {
    let (url, _dir) = fresh_database().await;
    let db = unicity::store::connect(&url).await.expect("connects");
    Migrator::up(&db, Some(BEFORE_RECEPTIONS))
        .await
        .expect("the migrations before apply");
    assert!(has_index(&db, "journal_delivery_id").await);

    // A folded reception and a case resolved after it; a reception in rows
    // of its own; a reception the read model had not reached.
    let folded = uuid::Uuid::now_v7().to_string();
    let apart = uuid::Uuid::now_v7().to_string();
    let unprojected = uuid::Uuid::now_v7().to_string();
    journal(&db, &folded, ("DeliveryDecided", 1, DECIDED)).await;
    journal(&db, &apart, ("DeliveryReceived", 1, RECEIVED)).await;
    journal(&db, &apart, ("KeyDerived", 2, DERIVED)).await;
    journal(&db, &folded, ("CaseResolved", 1, RESOLVED)).await;
    journal(&db, &apart, ("DecisionMade", 1, MADE)).await;
    journal(&db, &unprojected, ("DeliveryReceived", 1, RECEIVED)).await;
    delivery(&db, &folded).await;
    delivery(&db, &apart).await;
    let at = first_column::<i64>(&db, "SELECT position FROM journal ORDER BY position").await;
    db.execute_unprepared(&format!(
        "UPDATE projector_checkpoints SET position = {} WHERE name = 'deliveries'",
        at[4]
    ))
    .await
    .expect("the read model's checkpoint");

    unicity::store::migrate(&db)
        .await
        .expect("the rest applies");

    assert!(!has_index(&db, "journal_delivery_id").await);
    assert!(has_index(&db, "journal_after_reception").await);
    for (id, position) in [(&folded, at[0]), (&apart, at[1])] {
        let held = format!("SELECT received_position FROM deliveries WHERE delivery_id = '{id}'");
        assert_eq!(first_column::<i64>(&db, &held).await, [position], "{id}");
    }

    let mut expected_folded: Vec<(i64, &str)> = [
        "DeliveryReceived",
        "KeyDerived",
        "KeyReserved",
        "EffectApplied",
        "DecisionMade",
    ]
    .into_iter()
    .map(|t| (at[0], t))
    .collect();
    expected_folded.push((at[3], "CaseResolved"));
    assert_eq!(types_of(&db, &folded).await, expected_folded);
    assert_eq!(
        types_of(&db, &apart).await,
        [
            (at[1], "DeliveryReceived"),
            (at[2], "KeyDerived"),
            (at[4], "DecisionMade")
        ]
    );
    assert_eq!(
        types_of(&db, &unprojected).await,
        [(at[5], "DeliveryReceived")]
    );
}
