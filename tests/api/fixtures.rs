//! Every resolved case exported to `tests/fixtures/` is a regression test:
//! replayed against this build on a fresh database (SQLite, or PostgreSQL
//! when TEST_DATABASE_URL is set), each delivery must be decided as it was
//! and the case's resolution must leave the effects it left. Adding a file
//! adds a case; a failure names the file and what decided otherwise.

use unicity::domain::fixture::Fixture;
use unicity::services::fixtures;

use crate::support::app::{TestDatabases, fresh_database};
use crate::support::counts::Counts;

#[tokio::test]
async fn every_exported_case_is_still_decided_and_resolved_as_it_was() {
    let base = unicity::config::FileConfig::read(None).expect("the demo configuration");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    // The library's own check, as `unicity fixtures check` runs it.
    let checked = fixtures::check(&dir, &base, &mut TestDatabases::default(), |_| {})
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    assert!(checked.len() >= 20, "the fixtures shipped: {checked:?}");
    let failures: Vec<String> = checked
        .iter()
        .filter(|one| !one.passed())
        .map(|one| format!("{}: {}", one.file.display(), one.differences.join("; ")))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test]
async fn a_resolved_case_exports_as_a_fixture_that_replays_and_keeps_no_sensitive_value() {
    const EMAIL: &str = "cora.private@example.org";
    let app = crate::support::app::spawn_app().await;
    let body = |sent: &str| {
        serde_json::to_vec(&serde_json::json!({
            "type": "refund.created", "payment_id": "pay_fx", "amount": 700,
            "currency": "EUR", "sent_at": sent, "customer_email": EMAIL,
        }))
        .unwrap()
    };
    // Given two identical refunds without a reference, the second held,
    let first = app.post_signed("hmac", &body("2026-12-02T10:00:00Z")).await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    app.wait_applied(1).await;
    let second = app.post_signed("hmac", &body("2026-12-02T10:00:05Z")).await;
    assert_eq!(
        second.json["reason"], "weak_match_critical",
        "{}",
        second.json
    );
    let case_id = second.json["case_id"].as_str().unwrap().to_owned();
    // an open case has nothing to export yet;
    let fixture_url = format!("{}/cases/{case_id}/fixture", app.address);
    let open = app.client.get(&fixture_url).send().await.unwrap();
    assert_eq!(open.status(), 409);
    // when a person processes it as distinct and exports it,
    let resolved = app
        .resolve(
            &case_id,
            serde_json::json!({
                "resolution": "process_as_distinct",
                "note": "two refunds listed by the provider",
                "authoritative_ref": "re_fx_2",
            }),
        )
        .await;
    assert_eq!(resolved.status, 200);
    let response = app.client.get(&fixture_url).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    // then the file names what must come out, and keeps no secret,
    let fixture: Fixture = serde_json::from_str(&text).expect("a fixture");
    assert_eq!(fixture.deliveries.len(), 2);
    assert_eq!(fixture.case.delivery, 1);
    assert_eq!(fixture.case.resolution, "process_as_distinct");
    assert_eq!(fixture.case.reference.as_deref(), Some("re_fx_2"));
    assert_eq!(fixture.expected_effects, 2);
    assert_eq!(fixture.deliveries[1].expect.reason, "weak_match_critical");
    assert!(!text.contains(EMAIL), "{text}");
    assert!(!text.contains("hmac-test-secret"));
    assert!(
        fixture
            .deliveries
            .iter()
            .all(|d| d.headers.iter().all(|(name, _)| name != "x-signature")),
        "no signature header"
    );
    let masked = |d: &unicity::domain::fixture::Delivery| -> String {
        let v: serde_json::Value = serde_json::from_slice(&d.bytes().unwrap()).unwrap();
        v["customer_email"].as_str().unwrap().to_owned()
    };
    assert!(masked(&fixture.deliveries[0]).starts_with("masked-"));
    assert_eq!(
        masked(&fixture.deliveries[0]),
        masked(&fixture.deliveries[1])
    );
    // the export is journaled,
    assert_eq!(app.journal_count("FixtureExported").await, 1);
    // and it replays on a fresh database as it was resolved.
    let base = unicity::config::FileConfig::read(None).unwrap();
    let (url, _dir) = fresh_database().await;
    let replayed = fixtures::replay(&fixture, &base, &url).await.unwrap();
    assert_eq!(replayed.differences(), Vec::<String>::new());
    // A history decided otherwise is named, delivery and decisions.
    let mut changed = fixture.clone();
    changed.deliveries[1].expect.reason = "duplicate_of_applied".to_owned();
    let (url, _dir) = fresh_database().await;
    let differences = fixtures::replay(&changed, &base, &url)
        .await
        .unwrap()
        .differences();
    assert_eq!(
        differences,
        [
            "delivery 1 was decided reconcile/weak_match_critical where the fixture expects reconcile/duplicate_of_applied"
        ]
    );
}

#[tokio::test]
async fn a_fixture_expects_the_effects_its_deliveries_and_resolution_leave_not_those_of_later_deliveries()
 {
    let app = crate::support::app::spawn_app().await;
    let refund = || crate::support::app::refund("pay_later", 700, None);
    let resolve = async |case_id: &str, reference: &str| {
        let resolved = app
            .resolve(
                case_id,
                serde_json::json!({
                    "resolution": "process_as_distinct",
                    "note": "another refund listed by the provider",
                    "authoritative_ref": reference,
                }),
            )
            .await;
        assert_eq!(resolved.status, 200);
    };
    // Given a refund, and its look-alike held and processed as distinct,
    let first = app.post_signed("hmac", &refund()).await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    app.wait_applied(1).await;
    let second = app.post_signed("hmac", &refund()).await;
    assert_eq!(
        second.json["reason"], "weak_match_critical",
        "{}",
        second.json
    );
    let case_id = second.json["case_id"].as_str().unwrap().to_owned();
    resolve(&case_id, "re_later_2").await;
    app.wait_applied(2).await;
    // then a third look-alike, later, also processed as distinct,
    let third = app.post_signed("hmac", &refund()).await;
    assert_eq!(
        third.json["reason"], "weak_match_critical",
        "{}",
        third.json
    );
    resolve(third.json["case_id"].as_str().unwrap(), "re_later_3").await;
    app.wait_applied(3).await;
    // when the first case is exported,
    let response = app.export_fixture(&case_id).await;
    assert_eq!(response.status(), 200);
    let fixture: Fixture = serde_json::from_str(&response.text().await.unwrap()).unwrap();
    // it holds the two deliveries up to the case's and expects the two
    // effects they and its resolution leave, not the third delivery's,
    assert_eq!(fixture.deliveries.len(), 2);
    assert_eq!(fixture.expected_effects, 2);
    // and so it replays as it was decided and resolved.
    let base = unicity::config::FileConfig::read(None).unwrap();
    let (url, _dir) = fresh_database().await;
    let replayed = fixtures::replay(&fixture, &base, &url).await.unwrap();
    assert_eq!(replayed.differences(), Vec::<String>::new());
}

#[tokio::test]
async fn a_case_opened_after_the_first_200_deliveries_of_its_key_is_refused_not_exported_unreplayable()
 {
    let app = crate::support::app::spawn_app().await;
    let refund = |amount| crate::support::app::refund("pay_many", amount, Some("rr_many"));
    // Given a refund applied, then sent 200 times again (each a duplicate),
    let first = app.post_signed("hmac", &refund(100)).await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    app.wait_applied(1).await;
    for _ in 0..200 {
        let again = app.post_signed("hmac", &refund(100)).await;
        assert_eq!(again.json["decision"], "ignore", "{}", again.json);
    }
    // and then its reference with another amount, held and rejected,
    let clash = app.post_signed("hmac", &refund(999)).await;
    assert_eq!(
        clash.json["reason"], "discriminants_differ",
        "{}",
        clash.json
    );
    let case_id = clash.json["case_id"].as_str().unwrap().to_owned();
    let resolved = app
        .resolve(
            &case_id,
            serde_json::json!({"resolution": "reject", "note": "the amount was corrected"}),
        )
        .await;
    assert_eq!(resolved.status, 200);
    // when it is exported, it is refused, saying why, and nothing is written
    // that could never replay.
    let response = app.export_fixture(&case_id).await;
    assert_eq!(response.status(), 409);
    let text = response.text().await.unwrap();
    assert!(
        text.contains("after the first 200 deliveries of its key"),
        "{text}"
    );
    assert_eq!(app.journal_count("FixtureExported").await, 0);
}

/// The case `case_id` exported from `app`, after checking that it replays
/// on a fresh database with the demo configuration's strategies exactly as
/// it was decided and resolved.
async fn exported_and_replayed(app: &crate::support::app::TestApp, case_id: &str) -> Fixture {
    let response = app.export_fixture(case_id).await;
    assert_eq!(response.status(), 200);
    let fixture: Fixture = serde_json::from_str(&response.text().await.unwrap()).unwrap();
    let base = unicity::config::FileConfig::read(None).expect("the demo configuration");
    let (url, _dir) = fresh_database().await;
    let replayed = fixtures::replay(&fixture, &base, &url)
        .await
        .expect("the replay runs");
    assert!(
        replayed.differences().is_empty(),
        "{:?}",
        replayed.differences()
    );
    fixture
}

/// The case `held` opened, resolved as `resolution` asks and exported,
/// after checking that it replays as it was decided (`exported_and_replayed`).
async fn resolved_and_replayed(
    app: &crate::support::app::TestApp,
    held: &crate::support::app::Reply,
    resolution: serde_json::Value,
) -> Fixture {
    let case_id = held.json["case_id"].as_str().expect("a case").to_owned();
    let resolved = app.resolve(&case_id, resolution).await;
    assert_eq!(resolved.status, 200, "{}", resolved.json);
    exported_and_replayed(app, &case_id).await
}

/// A delivery's time is stamped as it begins to arrive, its decision made
/// once its body is read. One whose body came slowly was held against an
/// identical one that began later but was decided first: the fixture keeps
/// both, in the order they were decided, and replays as it was decided.
#[tokio::test]
async fn a_case_exports_its_deliveries_in_the_order_they_were_decided() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let app = crate::support::app::spawn_app().await;
    let body = crate::support::app::refund("pay_slow_body", 700, None);
    // Given a refund whose body is still on its way
    let source = app.source("hmac");
    let secret = crate::support::app::secret_of(source);
    let now = chrono::Utc::now().timestamp();
    let signed = unicity::providers::signature::sign(&source.scheme, &secret, "m", now, &body)
        .expect("signable");
    let host = app.address.trim_start_matches("http://").to_owned();
    let mut slow = tokio::net::TcpStream::connect(&host)
        .await
        .expect("connected");
    let mut head = format!(
        "POST /hooks/hmac HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in &signed {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    slow.write_all(head.as_bytes()).await.expect("head sent");
    slow.write_all(&body[..10]).await.expect("a part sent");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    // When an identical refund arrives whole and is processed first
    let quick = app.post_signed("hmac", &body).await;
    assert_eq!(quick.json["decision"], "process", "{}", quick.json);
    app.wait_applied(1).await;
    // and the slow one's body then completes: held as its look-alike
    slow.write_all(&body[10..]).await.expect("the rest sent");
    let mut answer = String::new();
    slow.read_to_string(&mut answer).await.expect("answered");
    let json = answer.split("\r\n\r\n").nth(1).expect("a body");
    let held: serde_json::Value = serde_json::from_str(json.trim()).expect("json");
    assert_eq!(held["reason"], "weak_match_critical", "{held}");
    let case_id = held["case_id"].as_str().expect("a case").to_owned();
    let resolved = app
        .resolve(
            &case_id,
            serde_json::json!({
                "resolution": "process_as_distinct",
                "note": "two refunds listed by the provider",
                "authoritative_ref": "re_slow_2",
            }),
        )
        .await;
    assert_eq!(resolved.status, 200, "{}", resolved.json);
    // Then the fixture holds both, the quick one first, and replays
    let fixture = exported_and_replayed(&app, &case_id).await;
    assert_eq!(fixture.deliveries.len(), 2);
    assert_eq!(fixture.case.delivery, 1);
}

/// A look-alike that arrived while the first refund's call was in flight
/// was deferred, then decided again once the call settled, and opened the
/// case: the fixture expects the decision that stands, not the deferral a
/// replay (whose downstream answers at once) never makes.
#[tokio::test]
async fn a_delivery_deferred_then_decided_again_is_exported_with_the_decision_that_stands() {
    use crate::support::downstream::{Behaviour, Downstream};
    let downstream = Downstream::start(Behaviour::Apply { delay_ms: 1_500 }).await;
    let app = crate::support::app::spawn_app_with(&downstream.sink_toml(5_000)).await;
    let body = crate::support::app::refund("pay_deferred", 700, None);
    let first = app.post_signed("hmac", &body).await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    downstream.wait_calls(1).await;
    // Given its look-alike deferred while the first call is in flight
    let second = app.post_signed("hmac", &body).await;
    assert_eq!(second.json["decision"], "defer", "{}", second.json);
    // and decided again once it settled: held in a case
    app.wait_applied(1).await;
    let mut case_id = None;
    for _ in 0..100 {
        let open = app.get("/api/cases?status=open").await;
        case_id = open.json["cases"][0]["case_id"].as_str().map(str::to_owned);
        if case_id.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let case_id = case_id.expect("the look-alike's case");
    let resolved = app
        .resolve(
            &case_id,
            serde_json::json!({"resolution": "confirm_duplicate", "note": "one refund"}),
        )
        .await;
    assert_eq!(resolved.status, 200, "{}", resolved.json);
    // When it is exported, then it replays, and the look-alike expects its
    // standing decision
    let fixture = exported_and_replayed(&app, &case_id).await;
    let expected: Vec<&str> = fixture
        .deliveries
        .iter()
        .map(|d| d.expect.reason.as_str())
        .collect();
    assert_eq!(expected, ["new_key", "weak_match_critical"]);
}

/// A server whose leases last a second and whose downstream answers after
/// `delay_ms`, and `body` sent to it once, processed: its call outlives
/// its lease.
async fn a_call_outliving_its_lease(
    delay_ms: u64,
    body: &[u8],
) -> (
    crate::support::app::TestApp,
    crate::support::downstream::Downstream,
) {
    use crate::support::downstream::{Behaviour, Downstream};
    let downstream = Downstream::start(Behaviour::Apply { delay_ms }).await;
    let app = crate::support::app::spawn_app_with(&format!(
        "{}[engine]\nlease_secs = 1\nsweep_interval_ms = 100\n",
        downstream.sink_toml(10_000)
    ))
    .await;
    let first = app.post_signed("hmac", body).await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    (app, downstream)
}

/// A refund's call outlived its lease: the sweeper made its outcome
/// unknown, and the provider's retry went to a person. The fixture says
/// when the lease ran out, as it says when a sink answered "unknown", and
/// replays as it was decided.
#[tokio::test]
async fn a_retry_held_after_its_first_calls_lease_ran_out_replays_as_it_was_decided() {
    let body = crate::support::app::refund("pay_expired", 700, Some("rr_expired"));
    let (app, _downstream) = a_call_outliving_its_lease(3_000, &body).await;
    // Given the first call's lease run out while it is still in flight
    app.wait_journal("ReservationExpired", 1).await;
    // and the provider's retry held for a person
    let retry = app.post_signed("hmac", &body).await;
    assert_eq!(retry.json["reason"], "outcome_unknown", "{}", retry.json);
    // When it is resolved and exported, then it replays as it was decided
    resolved_and_replayed(
        &app,
        &retry,
        serde_json::json!({"resolution": "reject", "note": "the provider lists one refund"}),
    )
    .await;
}

/// A lease ran out, then the call answered "applied" after all, and only
/// then did a look-alike arrive: it saw an applied refund. The fixture
/// carries the lapse only until that answer, and replays as decided.
#[tokio::test]
async fn a_lease_that_ran_out_before_a_late_applied_answer_replays_as_the_answer_left_it() {
    let body = crate::support::app::refund("pay_lapsed", 700, None);
    let (app, _downstream) = a_call_outliving_its_lease(2_000, &body).await;
    // Given the first call's lease run out, then its answer "applied"
    app.wait_journal("ReservationExpired", 1).await;
    app.wait_journal("EffectApplied", 1).await;
    // and then a look-alike held for a person, who confirms it a duplicate
    let second = app.post_signed("hmac", &body).await;
    assert_eq!(
        second.json["reason"], "weak_match_critical",
        "{}",
        second.json
    );
    // When it is resolved and exported, then it replays as it was decided
    resolved_and_replayed(
        &app,
        &second,
        serde_json::json!({"resolution": "confirm_duplicate", "note": "one refund"}),
    )
    .await;
}

/// A refund held because it lacks the reference another attempt of it was
/// applied with (`look_alike_keyed_otherwise`) replays as it was decided:
/// its first attempt replayed before it, it is held again, and the
/// duplicate confirmed leaves one effect.
#[tokio::test]
async fn a_retry_that_lost_its_reference_replays_as_it_was_held() {
    use crate::support::app::refund;
    let app = crate::support::app::spawn_app().await;
    let first = app
        .post_signed("hmac", &refund("pay_replayed", 1500, Some("rr_replayed")))
        .await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    app.settle().await;
    let retry = app
        .post_signed("hmac", &refund("pay_replayed", 1500, None))
        .await;
    assert_eq!(
        retry.json["reason"], "look_alike_keyed_otherwise",
        "{}",
        retry.json
    );
    let fixture = resolved_and_replayed(
        &app,
        &retry,
        serde_json::json!({"resolution": "confirm_duplicate", "note": "one refund at the provider"}),
    )
    .await;
    assert_eq!(fixture.deliveries.len(), 2, "{fixture:?}");
}

/// A refund lacking its reference held while the journal's tail was too
/// long to search (its case names no effect like it) would replay on a
/// fresh database, whose tail is short, as applied: its export is refused.
#[tokio::test]
async fn a_look_alike_held_without_searching_is_refused_not_exported_unreplayable() {
    use crate::support::app::refund;
    use sea_orm::ConnectionTrait;
    let app = crate::support::app::spawn_app().await;
    let first = app
        .post_signed(
            "hmac",
            &refund("pay_unsearched", 1500, Some("rr_unsearched")),
        )
        .await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    let retry = app
        .post_signed("hmac", &refund("pay_unsearched", 1500, None))
        .await;
    assert_eq!(
        retry.json["reason"], "look_alike_keyed_otherwise",
        "{}",
        retry.json
    );
    let case_id = retry.json["case_id"].as_str().expect("a case").to_owned();
    // As a tail too long to search leaves it: no effect named.
    app.db
        .execute_unprepared(&format!(
            "UPDATE cases SET details = '{{\"effect_id\": null}}' WHERE case_id = '{case_id}'"
        ))
        .await
        .expect("the case rewritten");
    let resolved = app
        .resolve(
            &case_id,
            serde_json::json!({"resolution": "reject", "note": "a retry"}),
        )
        .await;
    assert_eq!(resolved.status, 200, "{}", resolved.json);
    let response = app.export_fixture(&case_id).await;
    assert_eq!(response.status(), 409);
    let text = response.text().await.unwrap();
    assert!(text.contains("too long to search"), "{text}");
    assert_eq!(app.journal_count("FixtureExported").await, 0);
}
