//! The decision matrix through HTTP: what each kind of repeat gets, and that an
//! effect happens exactly once.

use serde_json::Value;

use crate::support::app::{id_of, refund, spawn_app, spawn_app_with};
use crate::support::counts::Counts;
use crate::support::downstream::{Behaviour, Downstream};

const FAST_SWEEP: &str = "[engine]\nlease_secs = 30\nsweep_interval_ms = 100\n";

#[tokio::test]
async fn a_new_strong_key_is_processed_and_its_provider_retry_ignored_even_re_encoded() {
    let app = spawn_app().await;
    let first = app
        .post_signed("hmac", &refund("pay_1", 1500, Some("rr_1")))
        .await;
    assert_eq!(first.status, 202, "{}", first.json);
    assert_eq!(first.json["decision"], "process");
    assert_eq!(first.json["reason"], "new_key");
    assert_eq!(first.json["strategy"], "norefid-refund-ref@1");
    assert_eq!(first.json["strength"], "strong");
    assert!(
        first.json["key"]
            .as_str()
            .unwrap()
            .starts_with("norefid-refund-ref@1:")
    );
    assert!(first.json["transport_key"].is_string());
    let effect_id = first.json["effect_id"].clone();
    app.wait_applied(1).await;

    // The retry: members reordered, whitespace, a new send time.
    let retry = format!(
        "{{ \"sent_at\": \"{}\", \"currency\": \"EUR\", \"refund_reference\": \"rr_1\",\n  \"amount\": 1500.0, \"payment_id\": \"pay_1\", \"type\": \"refund.created\" }}",
        chrono::Utc::now().to_rfc3339()
    );
    let second = app.post_signed("hmac", retry.as_bytes()).await;
    assert_eq!(
        second.status, 200,
        "a duplicate is a success: {}",
        second.json
    );
    assert_eq!(second.json["decision"], "ignore");
    assert_eq!(second.json["reason"], "duplicate_of_applied");
    assert_eq!(second.json["layer"], "business");
    assert_eq!(
        second.json["reference_delivery_id"],
        first.json["delivery_id"]
    );
    assert_eq!(second.json["effect_id"], effect_id);
    assert_eq!(second.json["key"], first.json["key"]);
    // The duplicate is linked to the effect, never deleted; the first
    // delivery is the effect's own `first_delivery_id`.
    assert_eq!(app.effect_deliveries().await, 1);
    let first_id = first.json["delivery_id"].as_str().unwrap();
    assert_eq!(
        app.count(&format!(
            "SELECT COUNT(*) FROM effects WHERE first_delivery_id = '{first_id}'"
        ))
        .await,
        1
    );
    assert_eq!(app.deliveries().await, 2);
}

#[tokio::test]
async fn two_legitimate_identical_refunds_without_reference_are_never_merged() {
    let app = spawn_app().await;
    let first = app.post_signed("hmac", &refund("pay_2", 700, None)).await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    assert_eq!(first.json["strength"], "weak");
    app.wait_applied(1).await;

    let second = app.post_signed("hmac", &refund("pay_2", 700, None)).await;
    assert_eq!(second.status, 202, "{}", second.json);
    assert_eq!(second.json["decision"], "reconcile", "{}", second.json);
    assert_eq!(second.json["reason"], "weak_match_critical");
    assert!(second.json["case_id"].is_string());
    assert_eq!(app.open_cases().await, 1);
    assert_eq!(
        app.effects().await,
        1,
        "no second refund without a decision"
    );
}

#[tokio::test]
async fn the_same_reference_with_another_amount_is_a_collision_kept_in_quarantine() {
    let app = spawn_app().await;
    app.post_signed("hmac", &refund("pay_3", 1500, Some("rr_3")))
        .await;
    app.wait_applied(1).await;
    let clash = app
        .post_signed("hmac", &refund("pay_3", 9900, Some("rr_3")))
        .await;
    assert_eq!(clash.json["decision"], "quarantine", "{}", clash.json);
    assert_eq!(clash.json["reason"], "discriminants_differ");
    let differences = clash.json["differences"].as_array().unwrap();
    assert_eq!(differences.len(), 1);
    assert_eq!(differences[0]["field"], "amount");
    assert_eq!(differences[0]["existing"], 1500);
    assert_eq!(differences[0]["new"], 9900);
}

#[tokio::test]
async fn a_delivery_id_that_comes_back_with_another_body_is_a_transport_collision() {
    let app = spawn_app().await;
    let secret = crate::support::app::secret_of(app.source("std"));
    let now = chrono::Utc::now().timestamp();
    let body = |amount: u64| {
        serde_json::to_vec(&serde_json::json!({ "type": "invoice.paid", "amount": amount }))
            .unwrap()
    };
    let first = app
        .post_signed_with("std", &secret, "msg_same", now, &body(10))
        .await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    let other = app
        .post_signed_with("std", &secret, "msg_same", now, &body(20))
        .await;
    assert_eq!(other.json["decision"], "quarantine", "{}", other.json);
    assert_eq!(other.json["reason"], "transport_id_collision");
    assert_eq!(
        other.json["reference_delivery_id"],
        first.json["delivery_id"]
    );
}

#[tokio::test]
async fn an_unparseable_body_is_quarantined_with_a_case_not_dropped() {
    let app = spawn_app().await;
    let reply = app.post_signed("hmac", b"refund=1&amount=2").await;
    assert_eq!(reply.status, 202);
    assert_eq!(reply.json["decision"], "quarantine");
    assert_eq!(reply.json["reason"], "unparseable_body");
    assert_eq!(reply.json["layer"], "transport");
    let shown = app.delivery(&id_of(&reply)).await;
    assert_eq!(shown.json["decision"]["reason"], "unparseable_body");
    assert_eq!(app.cases().await, 1);
}

#[tokio::test]
async fn fifty_concurrent_identical_deliveries_apply_the_effect_exactly_once() {
    fifty_concurrent_identical_deliveries(FAST_SWEEP).await;
}

/// The same race with one transaction per delivery: claims are made in the
/// database (row locks on PostgreSQL), not in a group commit's batch index.
#[tokio::test]
async fn fifty_concurrent_identical_deliveries_apply_once_without_group_commit() {
    fifty_concurrent_identical_deliveries(&format!("{FAST_SWEEP}group_commit = false\n")).await;
}

async fn fifty_concurrent_identical_deliveries(engine: &str) {
    let downstream = Downstream::start(Behaviour::Apply { delay_ms: 300 }).await;
    let app = spawn_app_with(&format!("{engine}{}", downstream.sink_toml(5000))).await;
    let body = refund("pay_50", 4200, Some("rr_50"));
    let secret = crate::support::app::secret_of(app.source("hmac"));
    let now = chrono::Utc::now().timestamp();
    let replies = futures_util::future::join_all(
        (0..50).map(|_| app.post_signed_with("hmac", &secret, "m", now, &body)),
    )
    .await;
    let decisions: Vec<&str> = replies
        .iter()
        .map(|r| r.json["decision"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(
        decisions.iter().filter(|d| **d == "process").count(),
        1,
        "{decisions:?}"
    );
    assert!(
        decisions
            .iter()
            .all(|d| ["process", "ignore", "defer"].contains(d)),
        "{decisions:?}"
    );

    // Each deferred delivery waits in its own row until it is re-decided,
    // once the effect settles; then none is left waiting.
    let deferred = decisions.iter().filter(|d| **d == "defer").count() as i64;
    let waiting = "SELECT COUNT(*) FROM deferred_deliveries";
    assert!(app.count(waiting).await <= deferred);
    app.wait_decided("defer", 0).await;
    app.wait_decided("ignore", 49).await;
    assert_eq!(app.count(waiting).await, 0);
    assert_eq!(downstream.calls().len(), 1, "one downstream call");
    assert!(
        downstream.calls()[0].starts_with("\"norefid-refund-ref@1:"),
        "{:?}",
        downstream.calls()
    );
    assert_eq!(app.applied_effects().await, 1);
    // The 49 others are linked to the effect the first one created.
    assert_eq!(app.effect_deliveries().await, 49);
}

#[tokio::test]
async fn an_effect_applied_downstream_then_timed_out_is_unknown_and_never_retried() {
    let downstream = Downstream::start(Behaviour::ApplyThenHang).await;
    let app = spawn_app_with(&format!("{FAST_SWEEP}{}", downstream.sink_toml(300))).await;
    let body = refund("pay_t", 1000, Some("rr_t"));
    let first = app.post_signed("hmac", &body).await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    app.wait_effects_in("unknown", 1).await;
    assert_eq!(app.cases_with("outcome_unknown").await, 1);

    let retry = app.post_signed("hmac", &body).await;
    assert_eq!(retry.json["decision"], "reconcile", "{}", retry.json);
    assert_eq!(retry.json["reason"], "outcome_unknown");
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(
        downstream.calls().len(),
        1,
        "verified before any retry, never re-run blindly"
    );
}

#[tokio::test]
async fn a_definitive_refusal_without_effect_lets_the_next_delivery_try_again() {
    let downstream = Downstream::start(Behaviour::Refuse(422)).await;
    let app = spawn_app_with(&downstream.sink_toml(2000)).await;
    let body = refund("pay_f", 300, Some("rr_f"));
    app.post_signed("hmac", &body).await;
    app.wait_effects_in("failed", 1).await;
    let retry = app.post_signed("hmac", &body).await;
    assert_eq!(retry.json["decision"], "process", "{}", retry.json);
    assert_eq!(
        retry.json["reason"],
        "previous_attempt_failed_without_effect"
    );
    app.wait_for_count("SELECT MAX(fencing_token) FROM effects", 2)
        .await;
    downstream.wait_calls(2).await;
    let calls = downstream.calls();
    assert_eq!(
        calls[0], calls[1],
        "the same effect, the same idempotency key"
    );
}

#[tokio::test]
async fn the_delivery_view_explains_the_decision_and_the_key() {
    let app = spawn_app().await;
    let reply = app.post_signed("hmac", &refund("pay_v", 500, None)).await;
    let shown = app.delivery(&id_of(&reply)).await.json;
    assert_eq!(shown["decision"]["action"], "process");
    assert!(
        shown["decision"]["summary"]
            .as_str()
            .is_some_and(|s| !s.is_empty())
    );
    let identity = &shown["identity"];
    assert_eq!(
        identity["business"]["strategy"],
        "norefid-refund-fingerprint@1"
    );
    let skipped = &identity["derivation"]["skipped"][0];
    assert_eq!(skipped["strategy"]["name"], "norefid-refund-ref");
    assert_eq!(skipped["reason"]["code"], "missing_field");
    // The proof of a body-hashing key is the key: the body is kept apart
    // (under retention), not copied into the journal as material.
    let keyed = &identity["derivation"]["business"];
    assert_eq!(keyed["kind"], "canonical_fingerprint");
    assert!(keyed["definition_fingerprint"].is_string());
    assert!(keyed.get("material").is_none(), "{keyed}");
    let types: Vec<Value> = shown["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event_type"].clone())
        .collect();
    assert!(types.contains(&Value::from("KeyReserved")), "{types:?}");
}

#[tokio::test]
async fn a_strategy_whose_keys_collide_too_often_stops_auto_ignoring_until_reset() {
    let app = spawn_app_with(
        "[engine]\nbreaker_threshold = 0.1\nbreaker_min_deliveries = 3\nbreaker_check_ms = 100\n",
    )
    .await;
    let body = refund("pay_b", 100, Some("rr_b"));
    app.post_signed("hmac", &body).await;
    app.post_signed("hmac", &refund("pay_c", 100, Some("rr_c")))
        .await;
    app.wait_applied(2).await;
    let clash = app
        .post_signed("hmac", &refund("pay_b", 999, Some("rr_b")))
        .await;
    assert_eq!(
        clash.json["reason"], "discriminants_differ",
        "{}",
        clash.json
    );
    app.wait_tripped_strategies(1).await;
    assert_eq!(app.journal_count("StrategyTripped").await, 1);

    // A plain provider retry would be ignored; with the breaker tripped it is checked.
    let retry = app.post_signed("hmac", &body).await;
    assert_eq!(retry.json["decision"], "reconcile", "{}", retry.json);
    assert_eq!(retry.json["reason"], "breaker_tripped");

    assert!(
        unicity::services::breakers::reset(
            &app.db,
            "norefid-refund-ref@1",
            "test".to_owned(),
            "the collisions were a test".to_owned()
        )
        .await
        .unwrap()
    );
    // The server re-reads breakers at its next evaluation; the collision is
    // still in the window, so it trips again: the rate, not a flag, decides.
    app.wait_journal("StrategyTripped", 2).await;
}

#[tokio::test]
async fn a_weak_key_is_processed_again_flagged_on_a_reversible_type_and_reconciled_on_a_critical_one()
 {
    let app = spawn_app().await;
    // GitHub without its delivery header: only a weak fingerprint is left, and
    // GitHub effects are reversible (notifications, builds).
    let ping = br#"{"zen":"Keep it logically awesome.","hook_id":42}"#;
    let secret = crate::support::app::secret_of(app.source("github"));
    let scheme = &app.source("github").scheme;
    let mut headers = unicity::providers::signature::sign(scheme, &secret, "m", 0, ping).unwrap();
    headers.push(("x-github-event".to_owned(), "ping".to_owned()));
    let first = app.post_raw("github", ping.to_vec(), &headers).await;
    assert_eq!(first.json["strength"], "weak", "{}", first.json);
    assert_eq!(first.json["decision"], "process");
    app.wait_applied(1).await;
    let again = app.post_raw("github", ping.to_vec(), &headers).await;
    assert_eq!(again.json["decision"], "process", "{}", again.json);
    assert_eq!(again.json["reason"], "weak_match_reversible_flagged");
    assert_eq!(again.json["flagged_for_correction"], true);
    assert_ne!(
        again.json["effect_id"], first.json["effect_id"],
        "its own effect"
    );

    // The same weakness on money: reconcile, never a second refund.
    app.post_signed("hmac", &refund("pay_w", 100, None)).await;
    app.wait_applied(3).await;
    let money = app.post_signed("hmac", &refund("pay_w", 100, None)).await;
    assert_eq!(money.json["decision"], "reconcile", "{}", money.json);
    assert_eq!(money.json["reason"], "weak_match_critical");
}

#[tokio::test]
async fn a_differing_discriminant_is_quarantined_on_every_path_that_finds_a_record() {
    // In flight: the first refund's effect is still running downstream.
    let downstream = Downstream::start(Behaviour::Apply { delay_ms: 1500 }).await;
    let app = spawn_app_with(&format!("{FAST_SWEEP}{}", downstream.sink_toml(5000))).await;
    app.post_signed("hmac", &refund("pay_d", 100, Some("rr_d")))
        .await;
    let in_flight = app
        .post_signed("hmac", &refund("pay_d", 200, Some("rr_d")))
        .await;
    assert_eq!(
        in_flight.json["decision"], "quarantine",
        "not deferred: {}",
        in_flight.json
    );
    assert_eq!(in_flight.json["differences"][0]["field"], "amount");

    // Outcome unknown: quarantined too, the collision is not hidden behind it.
    let hung = Downstream::start(Behaviour::ApplyThenHang).await;
    let app = spawn_app_with(&format!("{FAST_SWEEP}{}", hung.sink_toml(200))).await;
    app.post_signed("hmac", &refund("pay_u", 100, Some("rr_u")))
        .await;
    app.wait_effects_in("unknown", 1).await;
    let unknown = app
        .post_signed("hmac", &refund("pay_u", 200, Some("rr_u")))
        .await;
    assert_eq!(unknown.json["decision"], "quarantine", "{}", unknown.json);
    assert_eq!(unknown.json["reason"], "discriminants_differ");
}

/// On PostgreSQL several writers commit at once, each owning the shards of its
/// business keys; transport links are claimed without a lock. Pairs that share
/// a GitHub delivery GUID but open different issues have different business
/// keys, so most pairs are decided by two writers concurrently, both reading
/// "no link yet". Exactly one of each pair may be the first reception; the
/// other must be the transport collision — never two first receptions. A
/// batch whose claim lost the race fails (503) and is retried, as a provider
/// would. (SQLite: one writer; the same outcome must hold.)
#[tokio::test]
async fn a_delivery_guid_raced_across_writers_has_one_first_reception() {
    let app = spawn_app_with("[engine]\npostgres_writers = 4\n").await;
    let secret = crate::support::app::secret_of(app.source("github"));
    let scheme = app.source("github").scheme.clone();
    let post = |guid: String, issue: u64| {
        let (app, secret, scheme) = (&app, &secret, &scheme);
        async move {
            let body = serde_json::to_vec(&serde_json::json!({
                "action": "opened",
                "issue": { "id": issue, "number": issue, "title": format!("issue {issue}") },
                "repository": { "id": 77 },
            }))
            .unwrap();
            let mut headers =
                unicity::providers::signature::sign(scheme, secret, "m", 0, &body).unwrap();
            headers.push(("x-github-event".to_owned(), "issues".to_owned()));
            headers.push(("x-github-delivery".to_owned(), guid));
            for _ in 0..20 {
                let reply = app.post_raw("github", body.clone(), &headers).await;
                if reply.status != 503 {
                    return reply;
                }
            }
            panic!("still refused after 20 tries");
        }
    };
    let pairs = 24u64;
    let replies = futures_util::future::join_all((0..pairs).flat_map(|n| {
        let guid = format!("guid-{n}");
        [post(guid.clone(), 1000 + n), post(guid, 5000 + n)]
    }))
    .await;
    for (n, pair) in replies.chunks(2).enumerate() {
        let reasons: Vec<&str> = pair
            .iter()
            .map(|r| r.json["reason"].as_str().unwrap_or("?"))
            .collect();
        let collisions = reasons
            .iter()
            .filter(|r| **r == "transport_id_collision")
            .count();
        assert_eq!(collisions, 1, "pair {n}: {reasons:?}");
        assert!(
            pair.iter().any(|r| r.json["decision"] == "process"),
            "pair {n}: {:?}",
            pair.iter().map(|r| &r.json).collect::<Vec<_>>()
        );
    }
    assert_eq!(app.transport_links().await, pairs as i64);
}

/// GitHub signs the body only: the event type comes from `X-GitHub-Event`,
/// which anyone replaying a captured delivery may change. Under the same
/// delivery GUID and body, another event type (or another spelling of it)
/// is not a retry to process again under a new key: it is the GUID reused
/// for something else, quarantined.
#[tokio::test]
async fn a_captured_delivery_replayed_with_another_event_header_is_quarantined_not_processed() {
    let app = spawn_app().await;
    let secret = crate::support::app::secret_of(app.source("github"));
    let scheme = app.source("github").scheme.clone();
    let body = serde_json::to_vec(&serde_json::json!({
        "ref": "refs/heads/main",
        "after": "6113728f27ae82c7b1a177c8d03f9e96e0adf246",
        "repository": { "id": 77 },
        "sender": { "id": 9 },
    }))
    .unwrap();
    let post = |event: &'static str| {
        let (app, secret, scheme, body) = (&app, &secret, &scheme, &body);
        async move {
            let mut headers =
                unicity::providers::signature::sign(scheme, secret, "m", 0, body).unwrap();
            headers.push(("x-github-event".to_owned(), event.to_owned()));
            headers.push(("x-github-delivery".to_owned(), "guid-replayed".to_owned()));
            app.post_raw("github", body.clone(), &headers).await
        }
    };
    let first = post("push").await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    let retried = post("push").await;
    assert_eq!(retried.json["decision"], "ignore", "{}", retried.json);
    // The header read as GitHub's are, trimmed: "push " is a retry.
    let padded = post("push ").await;
    assert_eq!(padded.json["decision"], "ignore", "{}", padded.json);
    for event in ["Push", "create"] {
        let replayed = post(event).await;
        assert_ne!(
            replayed.json["decision"], "process",
            "{event:?}: {}",
            replayed.json
        );
        assert_eq!(
            replayed.json["reason"], "transport_id_collision",
            "{event:?}: {}",
            replayed.json
        );
    }
    assert_eq!(app.effects().await, 1);
}

/// A breaker trips because its strategy's keys collide: the deliveries it
/// ignored as duplicates in the window that tripped it may have been
/// distinct operations merged by the same fault. Each is flagged for
/// reconciliation — a case a person settles — not only those that come
/// after the trip.
#[tokio::test]
async fn a_tripped_breaker_flags_for_reconciliation_what_its_strategy_ignored_in_the_window() {
    let app = spawn_app_with(
        "[engine]\nbreaker_threshold = 0.1\nbreaker_min_deliveries = 3\nbreaker_check_ms = 100\n",
    )
    .await;
    // Given a refund, and a look-alike its strategy ignored as its duplicate
    let body = refund("pay_k1", 100, Some("rr_k1"));
    let first = app.post_signed("hmac", &body).await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    app.wait_applied(1).await;
    let ignored = app.post_signed("hmac", &body).await;
    assert_eq!(
        ignored.json["reason"], "duplicate_of_applied",
        "{}",
        ignored.json
    );
    let ignored_id = ignored.json["delivery_id"].as_str().unwrap().to_owned();
    // When the strategy's keys then collide and its breaker trips
    app.collide("pay_k2", 2).await;
    app.wait_journal("StrategyTripped", 1).await;
    // Then the ignored delivery has a case of its own, open, that names the
    // effect it was taken for a duplicate of
    let flagged = format!(
        "SELECT COUNT(*) FROM cases WHERE delivery_id = '{ignored_id}' \
         AND reason = 'breaker_tripped' AND status = 'open'"
    );
    app.wait_for_count(&flagged, 1).await;
    let listed = app.get("/api/cases?reason=breaker_tripped").await.json;
    let cases = listed["cases"].as_array().expect("a list");
    assert_eq!(cases.len(), 1, "{listed}");
    let case_id = cases[0]["case_id"].as_str().unwrap().to_owned();
    let shown = app.get(&format!("/api/cases/{case_id}")).await.json;
    assert_eq!(
        shown["delivery"]["delivery_id"],
        ignored_id.as_str(),
        "{shown}"
    );
    let delivery = app.get(&format!("/api/deliveries/{ignored_id}")).await.json;
    assert!(
        delivery.to_string().contains(&case_id),
        "the delivery names its case: {delivery}"
    );
    // which a person settles as any other: a duplicate after all
    let resolved = app
        .resolve(
            &case_id,
            serde_json::json!({"resolution": "confirm_duplicate", "note": "one refund listed"}),
        )
        .await;
    assert_eq!(resolved.status, 200, "{}", resolved.json);
    assert_eq!(app.effects().await, 2, "nothing applied again");
    // and the next evaluations flag nothing twice; a rebuild reads the same
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert_eq!(
        app.count("SELECT COUNT(*) FROM cases WHERE reason = 'breaker_tripped'")
            .await,
        1
    );
    let rows = "SELECT case_id || '|' || status || '|' || reason FROM cases ORDER BY case_id";
    let probe = crate::support::probe::Probe::of(&app.db);
    let live = probe.rows(rows).await;
    unicity::services::projections::rebuild(&app.db)
        .await
        .expect("rebuild");
    assert_eq!(probe.rows(rows).await, live);
}

/// A process reads a trip at its next evaluation; until then it still
/// ignores what the tripped strategy keys as a duplicate. Those ignores are
/// flagged too, by the evaluations that follow the trip.
#[tokio::test]
async fn what_another_process_ignored_before_it_read_the_trip_is_flagged_too() {
    let sensitive =
        "[engine]\nbreaker_threshold = 0.1\nbreaker_min_deliveries = 3\nbreaker_check_ms = 100\n";
    let app = spawn_app_with(sensitive).await;
    // Given a second process that reads breakers once in ten minutes
    let slow = sensitive.replace("breaker_check_ms = 100", "breaker_check_ms = 600000");
    let other = crate::support::app::spawn_on(&app.database_url, &slow, None).await;
    let body = refund("pay_s1", 100, Some("rr_s1"));
    let first = app.post_signed("hmac", &body).await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    app.wait_applied(1).await;
    // When the strategy trips in the first, and the second, not knowing
    // yet, ignores a retry as a duplicate
    app.collide("pay_s2", 2).await;
    app.wait_journal("StrategyTripped", 1).await;
    let ignored = other.post_signed("hmac", &body).await;
    assert_eq!(
        ignored.json["reason"], "duplicate_of_applied",
        "{}",
        ignored.json
    );
    // Then that ignore is flagged for a person, once
    let id = ignored.json["delivery_id"].as_str().unwrap();
    let flagged = format!(
        "SELECT COUNT(*) FROM cases WHERE delivery_id = '{id}' \
         AND reason = 'breaker_tripped' AND status = 'open'"
    );
    app.wait_for_count(&flagged, 1).await;
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert_eq!(app.journal_count("CohortFlagged").await, 1);
}
