//! Periodic reconciliation finds the losses nobody saw: the provider lists
//! a refund whose delivery never arrived (missing effect), and Unicity
//! applied one the provider never made (unexpected effect). A second run
//! over the same window opens nothing new. Real HTTP for the provider's
//! listing and the downstream; `unicity reconcile` run as a process.

use chrono::{DateTime, Duration, Utc};
use serde_json::json;

use unicity::auth::Role;

use crate::support::app::{TestApp, refund, spawn_app_with, spawn_on};
use crate::support::counts::Counts;
use crate::support::downstream::{Behaviour, Downstream};
use crate::support::forms::{csrf_in, signed_in};
use crate::support::pages::form_token;
use crate::support::processes::{cli, finished, refused};
use crate::support::provider::{Provider, ProviderApi};

/// Runs `unicity reconcile` over the hour around now; returns its output.
pub(crate) async fn reconcile(app: &TestApp, extra: &str) -> String {
    let now = Utc::now();
    reconcile_between(
        app,
        extra,
        now - Duration::hours(1),
        now + Duration::hours(1),
    )
    .await
}

/// Runs `unicity reconcile` over `[from, to)`; returns its output.
async fn reconcile_between(
    app: &TestApp,
    extra: &str,
    from: chrono::DateTime<Utc>,
    to: chrono::DateTime<Utc>,
) -> String {
    let dir = tempfile::tempdir().expect("temp dir");
    finished(reconciling(app, extra, (from, to), dir.path())).await
}

/// `unicity reconcile` over `[from, to)`, to run.
fn reconciling(
    app: &TestApp,
    extra: &str,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
    dir: &std::path::Path,
) -> std::process::Command {
    let mut command = cli(&app.database_url, extra, dir);
    command.args([
        "reconcile",
        "--from",
        &from.to_rfc3339(),
        "--to",
        &to.to_rfc3339(),
    ]);
    command
}

/// Every row of `table` as text, in primary-key order.
pub(crate) async fn rows(app: &TestApp, sql: &str) -> Vec<String> {
    use sea_orm::ConnectionTrait;
    let found = app
        .db
        .query_all_raw(sea_orm::Statement::from_string(
            app.db.get_database_backend(),
            sql.to_owned(),
        ))
        .await
        .expect("rows");
    found
        .iter()
        .map(|row| row.try_get_by_index::<String>(0).expect("text"))
        .collect()
}

#[tokio::test]
async fn reconciliation_finds_a_dropped_delivery_and_an_injected_effect_and_opens_each_once() {
    let now = Utc::now();
    let provider = Provider::start(
        &[
            ("re_a", "pay_a", 700, now),
            ("re_b", "pay_b", 500, now),
            // Its webhook is never delivered.
            ("re_c", "pay_c", 300, now),
        ],
        2,
    )
    .await;
    let downstream = Downstream::start(Behaviour::Apply { delay_ms: 0 }).await;
    let extra = format!("{}{}", downstream.sink_toml(2000), provider.lookup_toml());
    let app = spawn_app_with(&extra).await;
    for (payment, amount) in [("pay_a", 700), ("pay_b", 500), ("pay_x", 900)] {
        let reference = format!("rr_{payment}");
        let sent = app
            .post_signed("hmac", &refund(payment, amount, Some(&reference)))
            .await;
        assert_eq!(sent.json["decision"], "process", "{}", sent.json);
    }
    app.wait_applied(3).await;

    let first = reconcile(&app, &extra).await;
    assert!(
        first.contains(
            "norefid: 3 operations expected, 3 effects applied, 2 matched, 1 missing, 1 unexpected, 2 cases opened"
        ),
        "{first}"
    );
    assert_eq!(provider.pages(), 2, "three operations, two per page");
    let missing = app.get("/api/cases?reason=missing_effect").await.json;
    assert_eq!(
        missing["cases"].as_array().map(Vec::len),
        Some(1),
        "{missing}"
    );
    let case_id = missing["cases"][0]["case_id"].as_str().expect("a case");
    assert_eq!(
        app.count(&format!(
            "SELECT COUNT(*) FROM cases WHERE case_id = '{case_id}' AND status = 'open' \
             AND CAST(details AS TEXT) LIKE '%re_c%'"
        ))
        .await,
        1,
        "the case names the provider's operation"
    );
    // Both the API and the case page show it, with no delivery behind it.
    let shown = app.get(&format!("/api/cases/{case_id}")).await;
    assert_eq!(shown.status, 200, "{}", shown.json);
    assert!(shown.json["delivery"].is_null(), "{}", shown.json);
    assert_eq!(shown.json["operation"]["id"], "re_c", "{}", shown.json);
    let mut finance = signed_in(&app, "fin", Role::Finance).await;
    let page = finance.get(&format!("/cases/{case_id}")).await;
    assert_eq!(page.status, reqwest::StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("re_c") && page.body.contains("no delivery of it arrived"));
    // The dashboard counts both against what the provider listed.
    let dashboard = finance.get("/dashboard").await.body;
    for shown in [
        r#"<strong id="open-missing">1</strong>"#,
        r#"<strong id="open-unexpected">1</strong>"#,
        r#"<td class="missing">1</td>"#,
        r#"<td class="unexpected">1</td>"#,
    ] {
        assert!(dashboard.contains(shown), "{shown} on the dashboard");
    }
    let unexpected = app.get("/api/cases?reason=unexpected_effect").await.json;
    assert_eq!(unexpected["cases"].as_array().map(Vec::len), Some(1));
    let effect_of_x = rows(
        &app,
        "SELECT e.key FROM effects e JOIN deliveries d ON d.delivery_id = e.first_delivery_id \
         WHERE d.business_key = e.key AND e.key LIKE 'norefid-refund-ref@1:%' ORDER BY e.created_at DESC",
    )
    .await;
    assert_eq!(
        unexpected["cases"][0]["business_key"].as_str(),
        effect_of_x.first().map(String::as_str),
        "the injected refund is the unexpected one"
    );

    // The same window again: nothing new.
    let second = reconcile(&app, &extra).await;
    assert!(
        second.contains("1 missing, 1 unexpected, 0 cases opened"),
        "{second}"
    );
    assert_eq!(
        app.count(
            "SELECT COUNT(*) FROM cases WHERE reason IN ('missing_effect', 'unexpected_effect')"
        )
        .await,
        2
    );
    assert_eq!(app.journal_count("DiscrepancyFound").await, 2);
    assert_eq!(
        app.count("SELECT COUNT(*) FROM reconciliation_runs WHERE missing = 1 AND unexpected = 1")
            .await,
        2
    );
    assert_eq!(
        downstream.calls().len(),
        3,
        "reconciliation applies nothing"
    );

    // Rebuilt from the journal, the queue and the runs read the same.
    let cases = "SELECT case_id || '|' || reason || '|' || status || '|' || COALESCE(business_key, '') \
                 || '|' || delivery_id FROM cases ORDER BY case_id";
    let runs = "SELECT run_id || '|' || expected || '|' || applied || '|' || opened \
                FROM reconciliation_runs ORDER BY run_id";
    let (live_cases, live_runs) = (rows(&app, cases).await, rows(&app, runs).await);
    unicity::services::projections::rebuild(&app.db)
        .await
        .expect("rebuild");
    assert_eq!(rows(&app, cases).await, live_cases);
    assert_eq!(rows(&app, runs).await, live_runs);
}

/// A provider that made one refund `(id, payment, minutes ago)` whose
/// webhook never came, and a server whose only run compared the hour from
/// three to two hours ago; the look-up's configuration.
async fn an_hour_compared_before(
    (id, payment, minutes): (&str, &str, i64),
) -> (Provider, String, TestApp) {
    let now = Utc::now();
    let provider =
        Provider::start(&[(id, payment, 300, now - Duration::minutes(minutes))], 10).await;
    let extra = provider.lookup_toml();
    let app = spawn_app_with(&extra).await;
    let compared = reconcile_between(
        &app,
        &extra,
        now - Duration::hours(3),
        now - Duration::hours(2),
    )
    .await;
    assert!(compared.contains("0 operations expected"), "{compared}");
    (provider, extra, app)
}

/// A server that was down (or a run that failed) leaves a stretch of time
/// no window covered: the periodic run starts where the last run that
/// succeeded ended, not an hour before now, so a refund made in the
/// stretch whose webhook never came is still found.
#[tokio::test]
async fn the_periodic_run_covers_the_time_since_the_last_window_it_reconciled() {
    // Given an hour reconciled three to two hours ago, and then nothing
    let (_provider, extra, app) = an_hour_compared_before(("re_gap", "pay_gap", 90)).await;
    // When a server runs reconciliation periodically (the default window,
    // delay and slack: an hour, ten minutes, five minutes)
    let periodic = extra.replace("interval_secs = 0", "interval_secs = 1");
    let server = spawn_on(&app.database_url, &periodic, None).await;
    // Then the refund made ninety minutes ago, in the stretch, is found
    found_missing(&server, "re_gap").await;
    // And no stretch between the runs was left out
    let windows = rows(
        &server,
        "SELECT CAST(window_from AS TEXT) || '|' || CAST(window_to AS TEXT) \
         FROM reconciliation_runs WHERE error IS NULL ORDER BY window_from",
    )
    .await;
    for pair in windows.windows(2) {
        let (_, end) = pair[0].split_once('|').expect("two ends");
        let (start, _) = pair[1].split_once('|').expect("two ends");
        assert!(start <= end, "a gap between {} and {}", pair[0], pair[1]);
    }
}

/// Waits until a periodic run of `server` opened a missing-effect finding
/// naming `refund`, and no other.
async fn found_missing(server: &TestApp, refund: &str) {
    let started = std::time::Instant::now();
    while server
        .count("SELECT COUNT(*) FROM cases WHERE reason = 'missing_effect'")
        .await
        == 0
    {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "no missing effect found; runs: {:?}",
            rows(
                server,
                "SELECT CAST(window_from AS TEXT) || ' to ' || CAST(window_to AS TEXT) \
                 || CASE WHEN error IS NULL THEN '' ELSE ' failed' END FROM reconciliation_runs ORDER BY window_from"
            )
            .await
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let named = server
        .count(&format!(
            "SELECT COUNT(*) FROM cases WHERE CAST(details AS TEXT) LIKE '%{refund}%'"
        ))
        .await;
    assert_eq!(named, 1);
}

/// A periodic window that failed (the provider's API was down) is compared
/// again at the next interval, even when someone compared the last hour by
/// hand in between: a refund made in the failed window whose webhook never
/// came is still found.
#[tokio::test]
async fn a_failed_window_is_compared_again_after_a_later_run_by_hand() {
    // Given an hour reconciled three to two hours ago
    let (_provider, extra, app) = an_hour_compared_before(("re_failed", "pay_failed", 100)).await;
    let now = Utc::now();
    // And the next hour's run failed, its provider unreachable
    let dir = tempfile::tempdir().expect("temp dir");
    let unreachable = crate::support::provider::lookup_toml("http://127.0.0.1:9");
    let hour = (now - Duration::hours(2), now - Duration::hours(1));
    refused(reconciling(&app, &unreachable, hour, dir.path())).await;
    assert_eq!(
        app.count("SELECT COUNT(*) FROM reconciliation_runs WHERE error IS NOT NULL")
            .await,
        1
    );
    // And the last hour was then compared by hand
    let by_hand = reconcile_between(&app, &extra, now - Duration::hours(1), now).await;
    assert!(by_hand.contains("0 missing"), "{by_hand}");
    // When a server runs reconciliation periodically
    let periodic = extra.replace("interval_secs = 0", "interval_secs = 1");
    let server = spawn_on(&app.database_url, &periodic, None).await;
    // Then the refund made in the failed hour is found
    found_missing(&server, "re_failed").await;
}

/// A listing that says whether more pages follow is compared only whole:
/// a page that says more follow but names no cursor, or an answer that is
/// no page of it (an error the provider sent with a 200), fails the run,
/// so the window is compared again rather than counted as reconciled.
#[tokio::test]
async fn a_listing_cut_short_by_a_page_without_its_cursor_fails_the_run() {
    for answer in [
        json!({"data": [], "has_more": true}),
        json!({"error": {"message": "rate limited"}}),
    ] {
        let api = ProviderApi::start(200, answer.clone()).await;
        let extra = crate::support::provider::lookup_toml(&api.url).replace(
            "cursor_param = \"cursor\"",
            "cursor_param = \"cursor\"\nhas_more = \"$.has_more\"",
        );
        let app = spawn_app_with(&extra).await;
        let dir = tempfile::tempdir().expect("temp dir");
        let now = Utc::now();
        let window = (now - Duration::hours(1), now);
        refused(reconciling(&app, &extra, window, dir.path())).await;
        let errors = rows(&app, "SELECT error FROM reconciliation_runs").await;
        assert_eq!(errors.len(), 1, "{answer}");
        assert!(errors[0].contains("page 1"), "{answer}: {errors:?}");
    }
}

/// Without `has_more`, a 200 holding no list where the operations are (an
/// error in another shape, an API changed) fails the run too: read as an
/// empty page, the window would count as reconciled with its losses in it.
#[tokio::test]
async fn a_listing_answer_without_its_list_fails_the_run() {
    let error = failed_run(json!({"error": {"message": "rate limited"}})).await;
    assert!(error.contains("holds no list"), "{error}");
}

/// The error of the one run over the last hour of a provider whose
/// listing answers `page` (200) to everything: the run must fail.
async fn failed_run(page: serde_json::Value) -> String {
    let api = ProviderApi::start(200, page).await;
    let extra = crate::support::provider::lookup_toml(&api.url);
    let app = spawn_app_with(&extra).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let now = Utc::now();
    refused(reconciling(
        &app,
        &extra,
        (now - Duration::hours(1), now),
        dir.path(),
    ))
    .await;
    let errors = rows(&app, "SELECT error FROM reconciliation_runs").await;
    assert_eq!(errors.len(), 1);
    errors[0].clone()
}

/// A provider that ignores the cursor answers the same page again, naming
/// the same cursor: the run fails at once, not after a thousand pages.
#[tokio::test]
async fn a_listing_whose_cursor_does_not_move_fails_the_run() {
    let page = json!({"data": [], "next_cursor": "c1"});
    let error = failed_run(page).await;
    assert!(error.contains("page 2 names the cursor"), "{error}");
}

/// A page holding U+0000 fails the run with why: stored in the findings, it
/// would fail their commit on PostgreSQL, and every provider after it.
#[tokio::test]
async fn a_listing_answer_holding_u_0000_fails_the_run() {
    let page = json!({"data": [{"id": "re_\u{0}", "payment_id": "pay_n", "amount": 1,
        "currency": "EUR", "created_at": Utc::now().to_rfc3339()}]});
    let error = failed_run(page).await;
    assert!(error.contains("U+0000"), "{error}");
}

/// Two equal refunds the provider made 20 minutes ago (`re_1`, `re_2`),
/// listed and compared by payment, amount and currency, and a downstream
/// that applies the first call and refuses every later one after 12 s:
/// when they were made, the provider, the downstream, the configuration
/// and the server.
async fn two_refunds_the_second_refused() -> (DateTime<Utc>, Provider, Downstream, String, TestApp)
{
    let made = Utc::now() - Duration::minutes(20);
    let provider = Provider::start(
        &[("re_1", "pay_l", 700, made), ("re_2", "pay_l", 700, made)],
        10,
    )
    .await;
    let downstream = Downstream::start(Behaviour::ApplyOnceThenRefuse {
        status: 422,
        delay_ms: 12_000,
    })
    .await;
    let extra = format!(
        "{}{}",
        downstream.sink_toml(20_000),
        provider.lookup_toml().replace(
            "[reconciliation]",
            "[lookups.compare]\npayment = \"resource\"\namount = \"amount\"\ncurrency = \"currency\"\n\n[reconciliation]"
        )
    );
    let app = spawn_app_with(&extra).await;
    (made, provider, downstream, extra, app)
}

/// The second of two equal refunds is applied as distinct for the provider's
/// `re_2`, and its window is compared while the call is in flight: `re_2`
/// pairs with it. The downstream then refuses it. `re_2` was never
/// refunded, and its window will not be compared again: the next run, over
/// any window, finds it missing, once.
#[tokio::test]
async fn an_operation_whose_effect_failed_after_its_window_was_compared_is_found_missing() {
    let (made, _provider, downstream, extra, app) = two_refunds_the_second_refused().await;
    crate::lookups::two_equal_refunds(&app).await;
    // The look-up applies it for re_2: the call is in flight
    downstream.wait_calls(2).await;
    let until = Utc::now() + Duration::minutes(1);
    let in_flight = reconcile_between(&app, &extra, made - Duration::hours(1), until).await;
    assert!(in_flight.contains("2 matched, 0 missing"), "{in_flight}");
    app.wait_journal("EffectFailed", 1).await;
    // When a later window is compared, twice
    let (from, to) = (until + Duration::minutes(10), until + Duration::hours(1));
    let later = reconcile_between(&app, &extra, from, to).await;
    assert!(later.contains("1 missing"), "{later}");
    reconcile_between(&app, &extra, from, to).await;
    // Then re_2 is found missing, once
    let findings = rows(
        &app,
        "SELECT reason || '|' || status FROM cases WHERE CAST(details AS TEXT) LIKE '%re_2%'",
    )
    .await;
    assert_eq!(findings, ["missing_effect|open"]);
    assert_eq!(downstream.applied().len(), 1);
}

/// A finding closed while its operation's effect was in flight does not
/// answer for that effect: `re_2` is found missing, then its webhook comes
/// and a look-up applies it citing `re_2`; a person, seeing it applied,
/// closes the finding. The downstream then refuses the effect. `re_2` was
/// never refunded: the next run raises it again, once, naming the effect
/// that failed — the closed finding no longer hides it.
#[tokio::test]
async fn a_finding_closed_before_its_operations_effect_failed_is_raised_again_for_that_effect() {
    let (made, _provider, downstream, extra, app) = two_refunds_the_second_refused().await;
    // Given both refunds found missing, their webhooks not yet come
    let until = Utc::now() + Duration::minutes(1);
    let before = reconcile_between(&app, &extra, made - Duration::hours(1), until).await;
    assert!(before.contains("2 missing"), "{before}");
    let finding = rows(
        &app,
        "SELECT case_id FROM cases WHERE reason = 'missing_effect' \
         AND CAST(details AS TEXT) LIKE '%re_2%'",
    )
    .await;
    assert_eq!(finding.len(), 1, "{finding:?}");
    // When the webhooks come, the look-up applies re_2's, and while the
    // call is in flight a person closes re_2's finding
    crate::lookups::two_equal_refunds(&app).await;
    downstream.wait_calls(2).await;
    let closed = app
        .resolve(
            &finding[0],
            serde_json::json!({"resolution": "reject", "note": "its webhook came, applied"}),
        )
        .await;
    assert_eq!(closed.status, 200, "{}", closed.json);
    app.wait_journal("EffectFailed", 1).await;
    // And a later window is compared, twice
    let (from, to) = (until + Duration::minutes(10), until + Duration::hours(1));
    let later = reconcile_between(&app, &extra, from, to).await;
    assert!(later.contains("1 missing"), "{later}");
    reconcile_between(&app, &extra, from, to).await;
    // Then re_2 is raised again, once, naming the effect that failed
    let findings = rows(
        &app,
        "SELECT status || '|' || COALESCE(resolution, '-') FROM cases \
         WHERE reason = 'missing_effect' AND CAST(details AS TEXT) LIKE '%re_2%' \
         ORDER BY opened_at",
    )
    .await;
    assert_eq!(findings, ["resolved|reject", "open|-"]);
    let failed = rows(&app, "SELECT effect_id FROM effects WHERE state = 'failed'").await;
    assert_eq!(failed.len(), 1);
    assert_eq!(
        app.count(&format!(
            "SELECT COUNT(*) FROM cases WHERE status = 'open' \
             AND CAST(details AS TEXT) LIKE '%{}%'",
            failed[0]
        ))
        .await,
        1
    );
    assert_eq!(downstream.applied().len(), 1);
}

/// A listing that names one refund twice (a status history, pages that
/// overlap) expects it once.
#[tokio::test]
async fn a_refund_listed_twice_is_expected_once() {
    let made = Utc::now() - Duration::minutes(30);
    let twice = [
        ("re_twice", "pay_twice", 300, made),
        ("re_twice", "pay_twice", 300, made),
    ];
    let provider = Provider::start(&twice, 10).await;
    let extra = provider.lookup_toml();
    let app = spawn_app_with(&extra).await;
    let said = reconcile(&app, &extra).await;
    assert!(said.contains("1 operations expected"), "{said}");
    assert!(said.contains("1 missing"), "{said}");
}

/// A run over one source compares the provider's whole list with every
/// source's effects: a refund whose webhook came through another source is
/// not missing, one no source delivered is, and only the source's own
/// effects can be unexpected. The dashboard's latest run is a whole one.
#[tokio::test]
async fn a_run_over_one_source_finds_missing_only_what_no_source_delivered() {
    let made = Utc::now() - Duration::minutes(30);
    let provider = Provider::start(
        &[
            ("re_open", "pay_open", 300, made),
            ("re_lost", "pay_lost", 500, made),
        ],
        10,
    )
    .await;
    let extra = provider.lookup_toml();
    let app = spawn_app_with(&extra).await;
    let sent = app
        .post_raw("open", refund("pay_open", 300, None), &[])
        .await;
    assert_eq!(sent.json["decision"], "process", "{}", sent.json);
    app.wait_applied(1).await;
    let now = Utc::now();
    let dir = tempfile::tempdir().expect("temp dir");
    let window = (now - Duration::hours(1), now + Duration::minutes(1));
    let mut command = reconciling(&app, &extra, window, dir.path());
    command.args(["--source", "hmac"]);
    let one = finished(command).await;
    assert!(one.contains("1 missing, 0 unexpected"), "{one}");
    let missing = "SELECT COUNT(*) FROM cases WHERE reason = 'missing_effect' \
                   AND CAST(details AS TEXT) LIKE '%re_lost%'";
    assert_eq!(app.count(missing).await, 1);
    assert_eq!(
        app.count("SELECT COUNT(*) FROM cases").await,
        1,
        "re_open came through another source"
    );
    let mut finance = signed_in(&app, "fin", Role::Finance).await;
    let dashboard = finance.get("/dashboard").await;
    assert!(
        dashboard.body.contains("No reconciliation has run yet"),
        "{}",
        dashboard.body
    );
    // as the whole run does
    let whole = reconcile(&app, &extra).await;
    assert!(whole.contains("1 missing, 0 unexpected"), "{whole}");
}

#[tokio::test]
async fn every_reconciliation_finding_can_be_closed_with_a_reason_from_its_page_and_the_api() {
    // Given a missing effect (re_m's webhook never came) and an unexpected
    // one (pay_u's refund the provider does not list)
    let now = Utc::now();
    let provider = Provider::start(&[("re_m", "pay_m", 300, now)], 2).await;
    let downstream = Downstream::start(Behaviour::Apply { delay_ms: 0 }).await;
    let extra = format!("{}{}", downstream.sink_toml(2000), provider.lookup_toml());
    let app = spawn_app_with(&extra).await;
    let sent = app
        .post_signed("hmac", &refund("pay_u", 900, Some("rr_u")))
        .await;
    assert_eq!(sent.json["decision"], "process", "{}", sent.json);
    app.wait_applied(1).await;
    let ran = reconcile(&app, &extra).await;
    assert!(
        ran.contains("1 missing, 1 unexpected, 2 cases opened"),
        "{ran}"
    );
    let case_of = |reason: &str| format!("SELECT case_id FROM cases WHERE reason = '{reason}'");
    let missing = rows(&app, &case_of("missing_effect")).await.remove(0);
    let unexpected = rows(&app, &case_of("unexpected_effect")).await.remove(0);

    // When finance applies nothing to the missing one, the API refuses
    let refused = app
        .resolve(
            &missing,
            serde_json::json!({"resolution": "process_as_distinct", "note": "apply it"}),
        )
        .await;
    assert_eq!(refused.status, 409);
    let body = &refused.json;
    assert_eq!(body["code"], "close_only", "{body}");

    // and its page offers closing it, which resolves it
    let mut finance = signed_in(&app, "fin", Role::Finance).await;
    // the queue says it has no delivery, instead of an empty source "()"
    let queue = finance.get("/cases").await.body;
    let row = queue
        .split(&format!(r#"href="/cases/{missing}""#))
        .nth(1)
        .and_then(|rest| rest.split("</tr>").next())
        .expect("the finding's row");
    assert!(row.contains("no delivery") && !row.contains("()"), "{row}");
    assert!(!row.contains(r#"href="/deliveries/""#), "{row}");
    let path = format!("/cases/{missing}");
    let page = finance.get(&path).await;
    assert!(page.body.contains("Close with a reason"), "{}", page.body);
    assert!(!page.body.contains("value=\"process_as_distinct\""));
    let token = form_token(&page.body).expect("finance sees the form");
    let csrf = csrf_in(&page.body);
    let done = finance
        .post(
            &format!("{path}/resolve"),
            &[
                ("csrf", csrf.as_str()),
                ("form_token", token.as_str()),
                ("resolution", "reject"),
                ("note", "refunded by hand on 2026-12-02"),
            ],
        )
        .await;
    assert_eq!(
        done.location,
        format!("{path}?done=resolved"),
        "{}",
        done.body
    );

    // and the unexpected one is closed through the API
    let closed = app
        .resolve(
            &unexpected,
            serde_json::json!({"resolution": "reject", "note": "reversed at the bank"}),
        )
        .await;
    assert_eq!(closed.status, 200, "{}", closed.json);

    // Then both are resolved, by whom they say, and nothing was applied
    assert_eq!(
        app.count(
            "SELECT COUNT(*) FROM cases WHERE status = 'resolved' AND resolution = 'reject' \
             AND reason IN ('missing_effect', 'unexpected_effect')"
        )
        .await,
        2
    );
    assert_eq!(downstream.calls().len(), 1);
    let shown = finance.get(&path).await;
    assert!(
        shown.body.contains("refunded by hand"),
        "the note is in the history"
    );
}

/// A finding is not left to a person once it stops being true: the
/// provider's retry of a refund arrives an hour late, its effect is
/// applied, and the next run pairs the operation the "missing effect" case
/// named with it — the case closes itself, naming the effect, before anyone
/// refunds by hand what is already refunded. An applied effect the provider
/// lists late closes its "unexpected effect" case the same way.
#[tokio::test]
async fn a_finding_that_a_later_run_pairs_closes_itself_naming_the_effect() {
    use unicity::simulate::servers::ProviderState;
    let now = Utc::now();
    // Given a refund whose webhook has not come yet, and one applied that
    // the provider does not list yet
    let state = std::sync::Arc::new(ProviderState::with_page(10));
    state.made_at("re_late", "pay_late", 300, now);
    let port =
        unicity::simulate::servers::provider("127.0.0.1:0", state.clone()).expect("provider binds");
    let downstream = Downstream::start(Behaviour::Apply { delay_ms: 0 }).await;
    let lookup = crate::support::provider::lookup_toml(&format!("http://127.0.0.1:{port}"));
    let extra = format!("{}{lookup}", downstream.sink_toml(2000));
    let app = spawn_app_with(&extra).await;
    let early = app
        .post_signed("hmac", &refund("pay_early", 900, Some("rr_early")))
        .await;
    assert_eq!(early.json["decision"], "process", "{}", early.json);
    app.wait_applied(1).await;
    let first = reconcile(&app, &extra).await;
    assert!(
        first.contains("1 missing, 1 unexpected, 2 cases opened"),
        "{first}"
    );
    assert_eq!(app.open_cases().await, 2);

    // When the webhook arrives late and the provider lists the other
    let late = app
        .post_signed("hmac", &refund("pay_late", 300, Some("rr_late")))
        .await;
    assert_eq!(late.json["decision"], "process", "{}", late.json);
    app.wait_applied(2).await;
    state.made_at("re_early", "pay_early", 900, now);
    let second = reconcile(&app, &extra).await;
    assert!(second.contains("0 missing, 0 unexpected"), "{second}");

    // Then both findings are closed by the run, naming what it paired
    let closed = rows(
        &app,
        "SELECT reason || '|' || status || '|' || COALESCE(resolution, '') || '|' \
         || COALESCE(resolved_by, '') FROM cases ORDER BY reason",
    )
    .await;
    assert_eq!(
        closed,
        [
            "missing_effect|resolved|effect_found|reconciliation",
            "unexpected_effect|resolved|effect_found|reconciliation"
        ]
    );
    let effect = late.json["effect_id"].as_str().expect("an effect");
    let missing = rows(
        &app,
        "SELECT case_id FROM cases WHERE reason = 'missing_effect'",
    )
    .await
    .remove(0);
    let shown = app.get(&format!("/api/cases/{missing}")).await;
    assert!(
        shown.json.to_string().contains(effect),
        "the case names the effect: {}",
        shown.json
    );
    // A third run changes nothing, and a rebuild reads the same
    let third = reconcile(&app, &extra).await;
    assert!(third.contains("0 cases opened"), "{third}");
    let cases = "SELECT case_id || '|' || status || '|' || COALESCE(resolution, '') FROM cases \
                 ORDER BY case_id";
    let live = rows(&app, cases).await;
    unicity::services::projections::rebuild(&app.db)
        .await
        .expect("rebuild");
    assert_eq!(rows(&app, cases).await, live);
    assert_eq!(
        downstream.calls().len(),
        2,
        "reconciliation applies nothing"
    );
}

/// Two equal refunds on one payment, either side of a window's edge, the
/// second's webhook lost: the run over the first window pairs the first
/// refund with the one effect; the run over the next must not pair the
/// second refund with that same effect, which already stands for the
/// first — the second is missing.
#[tokio::test]
async fn an_effect_paired_by_one_run_stands_for_no_other_operation_in_the_next() {
    let now = Utc::now();
    let provider = Provider::start(
        &[
            ("re_edge_1", "pay_edge", 700, now - Duration::minutes(2)),
            // Its webhook is never delivered.
            ("re_edge_2", "pay_edge", 700, now + Duration::minutes(6)),
        ],
        10,
    )
    .await;
    let downstream = Downstream::start(Behaviour::Apply { delay_ms: 0 }).await;
    let extra = format!("{}{}", downstream.sink_toml(2000), provider.lookup_toml());
    let app = spawn_app_with(&extra).await;
    let sent = app
        .post_signed("hmac", &refund("pay_edge", 700, Some("rr_edge_1")))
        .await;
    assert_eq!(sent.json["decision"], "process", "{}", sent.json);
    app.wait_applied(1).await;
    // The first window ends four minutes from now: the second refund lies
    // in the next, the effect in the first, the slack (5 min) spans both.
    let edge = now + Duration::minutes(4);
    let first = reconcile_between(&app, &extra, edge - Duration::hours(1), edge).await;
    assert!(
        first.contains("1 matched, 0 missing, 0 unexpected"),
        "{first}"
    );
    let second = reconcile_between(&app, &extra, edge, edge + Duration::hours(1)).await;
    assert!(second.contains("0 matched, 1 missing"), "{second}");
    assert_eq!(
        app.count(
            "SELECT COUNT(*) FROM cases WHERE reason = 'missing_effect' \
                   AND CAST(details AS TEXT) LIKE '%re_edge_2%'"
        )
        .await,
        1
    );
    // The pairing survives a rebuild.
    let refs = "SELECT COALESCE(provider_ref, '') FROM effects ORDER BY effect_id";
    let live = rows(&app, refs).await;
    assert_eq!(live, ["re_edge_1"]);
    unicity::services::projections::rebuild(&app.db)
        .await
        .expect("rebuild");
    assert_eq!(rows(&app, refs).await, live);
}

/// Periodic runs compare each window once. A refund whose webhook came after
/// its window's run was found missing there; its effect lies in a later
/// window, where the provider no longer lists the refund. The open finding
/// is carried into the later run, whose pairing closes it: finance is not
/// left with "missing" for a refund already made (and a false "unexpected"
/// beside it, for the effect that answers it).
#[tokio::test]
async fn a_refund_found_missing_is_closed_by_its_late_webhook_in_a_later_window() {
    let now = Utc::now();
    let provider = Provider::start(
        &[("re_later", "pay_later", 700, now - Duration::minutes(50))],
        10,
    )
    .await;
    let downstream = Downstream::start(Behaviour::Apply { delay_ms: 0 }).await;
    let extra = format!("{}{}", downstream.sink_toml(2000), provider.lookup_toml());
    let app = spawn_app_with(&extra).await;
    // Given the window of the refund compared before its webhook came
    let edge = now - Duration::minutes(10);
    let first = reconcile_between(&app, &extra, edge - Duration::hours(1), edge).await;
    assert!(first.contains("1 missing, 0 unexpected"), "{first}");
    // When the webhook comes, and the next window is compared
    let late = app
        .post_signed("hmac", &refund("pay_later", 700, Some("rr_later")))
        .await;
    assert_eq!(late.json["decision"], "process", "{}", late.json);
    app.wait_applied(1).await;
    let second = reconcile_between(&app, &extra, edge, edge + Duration::hours(1)).await;
    // Then the refund's finding is closed by its effect, and the effect is
    // not unexpected: it stands for the refund, through a rebuild too
    assert!(
        second.contains("1 matched, 0 missing, 0 unexpected"),
        "{second}"
    );
    let cases = "SELECT reason || '|' || status || '|' || COALESCE(resolution, '') FROM cases";
    assert_eq!(
        rows(&app, cases).await,
        ["missing_effect|resolved|effect_found"]
    );
    // settled by reconciliation, as /metrics says
    let metrics = app.get_text("/metrics").await;
    let settled = metrics
        .lines()
        .filter(|line| line.starts_with("unicity_settled_cases{"))
        .find(|line| line.contains(r#"resolution="effect_found""#));
    assert!(
        settled.is_some_and(|line| line.contains(r#"by="reconciliation""#)),
        "{metrics}"
    );
    let refs = "SELECT COALESCE(provider_ref, '') FROM effects ORDER BY effect_id";
    assert_eq!(rows(&app, refs).await, ["re_later"]);
    unicity::services::projections::rebuild(&app.db)
        .await
        .expect("rebuild");
    assert_eq!(rows(&app, refs).await, ["re_later"]);
    assert_eq!(
        rows(&app, cases).await,
        ["missing_effect|resolved|effect_found"]
    );
}

/// A refund applied and paired by a first run with the provider's
/// operation, listed in that run's slack (two seconds) past its window's
/// edge; then, once the edge has passed, a second, equal refund applied in
/// the next window, where the operation is listed again and the first
/// refund is not.
struct Edge {
    app: TestApp,
    extra: String,
    state: std::sync::Arc<unicity::simulate::servers::ProviderState>,
    edge: chrono::DateTime<Utc>,
    second: crate::support::app::Reply,
}

impl Edge {
    async fn new(payment: &str) -> Self {
        use unicity::simulate::servers::ProviderState;
        let state = std::sync::Arc::new(ProviderState::with_page(10));
        let port = unicity::simulate::servers::provider("127.0.0.1:0", state.clone())
            .expect("provider binds");
        let downstream = Downstream::start(Behaviour::Apply { delay_ms: 0 }).await;
        let lookup = crate::support::provider::lookup_toml(&format!("http://127.0.0.1:{port}"));
        let extra = format!("{}{lookup}slack_secs = 2\n", downstream.sink_toml(2000));
        let app = spawn_app_with(&extra).await;
        let before = Utc::now();
        let refunded = |n: u8| refund(payment, 700, Some(&format!("rr_{payment}_{n}")));
        let first = app.post_signed("hmac", &refunded(1)).await;
        assert_eq!(first.json["decision"], "process", "{}", first.json);
        app.wait_applied(1).await;
        let edge = Utc::now() + Duration::seconds(2) + Duration::milliseconds(500);
        state.made_at(&format!("re_{payment}_1"), payment, 700, edge);
        let run = reconcile_between(&app, &extra, before - Duration::hours(1), edge).await;
        assert!(run.contains("1 matched, 0 missing, 0 unexpected"), "{run}");
        let wait = (edge - Utc::now() + Duration::milliseconds(100)).to_std();
        tokio::time::sleep(wait.unwrap_or_default()).await;
        let second = app.post_signed("hmac", &refunded(2)).await;
        assert_eq!(second.json["decision"], "process", "{}", second.json);
        app.wait_applied(2).await;
        Self {
            app,
            extra,
            state,
            edge,
            second,
        }
    }

    /// Reconciles the window after the edge; returns what it said.
    async fn next_window(&self) -> String {
        let (from, to) = (self.edge, self.edge + Duration::hours(1));
        reconcile_between(&self.app, &self.extra, from, to).await
    }
}

/// An effect paired by fields stands for the operation only if no other
/// effect does. Near a window's edge the operation is listed by two runs;
/// the second finds the effect the first paired with it, though it lies
/// before its window, and the later, equal refund answers nothing the
/// provider made: it is unexpected.
#[tokio::test]
async fn a_second_refund_for_an_operation_another_effect_stands_for_is_unexpected() {
    let edge = Edge::new("pay_twice").await;
    let next = edge.next_window().await;
    // One refund made, two applied
    assert!(
        next.contains("1 matched, 0 missing, 1 unexpected, 1 cases opened"),
        "{next}"
    );
    let effect = edge.second.json["effect_id"].as_str().expect("an effect");
    let unexpected = format!(
        "SELECT COUNT(*) FROM cases WHERE reason = 'unexpected_effect' \
         AND status = 'open' AND CAST(details AS TEXT) LIKE '%{effect}%'"
    );
    assert_eq!(edge.app.count(&unexpected).await, 1);
}

/// The same edge with a second refund the provider did make, in the next
/// window: each operation is answered by its own refund, the one at the
/// edge by the effect an earlier run paired with it, though that effect
/// lies before the window compared. Nothing is missing, nothing unexpected.
#[tokio::test]
async fn two_equal_refunds_either_side_of_an_edge_are_each_answered_by_their_own() {
    let edge = Edge::new("pay_edge2").await;
    edge.state
        .made_at("re_pay_edge2_2", "pay_edge2", 700, Utc::now());
    let next = edge.next_window().await;
    assert!(
        next.contains("2 matched, 0 missing, 0 unexpected, 0 cases opened"),
        "{next}"
    );
    let refs = "SELECT COALESCE(provider_ref, '') FROM effects ORDER BY provider_ref";
    assert_eq!(
        rows(&edge.app, refs).await,
        ["re_pay_edge2_1", "re_pay_edge2_2"]
    );
}

/// A refund found missing, its late webhook's effect still in flight when
/// the next window is compared: paired there, not yet applied, the finding
/// stays open. The window after finds the effect applied through the
/// operation it stands for, though it lies outside, and closes the finding.
#[tokio::test]
async fn a_finding_paired_with_an_effect_in_flight_closes_once_the_effect_is_applied() {
    let now = Utc::now();
    let provider = Provider::start(
        &[("re_slow", "pay_slow", 700, now - Duration::minutes(50))],
        10,
    )
    .await;
    let downstream = Downstream::start(Behaviour::Apply { delay_ms: 3000 }).await;
    let extra = format!("{}{}", downstream.sink_toml(5000), provider.lookup_toml());
    let app = spawn_app_with(&extra).await;
    let edge = now - Duration::minutes(10);
    let first = reconcile_between(&app, &extra, edge - Duration::hours(1), edge).await;
    assert!(first.contains("1 missing"), "{first}");
    let late = app
        .post_signed("hmac", &refund("pay_slow", 700, Some("rr_slow")))
        .await;
    assert_eq!(late.json["decision"], "process", "{}", late.json);
    let next = edge + Duration::hours(1);
    let second = reconcile_between(&app, &extra, edge, next).await;
    assert!(second.contains("1 matched, 0 missing"), "{second}");
    assert_eq!(app.applied_effects().await, 0, "compared while in flight");
    app.wait_applied(1).await;
    let third = reconcile_between(&app, &extra, next, next + Duration::hours(1)).await;
    assert!(third.contains("0 missing, 0 unexpected"), "{third}");
    let cases = "SELECT reason || '|' || status || '|' || COALESCE(resolution, '') FROM cases";
    assert_eq!(
        rows(&app, cases).await,
        ["missing_effect|resolved|effect_found"]
    );
}

/// A run of `provider`'s over `[from, to)` that ran at `ran_at`, failed
/// when `error` says why, written where runs are kept.
async fn a_run(
    db: &sea_orm::DatabaseConnection,
    (from, to, ran_at): (DateTime<Utc>, DateTime<Utc>, DateTime<Utc>),
    error: Option<&str>,
) {
    use sea_orm::{ActiveModelTrait, IntoActiveModel};
    unicity::store::entities::reconciliation_run::Model {
        run_id: uuid::Uuid::now_v7().to_string(),
        provider: "norefid".to_owned(),
        source: None,
        window_from: from,
        window_to: to,
        expected: 0,
        applied: 0,
        matched: 0,
        missing: 0,
        unexpected: 0,
        opened: 0,
        error: error.map(str::to_owned),
        ran_at,
    }
    .into_active_model()
    .reset_all()
    .insert(db)
    .await
    .expect("a run");
}

/// A fresh, migrated database.
async fn runs_database() -> (sea_orm::DatabaseConnection, Option<tempfile::TempDir>) {
    let (url, dir) = crate::support::app::fresh_database().await;
    let db = unicity::store::connect(&url).await.expect("database");
    unicity::store::migrate(&db).await.expect("migrations");
    (db, dir)
}

/// A run given a window that ends tomorrow ("reconcile today", by hand at
/// noon) compared nothing made after it ran: the reconciled time ends where
/// the runs stand, so an outage later that day is still compared.
#[tokio::test]
async fn a_run_over_a_window_ending_later_than_it_ran_covers_only_until_it_ran() {
    let (db, _dir) = runs_database().await;
    let now = Utc::now();
    // Given "today" reconciled by hand six hours ago, to midnight tonight,
    // and a periodic run four hours ago, then an outage
    let hours = Duration::hours;
    let today = (now - hours(12), now + hours(12), now - hours(6));
    a_run(&db, today, None).await;
    let periodic = (
        now - hours(5),
        now - hours(4),
        now - hours(4) + Duration::minutes(10),
    );
    a_run(&db, periodic, None).await;
    // Then the reconciled time ends where the periodic run's window did
    let covered = unicity::store::reconcile::covered_until(&db, "norefid")
        .await
        .expect("read")
        .expect("covered");
    assert_eq!(
        covered.timestamp(),
        (now - Duration::hours(4)).timestamp(),
        "{covered}"
    );
}

/// A month asked for by hand that failed, or a year the provider no longer
/// lists, holds the periodic run back only from when the reconciled time
/// began (its first run without error): the hours since, compared by the
/// periodic runs however many, are reconciled, and what a failure left
/// after it is compared again.
#[tokio::test]
async fn a_failed_run_by_hand_over_a_long_window_holds_back_only_what_lies_after_the_first_run() {
    let (db, _dir) = runs_database().await;
    let now = Utc::now();
    let hours = Duration::hours;
    let covered = |db| async move {
        unicity::store::reconcile::covered_until(db, "norefid")
            .await
            .expect("read")
            .map(|at| at.timestamp())
    };
    // Given a provider failing for thirty hours, no run ever without error
    let last = now - Duration::minutes(10);
    let down = (last - hours(30), last - hours(29), last - hours(29));
    a_run(&db, down, Some("unauthorized")).await;
    // Then it is compared from where it first failed
    assert_eq!(covered(&db).await, Some(down.0.timestamp()));
    // Given 220 hourly runs, the last ending ten minutes ago
    for n in (0..220).rev() {
        let to = last - hours(n);
        a_run(&db, (to - hours(1), to, to + Duration::minutes(10)), None).await;
    }
    // And a month, and a year long ago, asked for by hand, both failed
    a_run(
        &db,
        (now - Duration::days(30), now, now),
        Some("too many pages"),
    )
    .await;
    let year = (now - Duration::days(400), now - Duration::days(399), now);
    a_run(&db, year, Some("refused")).await;
    // Then the reconciled time ends where the last hourly run did
    assert_eq!(covered(&db).await, Some(last.timestamp()));
    // But a window no run compared holds it back, a later run by hand or not
    let minutes = Duration::minutes;
    let failed = (last, last + minutes(5), last + minutes(5));
    a_run(&db, failed, Some("provider unreachable")).await;
    a_run(&db, (last + minutes(5), now - minutes(1), now), None).await;
    assert_eq!(covered(&db).await, Some(last.timestamp()));
}
