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
    crate::store::flush::insert_journal(&db, vec![row])
        .await
        .unwrap();
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

/// A case's resolution about `id`: a row that follows a reception.
fn resolution(id: DeliveryId) -> Row {
    let stored = include_str!("../../domain/journal/frozen/CaseResolved.v1.json");
    let event = JournalEvent::from_stored("CaseResolved", 1, serde_json::from_str(stored).unwrap())
        .unwrap();
    row(Some(id), &event, Utc::now())
}

fn positions_and_types(events: &[StoredEvent]) -> Vec<(i64, &'static str)> {
    events
        .iter()
        .map(|e| (e.position, e.event.event_type()))
        .collect()
}

#[tokio::test]
async fn a_deliverys_events_are_found_before_and_after_the_read_model_holds_its_reception() {
    let (_dir, db) = crate::store::test_database().await;
    let decided = sample();
    let reception = |id| {
        let text = ReceptionText::new(&decided.received, &decided.key);
        decided_row(
            id,
            text,
            decided.reserved.as_ref(),
            &decided.decision,
            Utc::now(),
        )
    };
    let id = DeliveryId::from_uuid(uuid::Uuid::now_v7());
    let other = DeliveryId::from_uuid(uuid::Uuid::now_v7());
    let applied = crate::store::projector::catch_up(&db, 1_000).await.unwrap();
    crate::store::flush::insert_journal(&db, vec![reception(id), reception(other), resolution(id)])
        .await
        .unwrap();
    let first = applied + 1;
    let mut expected: Vec<(i64, &str)> = decided
        .parts(id)
        .unwrap()
        .iter()
        .map(|e| (first, e.event_type()))
        .collect();
    expected.push((first + 2, "CaseResolved"));

    // Past the projector's checkpoint: the reception is read from the tail.
    let before = for_delivery(&db, id).await.unwrap();
    assert_eq!(positions_and_types(&before), expected);

    // The projector reaches it: its row says where the reception is.
    crate::store::projector::catch_up(&db, 1_000).await.unwrap();
    let held: Option<i64> = delivery::Entity::find_by_id(id.to_string())
        .select_only()
        .column(delivery::Column::ReceivedPosition)
        .into_tuple()
        .one(&db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(held, Some(first));
    let after = for_delivery(&db, id).await.unwrap();
    assert_eq!(positions_and_types(&after), expected);
    let events = |e: Vec<StoredEvent>| e.into_iter().map(|e| e.event).collect::<Vec<_>>();
    assert_eq!(events(after), events(before.clone()));

    // A row an older projector wrote, without the position: found still.
    use sea_orm::ConnectionTrait;
    db.execute_unprepared(&format!(
        "UPDATE deliveries SET received_position = NULL WHERE delivery_id = '{id}'"
    ))
    .await
    .unwrap();
    let unplaced = for_delivery(&db, id).await.unwrap();
    assert_eq!(positions_and_types(&unplaced), expected);

    // The other delivery's reception alone, through either path.
    let theirs = for_delivery(&db, other).await.unwrap();
    assert!(theirs.iter().all(|e| e.position == first + 1), "{theirs:?}");
    assert_eq!(theirs.len(), expected.len() - 1);
}

#[tokio::test]
async fn a_deliverys_rows_are_read_by_position_and_index_never_by_scanning_the_journal() {
    let (_dir, db) = crate::store::test_database().await;
    let id = uuid::Uuid::now_v7().to_string();
    let later = crate::store::sqlite_plan(&db, &later_rows(&db, &id))
        .await
        .join("\n");
    assert!(
        later.contains("USING INDEX journal_after_reception"),
        "{later}"
    );
    let tail = crate::store::sqlite_plan(&db, &reception_in_tail(&db, 10, &id))
        .await
        .join("\n");
    assert!(tail.contains("INTEGER PRIMARY KEY (rowid>?)"), "{tail}");
}

#[tokio::test]
async fn rows_without_a_delivery_are_read_through_the_index_not_the_whole_journal() {
    let (_dir, db) = crate::store::test_database().await;
    let query = without_delivery_query(&db, &["DiscrepancyFound", "CaseResolved"]);
    let plan = crate::store::sqlite_plan(&db, &query).await.join("\n");
    assert!(plan.contains("INDEX journal_after_reception"), "{plan}");
}

#[tokio::test]
async fn the_audit_trail_reads_its_own_index_newest_first_not_the_whole_journal() {
    let (_dir, db) = crate::store::test_database().await;
    for before in [None, Some(1_000)] {
        let query = newest_audited_query(journal::Entity::find(), before);
        let plan = crate::store::sqlite_plan(&db, &query).await.join("\n");
        assert!(plan.contains("journal_audit_trail_2"), "{plan}");
        assert!(!plan.contains("TEMP B-TREE"), "{plan}");
    }
}

#[tokio::test]
async fn purges_of_a_stretch_of_time_are_read_without_every_purge_ever_journaled() {
    use crate::domain::journal::EvidencePurged;
    let (_dir, db) = crate::store::test_database().await;
    let start = Utc::now() - chrono::Duration::days(30);
    let rows: Vec<_> = (0..30)
        .map(|day| {
            let purged = JournalEvent::EvidencePurged(EvidencePurged {
                effect_id: uuid::Uuid::now_v7(),
            });
            row(None, &purged, start + chrono::Duration::days(day))
        })
        .collect();
    crate::store::flush::insert_journal(&db, rows)
        .await
        .unwrap();
    let (from, until) = (
        start + chrono::Duration::days(10),
        start + chrono::Duration::days(12),
    );
    let read = without_delivery_between(&db, &["EvidencePurged"], from, until)
        .await
        .unwrap();
    let days: Vec<i64> = read
        .iter()
        .map(|stored| (stored.recorded_at - start).num_days())
        .collect();
    assert_eq!(days, [10, 11, 12]);
}
