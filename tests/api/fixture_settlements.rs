//! A case opened because a delivery came while the outcome of its key's
//! effect was unknown — the sink's downstream timed out or failed after the
//! call reached it — becomes a fixture that replays as it was decided: the
//! file says how the sink answered, and the replay plays a downstream that
//! answers the same. Without it the replay applies the effect and ignores
//! the delivery; answered "refused without effect", it applies it again.

use unicity::domain::fixture::{Between, Fixture};
use unicity::services::fixtures;

use crate::support::app::{fresh_database, refund, shipped_fixture, spawn_app_with};
use crate::support::counts::Counts;
use crate::support::downstream::{Behaviour, Downstream};

/// The fixture shipped from a real run (`tests/fixtures/README.md`).
const SHIPPED: &str = "outcome-unknown-rejected.json";

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

#[tokio::test]
async fn a_case_held_on_an_unknown_outcome_exports_the_sinks_answer_and_replays_as_decided() {
    let downstream = Downstream::start(Behaviour::ApplyThenHang).await;
    let app = spawn_app_with(&downstream.sink_toml(300)).await;
    // Given a refund whose downstream applied it and never answered in time,
    let body = refund("pay_fs", 800, Some("rr_fs"));
    let first = app.post_signed("hmac", &body).await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    app.wait_journal("EffectOutcomeUnknown", 1).await;
    // and the provider's retry, held until somebody knows, then rejected;
    let retry = app.post_signed("hmac", &body).await;
    assert_eq!(retry.json["reason"], "outcome_unknown", "{}", retry.json);
    let case_id = retry.json["case_id"].as_str().unwrap().to_owned();
    let resolved = app
        .resolve(
            &case_id,
            serde_json::json!({"resolution": "reject", "note": "the first attempt's case settles it"}),
        )
        .await;
    assert_eq!(resolved.status, 200);

    // when it is exported, the file says the first delivery's effect was of
    // unknown outcome before the retry came,
    let response = app.export_fixture(&case_id).await;
    assert_eq!(response.status(), 200);
    let fixture: Fixture = serde_json::from_str(&response.text().await.unwrap()).unwrap();
    let events: Vec<(usize, Between)> = fixture
        .between
        .iter()
        .map(|happened| (happened.delivery, happened.event))
        .collect();
    assert_eq!(events, [(0, Between::EffectOutcomeUnknown)]);
    assert!(fixture.between[0].offset_ms <= fixture.deliveries[1].offset_ms);
    assert_eq!(fixture.expected_effects, 1);
    // and it replays as it was decided and resolved;
    assert_eq!(differences(&fixture).await, Vec::<String>::new());
    // without the sink's answer, the retry is ignored as a duplicate.
    let mut applied = fixture.clone();
    applied.between.clear();
    assert_eq!(
        differences(&applied).await.first().map(String::as_str),
        Some(
            "delivery 1 was decided ignore/duplicate_of_applied where the fixture expects reconcile/outcome_unknown"
        )
    );
}

#[tokio::test]
async fn the_shipped_unknown_outcome_fixture_is_decided_by_what_the_sink_answered() {
    let fixture = shipped_fixture(SHIPPED);
    // The shipped file holds a retry held on its first attempt's unknown
    // outcome,
    let held = fixture.case.delivery;
    assert_eq!(fixture.deliveries[held].expect.reason, "outcome_unknown");
    assert!(
        fixture
            .between
            .iter()
            .any(|h| h.event == Between::EffectOutcomeUnknown),
        "{:?}",
        fixture.between
    );
    // which a replay decides as it was (tests/api/fixtures.rs replays it with
    // every other file);
    assert_eq!(differences(&fixture).await, Vec::<String>::new());
    // had the sink answered "applied", the retry would be ignored,
    let mut applied = fixture.clone();
    applied.between.clear();
    let found = differences(&applied).await;
    assert_eq!(
        found.first().map(String::as_str),
        Some(
            format!(
                "delivery {held} was decided ignore/duplicate_of_applied where the fixture expects reconcile/outcome_unknown"
            )
            .as_str()
        ),
        "{found:?}"
    );
    // and had it refused without effect, the retry would apply it again.
    let mut refused = fixture.clone();
    for happened in &mut refused.between {
        happened.event = Between::EffectFailed;
    }
    let found = differences(&refused).await;
    assert_eq!(
        found.first().map(String::as_str),
        Some(
            format!(
                "delivery {held} was decided process/previous_attempt_failed_without_effect where the fixture expects reconcile/outcome_unknown"
            )
            .as_str()
        ),
        "{found:?}"
    );
}
