//! The seed's case study end to end: a provider without event ids sends two
//! refunds of the same amount on the same payment; the weak key holds the
//! second; the provider's API is asked and settles it — a second operation
//! is applied with the provider's reference, a retry is confirmed as one.
//! Real HTTP on every side: Unicity, the provider's API, the downstream.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use actix_web::{App, HttpResponse, HttpServer, web};
use serde_json::{Value, json};

use crate::downstream::{Behaviour, Downstream};
use crate::helpers::{TestApp, refund, spawn_app_with};

/// A test server standing for the provider's API: it answers every refund
/// listing with `status` and `body` (after `outage` answers of 503), and
/// counts the questions.
struct ProviderApi {
    url: String,
    asked: Arc<AtomicUsize>,
}

impl ProviderApi {
    async fn start(status: u16, body: Value) -> Self {
        Self::start_after(0, status, body).await
    }

    async fn start_after(outage: usize, status: u16, body: Value) -> Self {
        let asked = Arc::new(AtomicUsize::new(0));
        let counted = asked.clone();
        let server = HttpServer::new(move || {
            let counted = counted.clone();
            let body = body.clone();
            App::new().route(
                "/payments/{payment}/refunds",
                web::get().to(move || {
                    let n = counted.fetch_add(1, Ordering::SeqCst);
                    let body = body.clone();
                    let status = if n < outage { 503 } else { status };
                    async move {
                        HttpResponse::build(
                            actix_web::http::StatusCode::from_u16(status).expect("status"),
                        )
                        .json(body)
                    }
                }),
            )
        })
        .workers(1)
        .bind("127.0.0.1:0")
        .expect("provider binds");
        let port = server.addrs()[0].port();
        tokio::spawn(server.run());
        Self {
            url: format!("http://127.0.0.1:{port}"),
            asked,
        }
    }

    fn config(&self) -> String {
        format!(
            r#"
[[lookups]]
provider = "norefid"
effect_type = "refund.*"
url = "{}/payments/{{payment_id}}/refunds"
operations = "$.refunds[*]"
id = "$.id"
amount = "$.amount"
currency = "$.currency"
status = "$.status"
timeout_ms = 2000
"#,
            self.url
        )
    }
}

fn refunds(ids: &[&str]) -> Value {
    json!({ "refunds": ids.iter().map(|id| json!({
        "id": id, "amount": 700, "currency": "EUR", "status": "succeeded"
    })).collect::<Vec<_>>() })
}

async fn start(provider: &ProviderApi) -> (TestApp, Downstream) {
    let downstream = Downstream::start(Behaviour::Apply { delay_ms: 0 }).await;
    let app = spawn_app_with(&format!(
        "{}{}",
        downstream.sink_toml(2000),
        provider.config()
    ))
    .await;
    (app, downstream)
}

/// The first refund applied, then its look-alike held in a case.
async fn two_equal_refunds(app: &TestApp) -> String {
    let first = app.post_signed("hmac", &refund("pay_l", 700, None)).await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    app.wait_for_count("SELECT COUNT(*) FROM effects WHERE status = 'applied'", 1)
        .await;
    let second = app.post_signed("hmac", &refund("pay_l", 700, None)).await;
    assert_eq!(
        second.json["reason"], "weak_match_critical",
        "{}",
        second.json
    );
    second.json["case_id"].as_str().expect("a case").to_owned()
}

async fn case_field(app: &TestApp, case_id: &str, column: &str) -> String {
    app.wait_for_count(
        "SELECT COUNT(*) FROM journal WHERE event_type = 'LookupPerformed'",
        1,
    )
    .await;
    let shown = app.get(&format!("/api/cases/{case_id}")).await;
    shown.json[column].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn two_legitimate_equal_refunds_are_both_applied_the_second_with_the_providers_reference() {
    let provider = ProviderApi::start(200, refunds(&["re_1", "re_2"])).await;
    let (app, downstream) = start(&provider).await;
    let case_id = two_equal_refunds(&app).await;
    downstream.wait_calls(2).await;
    app.wait_for_count(
        &format!("SELECT COUNT(*) FROM cases WHERE case_id = '{case_id}' AND status = 'resolved'"),
        1,
    )
    .await;
    assert_eq!(
        case_field(&app, &case_id, "resolution").await,
        "process_as_distinct"
    );
    assert_eq!(case_field(&app, &case_id, "resolved_by").await, "look-up");
    assert_eq!(
        app.count(
            "SELECT COUNT(*) FROM journal WHERE event_type = 'CaseResolved' AND CAST(data AS TEXT) LIKE '%re_2%'"
        )
        .await,
        1,
        "the provider's reference is in the proof"
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(downstream.calls().len(), 2, "one refund per real operation");
    assert_eq!(provider.asked.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_retry_of_one_refund_is_confirmed_as_a_duplicate_by_the_provider() {
    let provider = ProviderApi::start(200, refunds(&["re_1"])).await;
    let (app, downstream) = start(&provider).await;
    let case_id = two_equal_refunds(&app).await;
    app.wait_for_count(
        &format!("SELECT COUNT(*) FROM cases WHERE case_id = '{case_id}' AND status = 'resolved'"),
        1,
    )
    .await;
    assert_eq!(
        case_field(&app, &case_id, "resolution").await,
        "confirm_duplicate"
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(downstream.calls().len(), 1, "no second refund");
}

#[tokio::test]
async fn a_provider_outage_leaves_the_case_for_a_person_and_applies_nothing() {
    let provider = ProviderApi::start(503, json!({"error": "down"})).await;
    let (app, downstream) = start(&provider).await;
    let case_id = two_equal_refunds(&app).await;
    assert_eq!(case_field(&app, &case_id, "status").await, "open");
    assert_eq!(
        app.count("SELECT COUNT(*) FROM journal WHERE event_type = 'LookupPerformed' AND CAST(data AS TEXT) LIKE '%for_a_person%'")
            .await,
        1
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(downstream.calls().len(), 1);
    // Asked again on demand: still down, still open, journaled again.
    let again = app
        .client
        .post(format!("{}/api/cases/{case_id}/lookup", app.address))
        .send()
        .await
        .expect("request sent");
    assert_eq!(again.status().as_u16(), 200);
    let body: Value = again.json().await.unwrap();
    assert_eq!(body["verdict"], "for_a_person");
    assert_eq!(provider.asked.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn after_a_provider_outage_the_look_up_is_retried_with_backoff_and_settles_the_case() {
    let provider = ProviderApi::start_after(2, 200, refunds(&["re_1", "re_2"])).await;
    let downstream = Downstream::start(Behaviour::Apply { delay_ms: 0 }).await;
    let extra = format!(
        "[engine]\nlookup_retry_secs = 1\nsweep_interval_ms = 100\n\n{}{}",
        downstream.sink_toml(2000),
        provider.config()
    );
    let app = spawn_app_with(&extra).await;
    let case_id = two_equal_refunds(&app).await;
    app.wait_for_count(
        &format!("SELECT COUNT(*) FROM cases WHERE case_id = '{case_id}' AND status = 'resolved'"),
        1,
    )
    .await;
    downstream.wait_calls(2).await;
    assert_eq!(
        app.count("SELECT COUNT(*) FROM journal WHERE event_type = 'LookupPerformed'")
            .await,
        3,
        "two failed questions, then the answer"
    );
    let shown = app.get(&format!("/api/cases/{case_id}")).await;
    assert_eq!(shown.json["resolved_by"], "look-up");
    assert_eq!(provider.asked.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_provider_that_keeps_failing_is_not_asked_while_its_circuit_breaker_is_open() {
    let provider = ProviderApi::start(503, json!({"error": "down"})).await;
    let downstream = Downstream::start(Behaviour::Apply { delay_ms: 0 }).await;
    let extra = format!(
        "[engine]\nlookup_retry_secs = 1\nlookup_breaker_failures = 2\nlookup_breaker_secs = 60\nsweep_interval_ms = 100\n\n{}{}",
        downstream.sink_toml(2000),
        provider.config()
    );
    let app = spawn_app_with(&extra).await;
    let case_id = two_equal_refunds(&app).await;
    // Two failed questions open the breaker; the next due retry is journaled
    // without asking.
    app.wait_for_count(
        "SELECT COUNT(*) FROM journal WHERE event_type = 'LookupPerformed'",
        3,
    )
    .await;
    assert_eq!(provider.asked.load(Ordering::SeqCst), 2);
    assert_eq!(
        app.count(
            "SELECT COUNT(*) FROM journal WHERE event_type = 'LookupPerformed' \
             AND CAST(data AS TEXT) LIKE '%circuit breaker is open%'"
        )
        .await,
        1
    );
    let shown = app.get(&format!("/api/cases/{case_id}")).await;
    assert_eq!(shown.json["status"], "open");
    assert_eq!(downstream.calls().len(), 1);
}
