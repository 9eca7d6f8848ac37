//! Shadow replay: a candidate strategy set decided over the journal on
//! scratch databases, beside the live set's own replay, before it goes live.

use unicity::services::shadow::{self, Change, Window};

use crate::support::app::{TEST_SOURCES, id_of, refund, spawn_app};
use crate::support::counts::Counts;
use crate::support::forms::{csrf_in, signed_in};
use crate::support::processes::{cli, finished};

/// A candidate that keys refunds on the payment alone: it drops the refund
/// reference, so two refunds of one payment become one.
pub const PAYMENT_ONLY: &str = r#"
[[strategies]]
name = "norefid-refund-ref"
version = 2
provider = "norefid"
event_types = ["refund.*"]
kind = "business_reference"
strength = "strong"
horizon = "90d"
effect_type = "refund.create"
criticality = "critical"
description = "Candidate: the payment alone."
fields = [{ name = "payment", path = "$.payment_id" }]
scope = [{ name = "resource_type", value = "payment" }]
discriminants = [
  { name = "amount", path = "$.amount" },
  { name = "currency", path = "$.currency" },
]
sensitive = ["$.customer_email"]
"#;

/// The payment-only candidate replayed over the whole of `app`'s journal.
async fn replay(app: &crate::support::app::TestApp) -> shadow::ShadowReport {
    replay_of(app, PAYMENT_ONLY).await
}

/// `candidate` replayed over the whole of `app`'s journal.
async fn replay_of(app: &crate::support::app::TestApp, candidate: &str) -> shadow::ShadowReport {
    let scratch = tempfile::tempdir().unwrap();
    shadow::shadow(
        &app.db,
        TEST_SOURCES,
        candidate,
        &Window::default(),
        scratch.path(),
    )
    .await
    .expect("replayed")
}

#[tokio::test]
async fn a_candidate_that_merges_two_refunds_is_reported_first_and_the_live_set_replays_without_noise()
 {
    // Given a history: two refunds of one payment under two references, a
    // provider's retry of the first, and a refund without a reference,
    let app = spawn_app().await;
    let first_body = refund("pay_sh1", 700, Some("rr_sh_a"));
    let first = app.post_signed("hmac", &first_body).await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    app.wait_applied(1).await;
    let second = app
        .post_signed("hmac", &refund("pay_sh1", 700, Some("rr_sh_b")))
        .await;
    assert_eq!(second.json["decision"], "process", "{}", second.json);
    app.wait_applied(2).await;
    let retry = app.post_signed("hmac", &first_body).await;
    assert_eq!(retry.json["decision"], "ignore", "{}", retry.json);
    let plain = app.post_signed("hmac", &refund("pay_sh2", 300, None)).await;
    assert_eq!(plain.json["decision"], "process", "{}", plain.json);
    app.wait_applied(3).await;
    let journal_before = app.journal_rows().await;

    // when the candidate is replayed over the journal,
    let report = replay(&app).await;

    // then every delivery was replayed, the live set's own replay decides
    // each as the journal says (no noise),
    assert_eq!(report.replayed, 4);
    assert!(report.noise.is_empty(), "{:?}", report.noise);
    // the second refund merging into the first is listed first,
    let merge = report.changes.first().expect("a change");
    assert_eq!(merge.change, Change::Merge, "{:?}", report.changes);
    assert_eq!(merge.deliveries, 1);
    assert_eq!(merge.examples, [id_of(&second)]);
    assert_eq!(
        merge.transition,
        "process/new_key → ignore/duplicate_of_applied"
    );
    assert_eq!(merge.strategy, "norefid-refund-ref@1");
    // the retry stays a duplicate and the unreferenced refund is now keyed
    // by the candidate (a new key either way): nothing else merges,
    assert_eq!(
        report
            .changes
            .iter()
            .filter(|c| c.change == Change::Merge)
            .count(),
        1
    );
    // and nothing was written to the live database.
    assert_eq!(app.journal_rows().await, journal_before);
    assert_eq!(app.applied_effects().await, 3);
}

#[tokio::test]
async fn hundreds_of_deliveries_replay_in_journal_order_so_each_retry_stays_after_its_first() {
    // Given a journal where every refund is followed at once by the
    // provider's retry of it: replayed out of order, a retry would be decided
    // first (process) and its original second (ignore).
    let app = spawn_app().await;
    let pairs = 200;
    for n in 0..pairs {
        let body = refund(&format!("pay_order_{n}"), 100 + n, Some(&format!("rr_{n}")));
        let first = app.post_signed("hmac", &body).await;
        assert_eq!(first.json["decision"], "process", "{}", first.json);
        let retry = app.post_signed("hmac", &body).await;
        assert_eq!(retry.json["decision"], "ignore", "{}", retry.json);
    }

    // When the live set is replayed over it, many deliveries in flight at once
    let report = replay(&app).await;

    // Then each is decided as the journal says: no noise
    assert_eq!(report.replayed, 2 * pairs as usize);
    assert!(
        report.noise.is_empty(),
        "{} deliveries decided otherwise, e.g. {:?}",
        report.noise.len(),
        report.noise.first()
    );
}

#[tokio::test]
async fn the_replay_command_prints_its_json_report_alone_with_logs_on_standard_error() {
    // Given a journal, and the replay command with informational logs on
    let app = spawn_app().await;
    let sent = app
        .post_signed("hmac", &refund("pay_cli", 700, Some("rr_cli")))
        .await;
    assert_eq!(sent.json["decision"], "process", "{}", sent.json);
    let dir = tempfile::tempdir().unwrap();
    let candidate = dir.path().join("candidate.toml");
    std::fs::write(&candidate, PAYMENT_ONLY).unwrap();
    let mut command = cli(&app.database_url, "", dir.path());
    command
        .env("RUST_LOG", "info")
        .args(["--log-format", "json", "replay", "--json", "--strategies"])
        .arg(&candidate);

    // When it runs, then standard output is one JSON document: its report
    let printed = finished(command).await;
    let report: serde_json::Value = serde_json::from_str(&printed)
        .unwrap_or_else(|e| panic!("stdout is the report alone ({e}): {printed}"));
    assert_eq!(report["replayed"], 1, "{report}");
}

#[tokio::test]
async fn a_candidate_with_anything_but_strategies_and_hierarchies_is_refused() {
    let app = spawn_app().await;
    let scratch = tempfile::tempdir().unwrap();
    let refused = shadow::shadow(
        &app.db,
        TEST_SOURCES,
        "[[sinks]]\nsource = \"hmac\"\nkind = \"record\"\n",
        &Window::default(),
        scratch.path(),
    )
    .await;
    assert!(refused.is_err());
}

#[tokio::test]
async fn an_engineer_replays_a_candidate_from_the_strategies_page_and_sees_the_merge_first() {
    let app = spawn_app().await;
    let first = app
        .post_signed("hmac", &refund("pay_shp", 700, Some("rr_shp_a")))
        .await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    app.wait_applied(1).await;
    let second = app
        .post_signed("hmac", &refund("pay_shp", 700, Some("rr_shp_b")))
        .await;
    assert_eq!(second.json["decision"], "process", "{}", second.json);
    app.wait_applied(2).await;

    // Support may not replay.
    let mut support = signed_in(&app, "sam", unicity::auth::Role::Support).await;
    let refused = support
        .post("/strategies/replay", &[("candidate", PAYMENT_ONLY)])
        .await;
    assert_eq!(refused.status, reqwest::StatusCode::FORBIDDEN);

    // An engineer pastes the candidate into the Strategies page's form,
    let mut engineer = signed_in(&app, "eli", unicity::auth::Role::Engineer).await;
    let page = engineer.get("/strategies").await;
    assert!(
        page.body.contains(r#"action="/strategies/replay""#),
        "{}",
        page.body
    );
    let csrf = csrf_in(&page.body);
    let answer = engineer
        .post(
            "/strategies/replay",
            &[
                ("csrf", &csrf),
                ("candidate", PAYMENT_ONLY),
                ("hours", "24"),
            ],
        )
        .await;
    // and sees the second refund merged into the first, linked.
    assert_eq!(answer.status, reqwest::StatusCode::OK, "{}", answer.body);
    assert!(
        answer.body.contains(r#"<span id="noise">0</span>"#),
        "{}",
        answer.body
    );
    let merge = &answer.body[answer
        .body
        .find(r#"<tr class="change merge">"#)
        .expect("a merge")..];
    assert!(merge.contains("merge: effects may be lost"));
    assert!(
        merge.contains(&format!(r#"href="/deliveries/{}""#, id_of(&second))),
        "{merge}"
    );
    // A candidate with anything but strategies and hierarchies is refused,
    // and the form comes back with it.
    let bad = engineer
        .post(
            "/strategies/replay",
            &[
                ("csrf", &csrf),
                ("candidate", "[[sinks]]\nkind = \"record\"\n"),
            ],
        )
        .await;
    assert_eq!(bad.status, reqwest::StatusCode::BAD_REQUEST);
    assert!(bad.body.contains("not `sinks`"), "{}", bad.body);
    assert!(bad.body.contains("[[sinks]]"), "the candidate is kept");
}

/// The Strategies page's replay form posted by an engineer with `fields`
/// beside the CSRF token and the payment-only candidate.
async fn replay_page(
    app: &crate::support::app::TestApp,
    fields: &[(&str, &str)],
) -> crate::support::forms::Answer {
    let mut engineer = signed_in(app, "eli", unicity::auth::Role::Engineer).await;
    let csrf = csrf_in(&engineer.get("/strategies").await.body);
    let mut form = vec![("csrf", csrf.as_str()), ("candidate", PAYMENT_ONLY)];
    form.extend_from_slice(fields);
    engineer.post("/strategies/replay", &form).await
}

#[tokio::test]
async fn a_replay_of_a_source_that_never_delivered_is_refused_not_reported_as_no_change() {
    let app = spawn_app().await;
    let first = app
        .post_signed("hmac", &refund("pay_shs", 700, Some("rr_shs_a")))
        .await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    let scratch = tempfile::tempdir().unwrap();
    // Given a mistyped source,
    let window = Window {
        source: Some("hmacc".to_owned()),
        ..Window::default()
    };
    let refused = shadow::shadow(&app.db, TEST_SOURCES, PAYMENT_ONLY, &window, scratch.path())
        .await
        .expect_err("an unknown source");
    // then the replay names it instead of finding nothing to change;
    assert!(
        format!("{refused:#}").contains("no delivery from source `hmacc`"),
        "{refused:#}"
    );
    // the page says so too.
    let answer = replay_page(&app, &[("source", "hmacc")]).await;
    assert_eq!(answer.status, reqwest::StatusCode::BAD_REQUEST);
    assert!(
        answer.body.contains("no delivery from source"),
        "{}",
        answer.body
    );
    assert!(
        !answer.body.contains(r#"id="no-change""#),
        "{}",
        answer.body
    );
}

#[tokio::test]
async fn an_empty_window_says_nothing_was_compared() {
    let app = spawn_app().await;
    let first = app
        .post_signed("hmac", &refund("pay_shw", 700, Some("rr_shw_a")))
        .await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    // Given a window where nothing arrived (the refund came from another source),
    let answer = replay_page(&app, &[("source", "open")]).await;
    assert_eq!(answer.status, reqwest::StatusCode::OK, "{}", answer.body);
    // then the page says nothing was compared, not that nothing changes.
    assert!(
        answer.body.contains(r#"id="nothing-replayed""#),
        "{}",
        answer.body
    );
    assert!(
        !answer.body.contains(r#"id="no-change""#),
        "{}",
        answer.body
    );
}

#[tokio::test]
async fn a_window_over_the_page_limit_is_refused_naming_the_limit() {
    let app = spawn_app().await;
    for n in 0..3 {
        let reply = app
            .post_signed(
                "hmac",
                &refund("pay_shl", 700 + n, Some(&format!("rr_shl_{n}"))),
            )
            .await;
        assert_eq!(reply.json["decision"], "process", "{}", reply.json);
    }
    let refused = replay_within(&app, 2).await.expect_err("over the limit");
    assert!(
        format!("{refused:#}").contains("more than the 2 deliveries a page replays"),
        "{refused:#}"
    );
}

/// A batch counts once toward the page's limit, its events not at all:
/// a window of exactly the limit whose last delivery is a batch replays.
#[tokio::test]
async fn a_batch_counts_once_toward_the_page_limit() {
    let app = spawn_app().await;
    let plain = app
        .post_signed("hmac", &refund("pay_shb", 700, Some("rr_shb")))
        .await;
    assert_eq!(plain.json["decision"], "process", "{}", plain.json);
    let batch = app
        .post_signed("gocardless", &gocardless_batch(&["EV_LIM_1", "EV_LIM_2"]))
        .await;
    assert_eq!(
        batch.json["items"].as_array().map(Vec::len),
        Some(2),
        "{}",
        batch.json
    );
    let report = replay_within(&app, 2).await.expect("within the limit");
    assert_eq!((report.replayed, report.compared), (2, 3));
}

/// The payment-only candidate replayed as a page does, at most `most`
/// deliveries.
async fn replay_within(
    app: &crate::support::app::TestApp,
    most: usize,
) -> anyhow::Result<shadow::ShadowReport> {
    let scratch = tempfile::tempdir().unwrap();
    let window = Window {
        most: Some(most),
        ..Window::default()
    };
    shadow::shadow(&app.db, TEST_SOURCES, PAYMENT_ONLY, &window, scratch.path()).await
}

/// A GoCardless delivery of one payment's events `ids`.
fn gocardless_batch(ids: &[&str]) -> Vec<u8> {
    let events: Vec<serde_json::Value> = ids
        .iter()
        .map(|id| {
            serde_json::json!({
                "id": id, "created_at": "2026-12-07T10:00:00.000Z",
                "resource_type": "payments", "action": "confirmed",
                "links": { "payment": "PM_SHADOW" },
                "details": { "origin": "gocardless", "cause": "payment_confirmed" },
                "metadata": {}
            })
        })
        .collect();
    serde_json::to_vec(&serde_json::json!({ "events": events })).unwrap()
}

#[tokio::test]
async fn an_event_type_carrying_a_bidi_override_is_written_out_on_the_replay_page() {
    let app = spawn_app().await;
    let typed = |reference: &str| {
        let mut body: serde_json::Value =
            serde_json::from_slice(&refund("pay_bidi", 700, Some(reference))).unwrap();
        body["type"] = "refund.\u{202E}detaerc".into();
        serde_json::to_vec(&body).unwrap()
    };
    for reference in ["rr_bidi_a", "rr_bidi_b"] {
        let reply = app.post_signed("hmac", &typed(reference)).await;
        assert_eq!(reply.json["decision"], "process", "{}", reply.json);
    }
    app.wait_applied(2).await;
    let answer = replay_page(&app, &[]).await;
    assert_eq!(answer.status, reqwest::StatusCode::OK, "{}", answer.body);
    assert!(
        answer.body.contains(r#"<tr class="change merge">"#),
        "{}",
        answer.body
    );
    assert!(
        answer.body.contains("refund.&#60;U+202E&#62;detaerc"),
        "{}",
        answer.body
    );
    assert!(!answer.body.contains('\u{202E}'), "{}", answer.body);
}

/// The provider and strategy of `KEYED_BY_HEADER`, without its source.
macro_rules! keyed_catalog {
    () => {
        r#"
[[providers]]
name = "keyed"
event_type = [{ parts = [{ field = "$.type" }] }]

[[strategies]]
name = "keyed-refund"
version = 1
provider = "keyed"
event_types = ["refund.*"]
kind = "business_reference"
strength = "strong"
horizon = "90d"
effect_type = "refund.create"
criticality = "critical"
fields = [{ name = "request", path = "header:idempotency-key" }]

[[hierarchies]]
provider = "keyed"
event_type = "refund.*"
strategies = ["keyed-refund"]
"#
    };
}

/// A provider whose strategy keys on a header named like a secret
/// (`Idempotency-Key`): its refunds are told apart by that header alone.
const KEYED_BY_HEADER: &str = concat!(
    r#"
[[sources]]
slug = "keyed"
tenant = "acme"
provider = "keyed"
environment = "live"
allow_unsigned = true
signature = { scheme = "none" }
"#,
    keyed_catalog!()
);

#[tokio::test]
async fn a_header_a_strategy_keys_on_is_journaled_so_the_live_set_replays_as_it_decided() {
    // Given two refunds with one body told apart by their Idempotency-Key,
    // and a retry of the first
    let app = crate::support::app::spawn_app_with(KEYED_BY_HEADER).await;
    let body = br#"{"type":"refund.created","payment_id":"pay_k1","amount":500}"#;
    let key = |value: &str| vec![("Idempotency-Key".to_owned(), value.to_owned())];
    let first = app
        .post_raw("keyed", body.to_vec(), &key("idem-first-7d1"))
        .await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    let second = app
        .post_raw("keyed", body.to_vec(), &key("idem-second-9c4"))
        .await;
    assert_eq!(second.json["decision"], "process", "{}", second.json);
    let retry = app
        .post_raw("keyed", body.to_vec(), &key("idem-first-7d1"))
        .await;
    assert_eq!(retry.json["decision"], "ignore", "{}", retry.json);

    // Then the journal keeps the header the strategy keyed on, as it came
    let view = app
        .delivery(second.json["delivery_id"].as_str().unwrap())
        .await;
    let kept = crate::masking::header(&view.json, "idempotency-key");
    assert_eq!(kept, Some("idem-second-9c4"), "{}", view.json);
    // and the live set, replayed over it, decides each delivery as it did
    let scratch = tempfile::tempdir().unwrap();
    let config = format!("{KEYED_BY_HEADER}\n{TEST_SOURCES}");
    let report = shadow::shadow(&app.db, &config, "", &Window::default(), scratch.path())
        .await
        .expect("replayed");
    assert_eq!(report.replayed, 3);
    assert!(report.noise.is_empty(), "{:?}", report.noise);
}

#[tokio::test]
async fn a_header_a_strategy_keys_on_is_shown_once_its_source_is_no_longer_configured() {
    // Given a delivery keyed on its Idempotency-Key
    let app = crate::support::app::spawn_app_with(KEYED_BY_HEADER).await;
    let body = br#"{"type":"refund.created","payment_id":"pay_k2","amount":500}"#;
    let key = vec![("Idempotency-Key".to_owned(), "idem-gone-5e2".to_owned())];
    let posted = app.post_raw("keyed", body.to_vec(), &key).await;
    assert_eq!(posted.json["decision"], "process", "{}", posted.json);
    // When a server whose configuration no longer has its source shows it
    let later = crate::support::app::spawn_on(&app.database_url, keyed_catalog!(), None).await;
    let view = later
        .delivery(posted.json["delivery_id"].as_str().unwrap())
        .await;
    // Then the header its provider's strategy keys on is shown as journaled
    let shown = crate::masking::header(&view.json, "idempotency-key");
    assert_eq!(shown, Some("idem-gone-5e2"), "{}", view.json);
}

/// A candidate that keys GoCardless payment events by their payment alone:
/// two events of one payment become one.
const GOCARDLESS_BY_PAYMENT: &str = r#"
[[strategies]]
name = "gocardless-payment"
version = 1
provider = "gocardless"
event_types = ["payments.*"]
kind = "business_reference"
strength = "strong"
horizon = "30d"
effect_type = "event.handle"
criticality = "critical"
fields = [{ name = "payment", path = "$.links.payment" }]

[[hierarchies]]
provider = "gocardless"
event_type = "payments.*"
strategies = ["gocardless-payment", "gocardless-event-id"]
"#;

#[tokio::test]
async fn a_candidate_that_merges_two_events_of_one_batch_is_reported_event_by_event() {
    // Given a GoCardless batch of two events of one payment, each applied
    let app = spawn_app().await;
    let batch = app
        .post_signed("gocardless", &gocardless_batch(&["EV_SH_1", "EV_SH_2"]))
        .await;
    let items = batch.json["items"].as_array().expect("items").clone();
    assert_eq!(items.len(), 2, "{}", batch.json);
    assert!(
        items.iter().all(|i| i["decision"] == "process"),
        "{}",
        batch.json
    );

    // When the candidate is replayed over the journal
    let report = replay_of(&app, GOCARDLESS_BY_PAYMENT).await;

    // Then the second event merging into the first is reported, as itself
    assert!(report.noise.is_empty(), "{:?}", report.noise);
    assert_eq!(report.skipped, 0);
    assert_eq!((report.replayed, report.compared), (1, 2));
    let merge = report.changes.first().expect("a change");
    assert_eq!(merge.change, Change::Merge, "{:?}", report.changes);
    assert_eq!(merge.examples, [items[1]["delivery_id"].as_str().unwrap()]);
    assert_eq!(merge.strategy, "gocardless-event-id@1");
    assert_eq!(merge.event_type, "payments.confirmed");
    assert_eq!(
        merge.transition,
        "process/new_key → ignore/duplicate_of_applied"
    );
}
