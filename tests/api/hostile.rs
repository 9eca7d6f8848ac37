//! Hostile and odd bodies: whatever arrives is journaled and quarantined when it
//! cannot be keyed safely, and every journal row stays readable afterwards.

use serde_json::{Value, json};
use unicity::domain::journal::JournalEvent;
use unicity::domain::strict_json::{self, Limits, MAX_BODY_DEPTH};
use unicity::services::projections;
use unicity::store::journal;

use crate::support::app::{refund, spawn_app, spawn_app_with};
use crate::support::counts::Counts;
use crate::support::downstream::{Behaviour, Downstream};

/// A norefid refund without reference (keyed on its canonical body, which
/// the journal keeps inside the key material) nesting `depth` levels deep.
fn refund_nested(depth: usize) -> Vec<u8> {
    let head = format!(
        r#"{{"type":"refund.created","payment_id":"pay_{depth}","amount":1500,"currency":"EUR""#
    );
    let lines = depth - 1;
    let tail = match lines {
        0 => String::new(),
        n => format!(r#","lines":{}{}"#, "[".repeat(n), "]".repeat(n)),
    };
    format!("{head}{tail}}}").into_bytes()
}

#[tokio::test]
async fn every_depth_from_1_to_300_is_accepted_read_back_and_rebuilt() {
    let app = spawn_app().await;
    let mut ids = Vec::new();
    for depth in 1..=300 {
        let reply = app.post_signed("hmac", &refund_nested(depth)).await;
        assert_eq!(reply.status, 202, "depth {depth}: {}", reply.json);
        let (parse, action, reason) = match depth <= MAX_BODY_DEPTH {
            true => ("json", "process", "new_key"),
            false => ("too_deep", "quarantine", "body_too_deep"),
        };
        assert_eq!(reply.json["parse"], parse, "depth {depth}");
        assert_eq!(reply.json["decision"], action, "depth {depth}");
        assert_eq!(reply.json["reason"], reason, "depth {depth}");
        if depth > MAX_BODY_DEPTH {
            assert_eq!(reply.json["key"], Value::Null, "depth {depth} keyed");
        }
        ids.push((
            depth,
            reply.json["delivery_id"].as_str().unwrap().to_owned(),
        ));
    }
    for (depth, id) in &ids {
        let shown = app.delivery(id).await;
        assert_eq!(shown.status, 200, "depth {depth}: {}", shown.json);
        assert_eq!(shown.json["delivery_id"], id.as_str(), "depth {depth}");
        assert!(
            shown.json["body_ref"]["sha256"].is_string(),
            "depth {depth}"
        );
    }
    // Every body too deep is journaled raw, none keyed.
    let too_deep = (300 - MAX_BODY_DEPTH) as i64;
    assert_eq!(app.raw_bodies().await, 300);
    assert_eq!(
        app.count("SELECT COUNT(*) FROM deliveries WHERE reason = 'body_too_deep' AND business_key IS NULL")
            .await,
        too_deep
    );

    let journaled = app.journal_rows().await;
    let replayed = projections::rebuild(&app.db)
        .await
        .expect("the rebuild reads every row");
    assert_eq!(replayed.rows as i64, journaled);
    assert_eq!(
        app.count("SELECT COUNT(*) FROM deliveries WHERE reason = 'body_too_deep'")
            .await,
        too_deep
    );
}

#[tokio::test]
async fn duplicate_member_names_at_any_depth_are_quarantined_and_never_keyed() {
    let app = spawn_app().await;
    let bodies = [
        r#"{"type":"refund.created","payment_id":"pay_1","refund_reference":"rr_1","amount":1,"amount":2,"currency":"EUR"}"#,
        // Nested, equal values, the second name escaped: still two members of one name.
        r#"{"type":"refund.created","payment_id":"pay_1","refund_reference":"rr_1","amount":2,"currency":"EUR","meta":{"lines":[{"sku":"a","\u0073ku":"a"}]}}"#,
    ];
    for body in bodies {
        let reply = app.post_signed("hmac", body.as_bytes()).await;
        assert_eq!(reply.status, 202, "{body}: {}", reply.json);
        assert_eq!(reply.json["parse"], "duplicate_member_names", "{body}");
        assert_eq!(reply.json["decision"], "quarantine", "{body}");
        assert_eq!(reply.json["reason"], "duplicate_member_names", "{body}");
        assert_eq!(reply.json["key"], Value::Null, "{body}");
        assert!(reply.json["case_id"].is_string(), "{body}");

        let shown = app
            .delivery(reply.json["delivery_id"].as_str().unwrap())
            .await;
        assert_eq!(shown.status, 200);
        assert_eq!(shown.json["parse"], "duplicate_member_names");
        assert_eq!(shown.json["identity"]["business"], Value::Null);
        assert_eq!(
            shown.json["identity"]["unresolved"],
            "duplicate_member_names"
        );
        let types: Vec<_> = shown.json["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["event_type"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(types, ["DeliveryReceived", "KeyDerived", "DecisionMade"]);
    }
    // Journaled raw: both bodies kept, byte for byte.
    assert_eq!(app.raw_bodies().await, 2);
    assert_eq!(app.reservations().await, 0);

    // Nothing was reserved for refund rr_1: its first clean delivery is new.
    let clean = json!({"type": "refund.created", "payment_id": "pay_1",
        "refund_reference": "rr_1", "amount": 2, "currency": "EUR"});
    let reply = app
        .post_signed("hmac", &serde_json::to_vec(&clean).unwrap())
        .await;
    assert_eq!(reply.json["decision"], "process", "{}", reply.json);
    assert_eq!(reply.json["reason"], "new_key", "{}", reply.json);
}

/// Before bodies had a nesting limit, a body ~127 levels deep was keyed and its
/// canonical form journaled inside `KeyDerived`, past what `serde_json` reads
/// by default. Such rows are in journals already and must stay readable.
#[tokio::test]
async fn rows_nested_past_serde_json_limit_written_before_the_limit_stay_readable() {
    let app = spawn_app().await;
    let reply = app
        .post_signed("hmac", &crate::support::app::refund("pay_old", 900, None))
        .await;
    assert_eq!(reply.status, 202, "{}", reply.json);
    let id: unicity::domain::delivery::DeliveryId =
        reply.json["delivery_id"].as_str().unwrap().parse().unwrap();

    let stored = journal::for_delivery(&app.db, id).await.expect("read");
    let before = stored.len();
    let Some(JournalEvent::KeyDerived(mut derived)) = stored
        .into_iter()
        .map(|s| s.event)
        .find(|e| e.event_type() == "KeyDerived")
    else {
        panic!("no KeyDerived");
    };
    let mut body = json!(1);
    for _ in 0..127 {
        body = json!([body]);
    }
    let keyed = derived
        .derivation
        .business
        .as_mut()
        .expect("a keyed delivery");
    keyed.material = Some(json!({ "body": body }));
    let old = JournalEvent::KeyDerived(derived);
    assert!(
        serde_json::from_str::<Value>(&old.data_text()).is_err(),
        "deep enough"
    );
    // Journaled as a server before the nesting limit would have: the row
    // alone, its projection already written.
    unicity::store::transaction(&app.db, async |tx| {
        tx.append(Some(id), &old, chrono::Utc::now());
        Ok::<_, sea_orm::DbErr>(())
    })
    .await
    .expect("append");

    let response = app
        .client
        .get(format!("{}/api/deliveries/{id}", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let text = response.text().await.unwrap();
    let shown = strict_json::parse(&text, Limits::STORED).expect("a JSON answer");
    let events = shown["events"].as_array().unwrap();
    assert_eq!(events.len(), before + 1);
    let deep = &events[before]["data"]["derivation"]["business"]["material"]["body"];
    assert_eq!(deep.pointer(&"/0".repeat(127)), Some(&json!(1)));

    let journaled = app.journal_rows().await;
    let replayed = projections::rebuild(&app.db)
        .await
        .expect("the rebuild reads every row");
    assert_eq!(replayed.rows as i64, journaled);
}

#[tokio::test]
async fn a_body_holding_a_nul_character_is_kept_and_quarantined_without_failing_its_batch() {
    // JSON may escape any character, NUL included; PostgreSQL stores no text
    // holding one. Read from the body, it would reach the journal, the
    // effects' discriminants and the read model, and the database's refusal
    // at the commit would fail every delivery batched with it, again at each
    // retry. It is kept raw and quarantined instead, on both backends.
    let app = spawn_app().await;
    for (n, (payment, currency, reference)) in [
        ("pay_nul\u{0}1", "EUR", "rr_nul1"),
        ("pay_nul2", "EU\u{0}R", "rr_nul2"),
        ("pay_nul3", "EUR", "rr_\u{0}"),
    ]
    .into_iter()
    .enumerate()
    {
        let body = serde_json::to_vec(&json!({
            "type": "refund.created",
            "payment_id": payment,
            "amount": 900,
            "currency": currency,
            "refund_reference": reference,
            "sent_at": chrono::Utc::now().to_rfc3339(),
        }))
        .unwrap();
        assert!(String::from_utf8_lossy(&body).contains(r"\u0000"));
        let other = crate::support::app::refund(&format!("pay_beside_{n}"), 900, Some("rr_b"));
        let (hostile, beside) = tokio::join!(
            app.post_signed("hmac", &body),
            app.post_signed("hmac", &other)
        );
        assert_eq!(hostile.status, 202, "{}", hostile.json);
        assert_eq!(hostile.json["parse"], "nul_character", "{}", hostile.json);
        assert_eq!(hostile.json["decision"], "quarantine", "{}", hostile.json);
        assert_eq!(hostile.json["key"], Value::Null, "{}", hostile.json);
        assert_eq!(beside.status, 202, "{}", beside.json);
        assert_eq!(beside.json["decision"], "process", "{}", beside.json);

        let id = hostile.json["delivery_id"].as_str().unwrap();
        let shown = app.delivery(id).await;
        assert_eq!(shown.status, 200, "{}", shown.json);
        let stored = app
            .count(&format!(
                "SELECT COUNT(*) FROM raw_bodies WHERE sha256 = '{}' AND size = {}",
                shown.json["body_ref"]["sha256"].as_str().unwrap(),
                body.len()
            ))
            .await;
        assert_eq!(stored, 1, "the raw body is kept");
    }
    // A member name holding NUL is refused the same way.
    let named = br#"{"type":"refund.created","payment_id":"pay_n","amount":1,"currency":"EUR","x\u0000":1}"#;
    let reply = app.post_signed("hmac", named).await;
    assert_eq!(reply.json["parse"], "nul_character", "{}", reply.json);

    // The read model follows: a search waits for the projector.
    let found = app.get("/api/deliveries?decision=quarantine").await;
    assert_eq!(found.status, 200, "{}", found.json);
    assert_eq!(found.json["freshness"]["behind"], 0, "{}", found.json);
    assert_eq!(found.json["deliveries"].as_array().unwrap().len(), 4);
    let journaled = app.journal_rows().await;
    let replayed = projections::rebuild(&app.db)
        .await
        .expect("the rebuild reads every row");
    assert_eq!(replayed.rows as i64, journaled);
}

/// A GitHub `issues.opened` delivery signed for the demo's `github` source,
/// with `guid` as its unsigned `X-GitHub-Delivery`.
async fn github_issue(app: &crate::support::app::TestApp, guid: &str, issue: u64) -> Value {
    let source = app.source("github");
    let secret = crate::support::app::secret_of(source);
    let body = serde_json::to_vec(&json!({
        "action": "opened",
        "issue": { "id": issue, "number": issue, "title": format!("issue {issue}") },
        "repository": { "id": 77 },
    }))
    .unwrap();
    let mut headers =
        unicity::providers::signature::sign(&source.scheme, &secret, "m", 0, &body).unwrap();
    headers.push(("x-github-event".to_owned(), "issues".to_owned()));
    headers.push(("x-github-delivery".to_owned(), guid.to_owned()));
    let reply = app.post_raw("github", body, &headers).await;
    assert!(
        (200..300).contains(&reply.status),
        "{}: {}",
        reply.status,
        reply.json
    );
    reply.json
}

#[tokio::test]
async fn a_delivery_id_too_long_to_index_is_kept_unsearchable_and_never_stops_the_read_model() {
    let app = spawn_app().await;
    // 7,000 characters of random hexadecimal: too long for a PostgreSQL
    // B-tree entry even compressed, inside the request's header limit.
    let long: String = (0..219)
        .map(|_| uuid::Uuid::new_v4().simple().to_string())
        .collect();
    let first = github_issue(&app, &long, 1).await;
    let second = github_issue(&app, "guid-after-the-long-one", 2).await;
    let (first, second) = (
        first["delivery_id"].as_str().unwrap().to_owned(),
        second["delivery_id"].as_str().unwrap().to_owned(),
    );

    // The read model passes the long id and takes the delivery after it.
    crate::support::counts::read_model_caught_up(&app.db).await;
    let found = crate::search::found(&app, "q=guid-after-the-long-one").await;
    assert_eq!(found, vec![second.clone()]);
    assert_eq!(
        app.count(&format!(
            "SELECT COUNT(*) FROM deliveries WHERE delivery_id = '{first}' \
             AND provider_event_id IS NULL AND decision = 'process'"
        ))
        .await,
        1,
        "the long id is not indexed, the delivery is"
    );
    // The journal keeps the id whole: the delivery's page shows it.
    let shown = app.delivery(&first).await;
    assert_eq!(shown.status, 200, "{}", shown.json);
    assert!(shown.json.to_string().contains(&long));

    // A rebuild reads the same rows again.
    let before = app
        .count("SELECT COUNT(*) FROM deliveries WHERE provider_event_id IS NOT NULL")
        .await;
    projections::rebuild(&app.db).await.expect("rebuilt");
    assert_eq!(
        app.count("SELECT COUNT(*) FROM deliveries WHERE provider_event_id IS NOT NULL")
            .await,
        before
    );
    assert_eq!(before, 1);
}

#[tokio::test]
async fn two_refunds_whose_references_differ_past_what_a_double_holds_are_never_one_refund() {
    let app = spawn_app().await;
    let refund_numbered = |reference: &str| {
        format!(
            r#"{{"type":"refund.created","payment_id":"pay_big","amount":700,"currency":"EUR","refund_reference":{reference}}}"#
        )
        .into_bytes()
    };
    // Both references read as 1e20 once parsed.
    let first = app
        .post_signed("hmac", &refund_numbered("100000000000000000001"))
        .await;
    let second = app
        .post_signed("hmac", &refund_numbered("100000000000000000002"))
        .await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    assert_eq!(
        first.json["strategy"], "norefid-refund-fingerprint@1",
        "{}",
        first.json
    );
    // The second is not ignored as the first's duplicate: money waits for
    // the provider or a person.
    assert_eq!(second.json["decision"], "reconcile", "{}", second.json);
    assert_eq!(
        second.json["reason"], "weak_match_critical",
        "{}",
        second.json
    );
}

#[tokio::test]
async fn two_refunds_both_with_a_blank_reference_are_never_one_refund() {
    let app = spawn_app().await;
    let refund = |reference: &str, sent_at: &str| {
        format!(
            r#"{{"type":"refund.created","payment_id":"pay_blank","amount":700,"currency":"EUR","refund_reference":{reference},"sent_at":"{sent_at}"}}"#
        )
        .into_bytes()
    };
    let first = app
        .post_signed("hmac", &refund(r#""""#, "2026-12-07T10:00:00Z"))
        .await;
    let second = app
        .post_signed("hmac", &refund(r#""""#, "2026-12-07T10:07:00Z"))
        .await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    assert_eq!(
        first.json["strategy"], "norefid-refund-fingerprint@1",
        "{}",
        first.json
    );
    // Keyed on payment + "" the second was ignored as the first's
    // duplicate; a blank reference proves nothing, so money waits for the
    // provider or a person.
    assert_eq!(second.json["decision"], "reconcile", "{}", second.json);
    assert_eq!(
        second.json["reason"], "weak_match_critical",
        "{}",
        second.json
    );
}

#[tokio::test]
async fn a_downstream_answer_no_column_can_store_leaves_its_effect_applied_not_unknown() {
    // The downstream applies, then answers with U+0000 in its id and body
    // (PostgreSQL stores no text holding it), or with more than is kept.
    let long =
        Box::leak(format!(r#"{{"id":"rf_long","pad":"{}"}}"#, "x".repeat(70_000)).into_boxed_str());
    for (body, why) in [
        (r#"{"id":"rf\u0000x","note":"a\u0000b"}"#, "holds U+0000"),
        (&*long, "longer than 65536 bytes"),
    ] {
        let downstream = Downstream::start(Behaviour::ApplyAnswering(body)).await;
        let app = spawn_app_with(&downstream.sink_toml(2000)).await;
        let sent = app
            .post_signed("hmac", &refund("pay_nul", 700, Some("rr_nul")))
            .await;
        assert_eq!(sent.json["decision"], "process", "{}", sent.json);
        // Settled applied: no outcome_unknown case, no second call.
        app.wait_applied(1).await;
        assert_eq!(app.open_cases().await, 0, "{why}");
        assert_eq!(
            app.journal_count_containing("EffectApplied", why).await,
            1,
            "{why}"
        );
        assert_eq!(downstream.calls().len(), 1);
    }
}
