//! A case opened because a strategy's collision breaker was tripped becomes
//! a fixture that replays as it was decided: the file says when the breaker
//! was tripped on the deliveries' clock, and the replay trips it again at
//! that moment — not before, where a duplicate decided before the trip would
//! be held, and not never, where the held delivery would be ignored.

use unicity::domain::fixture::Fixture;
use unicity::services::fixtures;

use crate::support::app::{TestApp, fresh_database, refund, shipped_fixture, spawn_app_with};
use crate::support::counts::Counts;

/// A breaker that trips on the second delivery of a handful, evaluated
/// often.
const TRIPS_SOON: &str =
    "[engine]\nbreaker_threshold = 0.1\nbreaker_min_deliveries = 3\nbreaker_check_ms = 100\n";

/// The fixture shipped from a real run (`tests/fixtures/README.md`).
const SHIPPED: &str = "breaker-tripped-confirmed-duplicate.json";

/// The differences a replay of `fixture` on a fresh database finds, on the
/// demo configuration as `tests/api/fixtures.rs` replays.
async fn differences(fixture: &Fixture) -> Vec<String> {
    let base = unicity::config::FileConfig::read(None).expect("the demo configuration");
    let (url, _dir) = fresh_database().await;
    fixtures::replay(fixture, &base, &url)
        .await
        .expect("the replay runs")
        .differences()
}

/// Resolves `case_id` through the API, as a person does.
async fn confirm_duplicate(app: &TestApp, case_id: &str) {
    let resolved = app
        .resolve(
            case_id,
            serde_json::json!({
                "resolution": "confirm_duplicate",
                "note": "the provider lists one refund: a retry",
            }),
        )
        .await;
    assert_eq!(resolved.status, 200);
}

#[tokio::test]
async fn a_case_held_by_a_tripped_breaker_exports_when_it_tripped_and_replays_as_decided() {
    let app = spawn_app_with(TRIPS_SOON).await;
    // Given a refund and its retry, ignored while the breaker is not tripped,
    let body = refund("pay_fb1", 100, Some("rr_fb1"));
    let first = app.post_signed("hmac", &body).await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    app.wait_applied(1).await;
    let retry = app.post_signed("hmac", &body).await;
    assert_eq!(
        retry.json["reason"], "duplicate_of_applied",
        "{}",
        retry.json
    );
    // then another refund's reference reused for another amount, which trips
    // the strategy's breaker,
    app.collide("pay_fb2", 2).await;
    app.wait_journal("StrategyTripped", 1).await;
    app.wait_for_count("SELECT COUNT(*) FROM strategy_breakers", 1)
        .await;
    // and one more retry of the first refund, held for a person;
    let held = app.post_signed("hmac", &body).await;
    assert_eq!(held.json["reason"], "breaker_tripped", "{}", held.json);
    let case_id = held.json["case_id"].as_str().unwrap().to_owned();

    // when a person confirms it as a duplicate and exports it,
    confirm_duplicate(&app, &case_id).await;
    let exported = app.export_fixture(&case_id).await;
    assert_eq!(exported.status(), 200);
    let fixture: Fixture = serde_json::from_str(&exported.text().await.unwrap()).unwrap();

    // then the file holds the three deliveries of the key and the breaker,
    // tripped between the ignored retry and the held one,
    let reasons: Vec<&str> = fixture
        .deliveries
        .iter()
        .map(|d| d.expect.reason.as_str())
        .collect();
    assert_eq!(
        reasons,
        ["new_key", "duplicate_of_applied", "breaker_tripped"]
    );
    assert_eq!(fixture.breakers.len(), 1, "{:?}", fixture.breakers);
    let tripped = &fixture.breakers[0];
    assert_eq!(tripped.strategy, "norefid-refund-ref@1");
    assert_eq!(tripped.reset_offset_ms, None);
    assert_eq!((tripped.deliveries, tripped.collisions), (4, 1));
    assert!(
        fixture.deliveries[1].offset_ms <= tripped.tripped_offset_ms
            && tripped.tripped_offset_ms <= fixture.deliveries[2].offset_ms,
        "{tripped:?} {:?}",
        fixture
            .deliveries
            .iter()
            .map(|d| d.offset_ms)
            .collect::<Vec<_>>()
    );
    assert_eq!(fixture.expected_effects, 1);
    // and it replays on a fresh database as it was decided and resolved.
    assert_eq!(differences(&fixture).await, Vec::<String>::new());

    // Tripped from the start, the retry before the trip would be held too.
    let mut early = fixture.clone();
    early.breakers[0].tripped_offset_ms = -1;
    assert_eq!(
        differences(&early).await,
        [
            "delivery 1 was decided reconcile/breaker_tripped where the fixture expects ignore/duplicate_of_applied"
        ]
    );
    // Reset before the held retry, it would be ignored.
    let mut reset = fixture.clone();
    reset.breakers[0].reset_offset_ms = Some(fixture.deliveries[2].offset_ms);
    assert_eq!(
        differences(&reset).await[0],
        "delivery 2 was decided ignore/duplicate_of_applied where the fixture expects reconcile/breaker_tripped"
    );
}

#[tokio::test]
async fn the_shipped_breaker_fixture_is_decided_otherwise_when_its_breaker_is_left_untripped() {
    let fixture = shipped_fixture(SHIPPED);
    // The shipped file holds a delivery held by a tripped breaker,
    let held = fixture
        .deliveries
        .iter()
        .position(|d| d.expect.reason == "breaker_tripped")
        .expect("a delivery held by the breaker");
    assert_eq!(fixture.case.delivery, held);
    assert!(!fixture.breakers.is_empty());
    // which a replay decides as it was (tests/api/fixtures.rs replays it with
    // every other file);
    assert_eq!(differences(&fixture).await, Vec::<String>::new());
    // without its breakers, that delivery is ignored and the case never opens.
    let mut untripped = fixture.clone();
    untripped.breakers.clear();
    let found = differences(&untripped).await;
    assert_eq!(
        found.first().map(String::as_str),
        Some(
            format!(
                "delivery {held} was decided ignore/duplicate_of_applied where the fixture expects reconcile/breaker_tripped"
            )
            .as_str()
        ),
        "{found:?}"
    );
    assert!(
        found.contains(&"the case could not be resolved as recorded: the delivery that opened it opened no case".to_owned()),
        "{found:?}"
    );
    // Tripped from the start instead, the duplicate before the trip is held.
    let mut early = fixture.clone();
    for tripped in &mut early.breakers {
        tripped.tripped_offset_ms = -1;
    }
    let found = differences(&early).await;
    assert_eq!(
        found,
        [
            "delivery 1 was decided reconcile/breaker_tripped where the fixture expects ignore/duplicate_of_applied"
        ]
    );
}
