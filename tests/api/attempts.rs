//! A delivery's downstream attempts: every call made to the service that
//! applies its effect is journaled with when it was sent, how long it took
//! and the HTTP status it answered, and the support page lists them as a
//! table, each row linking to its journal row.

use reqwest::StatusCode;
use serde_json::Value;
use unicity::auth::Role;

use crate::support::app::{TestApp, id_of, refund, spawn_app, spawn_app_with};
use crate::support::chromium::Browser;
use crate::support::counts::Counts;
use crate::support::downstream::{Behaviour, Downstream};
use crate::support::forms::{FormClient, PASSWORD, operator};

async fn attempts(app: &TestApp, id: &str) -> Vec<Value> {
    let shown = app.delivery(id).await.json;
    shown["attempts"]
        .as_array()
        .unwrap_or_else(|| panic!("attempts listed: {shown}"))
        .clone()
}

async fn support_page(app: &TestApp, id: &str) -> String {
    operator(app, "sam", Role::Support).await;
    let mut browser = FormClient::new(app);
    let login = browser.login("sam", PASSWORD).await;
    assert_eq!(login.status, StatusCode::SEE_OTHER, "{}", login.body);
    let page = browser.get(&format!("/deliveries/{id}")).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    page.body
}

/// The attempts table of a support page, from its opening tag to its end.
fn table(html: &str) -> &str {
    let start = html
        .find(r#"<table class="attempts">"#)
        .unwrap_or_else(|| panic!("an attempts table: {html}"));
    let rest = &html[start..];
    &rest[..rest.find("</table>").expect("its end")]
}

#[tokio::test]
async fn a_refused_effect_and_its_retry_are_two_calls_with_their_status_and_latency() {
    let downstream = Downstream::start(Behaviour::Refuse(422)).await;
    let app = spawn_app_with(&downstream.sink_toml(2000)).await;
    let body = refund("pay_att", 300, Some("rr_att"));
    let first = id_of(&app.post_signed("hmac", &body).await);
    app.wait_effects_in("failed", 1).await;
    // The retry takes the same effect again, with the next fencing token.
    app.post_signed("hmac", &body).await;
    downstream.wait_calls(2).await;
    app.wait_journal("EffectFailed", 2).await;

    let calls = attempts(&app, &first).await;
    assert_eq!(
        calls.len(),
        1,
        "the first delivery made one call: {calls:?}"
    );
    let call = &calls[0];
    assert_eq!(call["call"], "effect");
    assert_eq!(call["outcome"], "failed");
    assert_eq!(call["status"], 422);
    assert_eq!(call["answer"], "downstream_rejected");
    assert!(call["latency_ms"].is_u64(), "{call}");
    assert!(call["position"].is_i64(), "{call}");

    let html = support_page(&app, &first).await;
    let rows = table(&html);
    assert!(rows.contains("422"), "{rows}");
    assert!(rows.contains("downstream_rejected"), "{rows}");
    assert!(rows.contains(" ms</td>"), "{rows}");
    // Each row leads to the journal row it is read from.
    let position = call["position"].as_i64().unwrap();
    assert!(
        rows.contains(&format!(r##"href="#row-{position}""##)),
        "{rows}"
    );
    assert!(
        html.contains(&format!(r#"id="row-{position}""#)),
        "the row exists"
    );
}

#[tokio::test]
async fn an_applied_effect_shows_the_time_the_downstream_took_and_its_reference() {
    let downstream = Downstream::start(Behaviour::Apply { delay_ms: 250 }).await;
    let app = spawn_app_with(&downstream.sink_toml(5000)).await;
    let id = id_of(
        &app.post_signed("hmac", &refund("pay_slow", 900, Some("rr_slow")))
            .await,
    );
    app.wait_applied(1).await;

    let calls = attempts(&app, &id).await;
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0]["outcome"], "applied");
    assert_eq!(calls[0]["status"], 201);
    assert_eq!(calls[0]["answer"], "rf_1", "the downstream's own id");
    let latency = calls[0]["latency_ms"].as_u64().expect("a latency");
    assert!(
        latency >= 250,
        "the downstream answered after 250 ms: {latency}"
    );

    let html = support_page(&app, &id).await;
    assert!(table(&html).contains("rf_1"));

    // Laid out in a real browser, the table fits a window 1,024 px wide.
    operator(&app, "ada", Role::Admin).await;
    let Some(browser) = Browser::open(&app.address, "downstream_attempts").await else {
        return;
    };
    browser.sign_in("ada", PASSWORD).await;
    browser.width(1024).await;
    browser.visit(&format!("/deliveries/{id}#attempts")).await;
    browser.screenshot("delivery-attempts").await;
    let rows = browser.find_all("table.attempts tbody tr").await;
    assert_eq!(rows.len(), 1);
    assert_eq!(browser.overflow().await, 0, "no sideways scrolling");
    browser.close().await;
}

#[tokio::test]
async fn an_effect_applied_by_the_ledger_itself_made_no_call() {
    let app = spawn_app().await;
    let id = id_of(&app.post_signed("hmac", &refund("pay_rec", 100, None)).await);
    assert_eq!(app.applied_effects().await, 1);
    assert!(attempts(&app, &id).await.is_empty());
    let html = support_page(&app, &id).await;
    assert!(
        html.contains("No call was made to a downstream service for this delivery."),
        "{html}"
    );
    assert!(!html.contains(r#"<table class="attempts">"#));
}

/// One server per status, each in a test of its own: three servers alive in
/// one test, with their writers and background tasks, once starved the last
/// one's start-up of its database pool on a loaded machine.
async fn a_redirect_is_never_followed_and_its_outcome_is_unknown(status: u16) {
    let downstream = Downstream::start(Behaviour::Redirect(status)).await;
    let app = spawn_app_with(&downstream.sink_toml(2000)).await;
    let id = id_of(
        &app.post_signed("hmac", &refund("pay_moved", 100, Some("rr_moved")))
            .await,
    );
    app.wait_effects_in("unknown", 1).await;
    // Followed, a 301 would have become a GET whose 200 read as applied.
    assert_eq!(app.applied_effects().await, 0, "{status}");
    assert_eq!(
        downstream.calls().len(),
        1,
        "{status}: {:?}",
        downstream.calls()
    );
    let calls = attempts(&app, &id).await;
    assert_eq!(calls[0]["outcome"], "unknown", "{status}");
    assert_eq!(calls[0]["status"], status);
    assert_eq!(calls[0]["answer"], "downstream_redirected");
    // Nobody can say whether the effect happened: a case asks.
    assert_eq!(app.cases_with("outcome_unknown").await, 1);
}

#[tokio::test]
async fn a_301_from_the_downstream_is_never_followed_and_its_outcome_is_unknown() {
    a_redirect_is_never_followed_and_its_outcome_is_unknown(301).await;
}

#[tokio::test]
async fn a_303_from_the_downstream_is_never_followed_and_its_outcome_is_unknown() {
    a_redirect_is_never_followed_and_its_outcome_is_unknown(303).await;
}

#[tokio::test]
async fn a_307_from_the_downstream_is_never_followed_and_its_outcome_is_unknown() {
    a_redirect_is_never_followed_and_its_outcome_is_unknown(307).await;
}

/// A downstream that answers 200 with an error in its body applied
/// nothing: with `answer_path`, that answer is read as the status question's
/// is — failed when it says so (safe to send again), unknown when it says
/// nothing known (a case asks), applied only when it says applied.
#[tokio::test]
async fn a_2xx_whose_body_says_the_effect_failed_is_not_taken_as_applied() {
    const FAILED: &str = r#"{"status":"failed","error":"insufficient funds"}"#;
    let trusted = "answer_failed = [\"failed\"]\n";
    let said = [
        (FAILED, trusted, "failed", "downstream_answered_failed"),
        // A "failed" nobody listed as safe to send again: a case asks.
        (FAILED, "", "unknown", "downstream_answer_unclear"),
        (
            r#"{"error":"try later"}"#,
            trusted,
            "unknown",
            "downstream_answer_unclear",
        ),
        ("not json", trusted, "unknown", "downstream_answer_unclear"),
    ];
    for (n, (body, lists, outcome, answer)) in said.into_iter().enumerate() {
        let downstream = Downstream::start(Behaviour::AnswerWithoutApplying(body)).await;
        let app = spawn_app_with(&format!(
            "{}answer_path = \"$.status\"\n{lists}",
            downstream.sink_toml(2000)
        ))
        .await;
        let payment = format!("pay_said_{n}");
        let id = id_of(
            &app.post_signed("hmac", &refund(&payment, 100, Some("rr_said")))
                .await,
        );
        app.wait_effects_in(outcome, 1).await;
        assert_eq!(app.applied_effects().await, 0, "{body}");
        let calls = attempts(&app, &id).await;
        assert_eq!(calls[0]["outcome"], outcome, "{body}");
        assert_eq!(calls[0]["status"], 200, "{body}");
        assert_eq!(calls[0]["answer"], answer, "{body}");
        if body == FAILED {
            // What the downstream said is kept with the effect.
            assert_eq!(
                app.count(
                    "SELECT COUNT(*) FROM effects WHERE CAST(result AS TEXT) LIKE '%insufficient funds%'"
                )
                .await,
                1,
                "{body}"
            );
        }
    }
    // What says applied is applied
    let downstream = Downstream::start(Behaviour::ApplyAnswering(r#"{"status":"applied"}"#)).await;
    let app = spawn_app_with(&format!(
        "{}answer_path = \"$.status\"\n",
        downstream.sink_toml(2000)
    ))
    .await;
    app.post_signed("hmac", &refund("pay_said_ok", 100, Some("rr_said")))
        .await;
    app.wait_applied(1).await;
}
