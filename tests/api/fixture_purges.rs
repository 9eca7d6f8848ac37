//! A case opened because a late delivery came after its key left the fast
//! index and its effect's evidence was purged becomes a fixture that
//! replays as it was decided: the file says when the key and the evidence
//! were purged on the deliveries' clock, and the replay purges them again
//! at that moment — without them the late delivery finds the applied
//! effect and is ignored, and the case never opens.

use unicity::domain::fixture::{Between, Fixture, Happened};
use unicity::services::fixtures;

use crate::support::app::{TestApp, fresh_database, refund, shipped_fixture, spawn_app_with};
use crate::support::counts::Counts;

/// A refund strategy whose horizon ends a second after a key is reserved.
const SHORT_HORIZON: &str = r#"
[[strategies]]
name = "short-refund"
version = 1
provider = "norefid"
event_types = ["refund.*"]
kind = "business_reference"
strength = "strong"
horizon = "1s"
effect_type = "refund.create"
criticality = "critical"
fields = [
  { name = "payment", path = "$.payment_id" },
  { name = "refund_reference", path = "$.refund_reference" },
]
discriminants = [{ name = "amount", path = "$.amount" }]

[[hierarchies]]
provider = "norefid"
event_type = "refund.*"
strategies = ["short-refund"]
"#;

/// The fixture shipped from a real run (`tests/fixtures/README.md`).
const SHIPPED: &str = "evidence-purged-rejected.json";

/// The differences a replay of `fixture` on a fresh database finds,
/// configured as `base`.
async fn differences(fixture: &Fixture, base: &str) -> Vec<String> {
    let (url, _dir) = fresh_database().await;
    fixtures::replay(fixture, base, &url)
        .await
        .expect("the replay runs")
        .differences()
}

fn demo() -> String {
    unicity::config::FileConfig::read(None).expect("the demo configuration")
}

/// `app`'s case `case_id`, exported through the API.
async fn exported(app: &TestApp, case_id: &str) -> Fixture {
    let response = app.export_fixture(case_id).await;
    assert_eq!(response.status(), 200);
    serde_json::from_str(&response.text().await.unwrap()).expect("a fixture")
}

#[tokio::test]
async fn a_case_held_because_the_evidence_was_purged_exports_the_purges_and_replays_as_decided() {
    let app = spawn_app_with(&format!(
        "[engine]\nsweep_interval_ms = 100\n{SHORT_HORIZON}"
    ))
    .await;
    // Given a refund and its retry, ignored within the key's horizon,
    let body = refund("pay_fp", 800, Some("rr_fp"));
    let first = app.post_signed("hmac", &body).await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    let retry = app.post_signed("hmac", &body).await;
    assert_eq!(
        retry.json["reason"], "duplicate_of_applied",
        "{}",
        retry.json
    );
    // then the key purged at the end of its horizon, and the evidence by the
    // retention policy,
    app.wait_journal("KeysPurged", 1).await;
    let purged = unicity::services::retention::purge_evidence(&app.db, chrono::Utc::now())
        .await
        .unwrap();
    assert_eq!(purged, 1);
    // and a late retry, held for a person, who rejects it;
    let late = app.post_signed("hmac", &body).await;
    assert_eq!(late.json["reason"], "evidence_purged", "{}", late.json);
    let case_id = late.json["case_id"].as_str().unwrap().to_owned();
    let resolved = app
        .resolve(
            &case_id,
            serde_json::json!({"resolution": "reject", "note": "applied once already"}),
        )
        .await;
    assert_eq!(resolved.status, 200);

    // when it is exported, the file says both purges happened to the first
    // delivery's key and effect, between the retry and the late one,
    let fixture = exported(&app, &case_id).await;
    let at = |n: usize| fixture.deliveries[n].offset_ms;
    let events: Vec<(usize, Between)> = fixture
        .between
        .iter()
        .map(|happened| (happened.delivery, happened.event))
        .collect();
    assert_eq!(
        events,
        [(0, Between::KeyPurged), (0, Between::EvidencePurged)]
    );
    assert!(
        fixture
            .between
            .iter()
            .all(|h| at(1) <= h.offset_ms && h.offset_ms <= at(2)),
        "{:?} {:?}",
        fixture.between,
        [at(0), at(1), at(2)]
    );
    // and it replays as it was decided and resolved;
    let base = format!("{}\n{SHORT_HORIZON}", demo());
    assert_eq!(differences(&fixture, &base).await, Vec::<String>::new());
    // with the key purged but not the evidence, the late retry would be
    // ignored through the effects ledger.
    let mut kept = fixture.clone();
    kept.between.retain(|h| h.event == Between::KeyPurged);
    assert_eq!(
        differences(&kept, &base).await.first().map(String::as_str),
        Some(
            "delivery 2 was decided ignore/late_replay_found_effect where the fixture expects reconcile/evidence_purged"
        )
    );
}

#[tokio::test]
async fn the_shipped_purge_fixture_is_decided_otherwise_when_nothing_is_purged() {
    let fixture = shipped_fixture(SHIPPED);
    // The shipped file holds a late delivery held because the evidence of
    // the effect it asks for again was purged,
    let late = fixture.case.delivery;
    assert_eq!(fixture.deliveries[late].expect.reason, "evidence_purged");
    assert!(
        fixture
            .between
            .iter()
            .any(|h| h.event == Between::EvidencePurged),
        "{:?}",
        fixture.between
    );
    // which a replay decides as it was (tests/api/fixtures.rs replays it with
    // every other file);
    assert_eq!(differences(&fixture, &demo()).await, Vec::<String>::new());
    // with nothing purged, the late delivery is ignored as a duplicate.
    let mut untouched = fixture.clone();
    untouched.between.clear();
    let found = differences(&untouched, &demo()).await;
    assert_eq!(
        found.first().map(String::as_str),
        Some(
            format!(
                "delivery {late} was decided ignore/duplicate_of_applied where the fixture expects reconcile/evidence_purged"
            )
            .as_str()
        ),
        "{found:?}"
    );
    // Purged only after the late delivery arrived, the same.
    let mut after = fixture.clone();
    let last = fixture.deliveries[late].offset_ms + 1;
    after.between = vec![
        Happened {
            offset_ms: last,
            delivery: 0,
            event: Between::KeyPurged,
        },
        Happened {
            offset_ms: last,
            delivery: 0,
            event: Between::EvidencePurged,
        },
    ];
    assert_eq!(
        differences(&after, &demo()).await.first(),
        found.first(),
        "{found:?}"
    );
}
