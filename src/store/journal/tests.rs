use super::*;
use crate::domain::journal::DeliveryDecided;

fn sample() -> DeliveryDecided {
    let stored = include_str!("../../domain/journal/frozen/DeliveryDecided.v1.json");
    serde_json::from_str(stored).expect("the frozen sample reads")
}

#[tokio::test]
async fn a_folded_row_spliced_from_its_parts_is_read_back_as_those_parts() {
    let decided = sample();
    let id = DeliveryId::from_uuid(uuid::Uuid::now_v7());
    let text = ReceptionText::new(&decided.received, &decided.key);
    let row = decided_row(
        id,
        text,
        decided.reserved.as_ref(),
        &decided.decision,
        Utc::now(),
    );
    // The splice is the JSON that serialising the whole would give.
    let spliced: serde_json::Value = serde_json::from_str(&row.data).expect("valid JSON");
    assert_eq!(spliced, serde_json::to_value(&decided).unwrap());

    let (_dir, db) = crate::store::test_database().await;
    insert(&db, vec![row]).await.unwrap();
    let read: Vec<JournalEvent> = for_delivery(&db, id)
        .await
        .unwrap()
        .into_iter()
        .map(|stored| stored.event)
        .collect();
    let names: Vec<&str> = read.iter().map(JournalEvent::event_type).collect();
    assert_eq!(
        names,
        [
            "DeliveryReceived",
            "KeyDerived",
            "KeyReserved",
            "EffectApplied",
            "DecisionMade"
        ]
    );
    assert_eq!(read, decided.parts(id).unwrap());
}

#[test]
fn a_reception_that_does_not_fold_is_journaled_as_its_two_events() {
    let decided = sample();
    let id = DeliveryId::from_uuid(uuid::Uuid::now_v7());
    let rows = ReceptionText::new(&decided.received, &decided.key).rows(id, Utc::now());
    let received = JournalEvent::DeliveryReceived(decided.received);
    let key = JournalEvent::KeyDerived(decided.key);
    for (row, event) in rows.iter().zip([received, key]) {
        assert_eq!(
            (row.event_type, row.event_version),
            (event.event_type(), event.version())
        );
        let data: serde_json::Value = serde_json::from_str(&row.data).unwrap();
        assert_eq!(data, event.data());
    }
}

#[tokio::test]
async fn the_audit_trail_reads_its_own_index_newest_first_not_the_whole_journal() {
    let (_dir, db) = crate::store::test_database().await;
    for before in [None, Some(1_000)] {
        let query = newest_audited_query(journal::Entity::find(), before);
        let plan = crate::store::sqlite_plan(&db, &query).await.join("\n");
        assert!(plan.contains("journal_audit_trail"), "{plan}");
        assert!(!plan.contains("TEMP B-TREE"), "{plan}");
    }
}

fn row_about(data: &str) -> Row {
    Row {
        delivery_id: None,
        event_type: "KeysPurged",
        event_version: 1,
        data: data.to_owned(),
        recorded_at: DateTime::from_timestamp(1_800_000_000, 123_456_789).unwrap(),
    }
}

#[test]
fn on_postgres_a_batch_of_rows_is_one_statement_with_each_payload_embedded_as_json() {
    let one = in_one(&[row_about(r#"{"keys":[]}"#)]);
    let rows = [
        row_about(r#"{"keys":["a\"b"]}"#),
        row_about(r#"{"keys":[]}"#),
    ];
    let two = in_one(&rows);
    assert_eq!(one.sql, two.sql, "the text never depends on the row count");
    let Some(values) = &two.values else {
        panic!("one parameter")
    };
    let sea_orm::Value::String(Some(text)) = &values.0[0] else {
        panic!("a text parameter: {values:?}")
    };
    let array: serde_json::Value = serde_json::from_str(text).expect("valid JSON");
    assert_eq!(array[0]["data"]["keys"][0], "a\"b");
    assert_eq!(
        array[1]["row"],
        serde_json::json!([null, "KeysPurged", 1, "2027-01-15T08:00:00.123456Z"])
    );
}
