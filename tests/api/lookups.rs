//! The seed's case study end to end: a provider without event ids sends two
//! refunds of the same amount on the same payment; the weak key holds the
//! second; the provider's API is asked and settles it — a second operation
//! is applied with the provider's reference, a retry is confirmed as one.
//! Real HTTP on every side: Unicity, the provider's API, the downstream.

use std::sync::atomic::Ordering;

use serde_json::{Value, json};

use crate::support::app::{TestApp, fresh_database, refund, spawn_app_with, spawn_on};
use crate::support::counts::Counts;
use crate::support::downstream::{Behaviour, Downstream};
use crate::support::forms::{csrf_in, signed_in};
use crate::support::provider::{Provider, ProviderApi};

/// The provider's refunds of 700 EUR on `pay_l`, one per id.
pub fn refunds(ids: &[&str]) -> Value {
    refunds_of(&ids.iter().map(|id| (*id, "pay_l", 700)).collect::<Vec<_>>())
}

/// The provider's refunds, each `(id, payment, amount)` in EUR.
pub fn refunds_of(refunds: &[(&str, &str, u64)]) -> Value {
    json!({ "refunds": refunds.iter().map(|(id, payment, amount)| json!({
        "id": id, "payment_id": payment, "amount": amount, "currency": "EUR", "status": "succeeded"
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

/// A server whose downstream takes `delay_ms` to apply each effect.
async fn start_slow(provider: &ProviderApi, delay_ms: u64) -> (TestApp, Downstream) {
    let downstream = Downstream::start(Behaviour::Apply { delay_ms }).await;
    let app = spawn_app_with(&format!(
        "{}{}",
        downstream.sink_toml(5000),
        provider.config()
    ))
    .await;
    (app, downstream)
}

/// The first refund applied, then its look-alike held in a case.
pub async fn two_equal_refunds(app: &TestApp) -> String {
    let first = app.post_signed("hmac", &refund("pay_l", 700, None)).await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    app.wait_applied(1).await;
    let second = app.post_signed("hmac", &refund("pay_l", 700, None)).await;
    assert_eq!(
        second.json["reason"], "weak_match_critical",
        "{}",
        second.json
    );
    // A look-up is configured: the decision says the provider is asked first.
    let summary = second.json["summary"].as_str().unwrap_or_default();
    assert!(
        summary.contains("ask the provider's API first"),
        "{summary}"
    );
    second.json["case_id"].as_str().expect("a case").to_owned()
}

async fn case_field(app: &TestApp, case_id: &str, column: &str) -> String {
    app.wait_journal("LookupPerformed", 1).await;
    let shown = app.get(&format!("/api/cases/{case_id}")).await;
    shown.json[column].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn two_legitimate_equal_refunds_are_both_applied_the_second_with_the_providers_reference() {
    let provider = ProviderApi::start(200, refunds(&["re_1", "re_2"])).await;
    let (app, downstream) = start(&provider).await;
    let case_id = two_equal_refunds(&app).await;
    downstream.wait_calls(2).await;
    app.wait_case_resolved(&case_id).await;
    assert_eq!(
        case_field(&app, &case_id, "resolution").await,
        "process_as_distinct"
    );
    assert_eq!(case_field(&app, &case_id, "resolved_by").await, "look-up");
    assert_eq!(
        app.journal_count_containing("CaseResolved", "re_2").await,
        1,
        "the provider's reference is in the proof"
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(downstream.calls().len(), 2, "one refund per real operation");
    assert_eq!(provider.asked.load(Ordering::SeqCst), 1);
}

/// The second of two equal refunds was applied as distinct for the
/// provider's `re_2`, and the downstream refused it: `re_2` was never
/// refunded. A third look-alike may be `re_2` sent again: the provider's two
/// operations against one refund made say nothing of which it is, so a
/// person decides — it is never confirmed as a duplicate.
#[tokio::test]
async fn a_look_alike_of_a_refund_whose_distinct_call_failed_is_left_to_a_person() {
    let provider = ProviderApi::start(200, refunds(&["re_1", "re_2"])).await;
    let downstream = Downstream::start(Behaviour::ApplyOnceThenRefuse {
        status: 422,
        delay_ms: 0,
    })
    .await;
    let app = spawn_app_with(&format!(
        "{}{}",
        downstream.sink_toml(2000),
        provider.config()
    ))
    .await;
    let case_id = two_equal_refunds(&app).await;
    app.wait_case_resolved(&case_id).await;
    downstream.wait_calls(2).await;
    app.wait_journal("EffectFailed", 1).await;
    // When a third look-alike comes
    let third = app.post_signed("hmac", &refund("pay_l", 700, None)).await;
    assert_eq!(
        third.json["reason"], "weak_match_critical",
        "{}",
        third.json
    );
    let third_case = third.json["case_id"].as_str().expect("a case");
    app.wait_journal("LookupPerformed", 2).await;
    // Then it stays for a person, saying why
    let shown = app.get(&format!("/api/cases/{third_case}")).await.json;
    assert_eq!(shown["status"], "open", "{shown}");
    assert_eq!(
        app.journal_count_containing("LookupPerformed", "re_2%failed")
            .await,
        1,
        "{shown}"
    );
    assert_eq!(downstream.applied().len(), 1);
}

#[tokio::test]
async fn a_retry_of_one_refund_is_confirmed_as_a_duplicate_by_the_provider() {
    let provider = ProviderApi::start(200, refunds(&["re_1"])).await;
    let (app, downstream) = start(&provider).await;
    let case_id = two_equal_refunds(&app).await;
    app.wait_case_resolved(&case_id).await;
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
        app.journal_count_containing("LookupPerformed", "for_a_person")
            .await,
        1
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(downstream.calls().len(), 1);
    // Asked again on demand: still down, still open, journaled again.
    let again = app.look_up(&case_id).await;
    assert_eq!(again.status, 200);
    let body = again.json;
    assert_eq!(body["verdict"], "for_a_person");
    assert_eq!(provider.asked.load(Ordering::SeqCst), 2);
    // On the case page, finance finds "Ask the provider" above the
    // resolution, and the two unanswered questions as one history line
    let mut fin = signed_in(&app, "fin", unicity::auth::Role::Finance).await;
    let page = fin.get(&format!("/cases/{case_id}")).await.body;
    let ask = page
        .find(&format!(r#"action="/cases/{case_id}/lookup""#))
        .expect("the ask form");
    let resolve = page
        .find(&format!(r#"action="/cases/{case_id}/resolve""#))
        .expect("the resolution form");
    assert!(ask < resolve, "asking comes before deciding by hand");
    assert!(page.contains("Provider look-up ×2"), "{page}");
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
    app.wait_case_resolved(&case_id).await;
    downstream.wait_calls(2).await;
    assert_eq!(
        app.journal_count("LookupPerformed").await,
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
    app.wait_journal("LookupPerformed", 3).await;
    assert_eq!(provider.asked.load(Ordering::SeqCst), 2);
    assert_eq!(
        app.journal_count_containing("LookupPerformed", "circuit breaker is open")
            .await,
        1
    );
    let shown = app.get(&format!("/api/cases/{case_id}")).await;
    assert_eq!(shown.json["status"], "open");
    assert_eq!(downstream.calls().len(), 1);

    // Asked on demand while the breaker is open, the answer says nobody
    // was asked, through the API and on the case's page.
    let body = app.look_up(&case_id).await.json;
    assert_eq!(body["asked"], false, "{body}");
    assert_eq!(body["verdict"], "for_a_person", "{body}");
    let mut finance = signed_in(&app, "fin", unicity::auth::Role::Finance).await;
    let path = format!("/cases/{case_id}");
    let page = finance.get(&path).await;
    let asked = finance
        .post(
            &format!("{path}/lookup"),
            &[("csrf", csrf_in(&page.body).as_str())],
        )
        .await;
    assert_eq!(asked.location, format!("{path}?done=not_asked_breaker"));
    let shown = finance.get(&asked.location).await;
    assert!(
        shown.body.contains("The provider was not asked"),
        "{}",
        shown.body
    );
    assert!(!shown.body.contains("The provider was asked"));
    assert_eq!(provider.asked.load(Ordering::SeqCst), 2, "still not asked");
}

#[tokio::test]
async fn a_burst_of_retries_settles_no_more_refunds_than_the_provider_made() {
    // Given a provider listing two 700 EUR refunds on pay_b, and its webhook
    // processed once
    let provider = ProviderApi::start(
        200,
        refunds_of(&[("re_1", "pay_b", 700), ("re_2", "pay_b", 700)]),
    )
    .await;
    let (app, downstream) = start(&provider).await;
    let body = refund("pay_b", 700, None);
    let first = app.post_signed("hmac", &body).await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    // Settled, not only sent: a retry before then is deferred.
    app.wait_applied(1).await;
    // When the same bytes arrive three times at once
    let (a, b, c) = tokio::join!(
        app.post_signed("hmac", &body),
        app.post_signed("hmac", &body),
        app.post_signed("hmac", &body)
    );
    for reply in [&a, &b, &c] {
        assert_eq!(
            reply.json["reason"], "weak_match_critical",
            "{}",
            reply.json
        );
    }
    // Then the three look-ups settle every case, and one refund is added:
    // as many effects as the provider lists operations
    app.wait_resolved_cases(3).await;
    downstream.wait_calls(2).await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(downstream.calls().len(), 2, "refunds applied downstream");
    assert_eq!(app.live_effects().await, 2, "effects = provider operations");
    assert_eq!(app.cases_resolved_as("process_as_distinct").await, 1);
    assert_eq!(app.cases_resolved_as("confirm_duplicate").await, 2);
    // And the effect applied for the second refund names it in the ledger,
    // beside the downstream's own id
    assert_eq!(
        app.effects_for_operation_with_downstream_ref("re_2").await,
        1
    );
}

#[tokio::test]
async fn a_retry_while_the_distinct_refund_is_in_flight_is_a_duplicate() {
    // Given a slow downstream (1.5 s) and a provider listing two refunds
    let provider = ProviderApi::start(200, refunds(&["re_1", "re_2"])).await;
    let (app, downstream) = start_slow(&provider, 1500).await;
    let first = app.post_signed("hmac", &refund("pay_l", 700, None)).await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    app.wait_applied(1).await;
    // When the second refund's case is settled as distinct by its look-up
    let second = refund("pay_l", 700, None);
    let held = app.post_signed("hmac", &second).await;
    assert_eq!(held.json["reason"], "weak_match_critical", "{}", held.json);
    app.wait_resolved_cases(1).await;
    // and its webhook is retried while that refund is still being applied
    assert_eq!(
        app.effects_in("reserved").await,
        1,
        "the distinct refund is in flight"
    );
    let retry = app.post_signed("hmac", &second).await;
    assert_eq!(
        retry.json["reason"], "weak_match_critical",
        "{}",
        retry.json
    );
    // Then the retry's look-up counts the pending refund: a duplicate
    app.wait_resolved_cases(2).await;
    downstream.wait_calls(2).await;
    tokio::time::sleep(std::time::Duration::from_millis(2000)).await;
    assert_eq!(downstream.calls().len(), 2, "refunds applied downstream");
    assert_eq!(app.live_effects().await, 2);
    let retry_case = retry.json["case_id"].as_str().unwrap();
    let shown = app.get(&format!("/api/cases/{retry_case}")).await;
    assert_eq!(
        shown.json["resolution"], "confirm_duplicate",
        "{}",
        shown.json
    );
}

/// A weak strategy whose discriminants are named as a team named them.
const CUSTOM_NAMES: &str = r#"
[[strategies]]
name = "custom-refund"
version = 1
provider = "norefid"
event_types = ["refund.*"]
kind = "canonical_fingerprint"
strength = "weak"
horizon = "90d"
effect_type = "refund.create"
criticality = "critical"
scope = [{ name = "resource_type", value = "payment" }]
discriminants = [
  { name = "pay", path = "$.payment_id" },
  { name = "value", path = "$.amount" },
  { name = "ccy", path = "$.currency" },
]

[strategies.normalize]
volatile = [{ path = "$.sent_at", reason = "time of the send attempt" }]

[[hierarchies]]
provider = "norefid"
event_type = "refund.*"
strategies = ["custom-refund"]
"#;

/// A 700 and a 900 refund on pay_c, both applied, then the 700 retried.
async fn retried_700(compare: &str) -> (TestApp, Downstream, ProviderApi, String) {
    let provider = ProviderApi::start(
        200,
        refunds_of(&[("re_700", "pay_c", 700), ("re_900", "pay_c", 900)]),
    )
    .await;
    let downstream = Downstream::start(Behaviour::Apply { delay_ms: 0 }).await;
    let app = spawn_app_with(&format!(
        "{CUSTOM_NAMES}{}{}",
        downstream.sink_toml(2000),
        provider.config_with("/payments/{payment_id}/refunds", compare)
    ))
    .await;
    let seven = refund("pay_c", 700, None);
    assert_eq!(
        app.post_signed("hmac", &seven).await.json["decision"],
        "process"
    );
    let nine = refund("pay_c", 900, None);
    assert_eq!(
        app.post_signed("hmac", &nine).await.json["decision"],
        "process"
    );
    // Settled, not only sent: a retry before then is deferred.
    app.wait_applied(2).await;
    let retry = app.post_signed("hmac", &seven).await;
    assert_eq!(
        retry.json["reason"], "weak_match_critical",
        "{}",
        retry.json
    );
    let case_id = retry.json["case_id"].as_str().unwrap().to_owned();
    (app, downstream, provider, case_id)
}

#[tokio::test]
async fn a_look_up_compares_discriminants_by_the_names_the_configuration_maps() {
    // Given discriminants pay, value and ccy mapped to the operation's fields
    let (app, downstream, _provider, case_id) =
        retried_700("pay = \"resource\"\nvalue = \"amount\"\nccy = \"currency\"\n").await;
    // Then the retried 700 is a duplicate of the 700, not a second refund
    // justified by the 900
    app.wait_case_resolved(&case_id).await;
    assert_eq!(
        case_field(&app, &case_id, "resolution").await,
        "confirm_duplicate"
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(downstream.calls().len(), 2, "no third refund");
}

#[tokio::test]
async fn a_discriminant_the_look_up_cannot_compare_leaves_the_case_for_a_person() {
    // Given a look-up that maps value and pay but says nothing of ccy
    let (app, downstream, provider, case_id) =
        retried_700("pay = \"resource\"\nvalue = \"amount\"\n").await;
    app.wait_journal("LookupPerformed", 1).await;
    // Then the provider was asked, but the case stays open, saying why
    assert_eq!(provider.asked.load(Ordering::SeqCst), 1);
    assert_eq!(case_field(&app, &case_id, "status").await, "open");
    assert_eq!(
        app.count(
            "SELECT COUNT(*) FROM journal WHERE event_type = 'LookupPerformed' \
             AND CAST(data AS TEXT) LIKE '%for_a_person%' AND CAST(data AS TEXT) LIKE '%`ccy`%'"
        )
        .await,
        1
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(downstream.calls().len(), 2);
}

#[tokio::test]
async fn a_received_value_never_moves_the_look_up_to_another_url() {
    // Given a provider whose /refunds lists every payment's refunds
    let provider = ProviderApi::start(
        200,
        refunds_of(&[("re_a", "pay_a", 700), ("re_b", "pay_z", 700)]),
    )
    .await;
    let (app, downstream) = start(&provider).await;
    for (n, hostile) in ["..", ".", "%2e%2e", "a/../..", "x?y=1", "x#y", "x\ny"]
        .iter()
        .enumerate()
    {
        // When a refund whose payment id is hostile is processed, then retried
        let body = refund(hostile, 700, None);
        assert_eq!(
            app.post_signed("hmac", &body).await.json["decision"],
            "process"
        );
        app.wait_applied((n + 1) as i64).await;
        let retry = app.post_signed("hmac", &body).await;
        assert_eq!(
            retry.json["reason"], "weak_match_critical",
            "{}",
            retry.json
        );
        app.wait_journal("LookupPerformed", (n + 1) as i64).await;
    }
    // Then no question left the payment's own refunds URL
    for path in provider.paths.lock().unwrap().iter() {
        assert!(
            path.starts_with("/payments/")
                && path.ends_with("/refunds")
                && path.matches('/').count() == 3,
            "asked {path}"
        );
    }
    // and nothing was settled on another payment's refunds
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(downstream.calls().len(), 7, "one refund per first delivery");
    assert_eq!(app.open_cases().await, 7);
}

#[tokio::test]
async fn an_answer_about_another_payment_is_not_taken_for_this_one() {
    // Given a look-up URL the provider answers with every payment's refunds
    let provider = ProviderApi::start(
        200,
        refunds_of(&[("re_1", "pay_r", 700), ("re_9", "pay_other", 700)]),
    )
    .await;
    let downstream = Downstream::start(Behaviour::Apply { delay_ms: 0 }).await;
    let app = spawn_app_with(&format!(
        "{}{}",
        downstream.sink_toml(2000),
        provider.config_with(
            "/refunds?payment={payment_id}",
            "payment = \"resource\"\namount = \"amount\"\ncurrency = \"currency\"\n"
        )
    ))
    .await;
    let body = refund("pay_r", 700, None);
    assert_eq!(
        app.post_signed("hmac", &body).await.json["decision"],
        "process"
    );
    // Settled, not only sent: a retry before then is deferred.
    app.wait_applied(1).await;
    // When its webhook is retried
    let retry = app.post_signed("hmac", &body).await;
    let case_id = retry.json["case_id"].as_str().unwrap().to_owned();
    app.wait_case_resolved(&case_id).await;
    // Then only pay_r's refund counts: a duplicate, not a second refund
    assert_eq!(
        case_field(&app, &case_id, "resolution").await,
        "confirm_duplicate"
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(downstream.calls().len(), 1);
}

/// A look-alike that arrives while the first refund is still being applied
/// waits (deferred), then is decided again once it settles: the case that
/// re-decision opens is put to the provider at once, as it would have been
/// had the look-alike arrived a second later.
#[tokio::test]
async fn a_case_opened_when_a_deferred_delivery_is_decided_again_is_asked_about_at_once() {
    // Given a slow downstream and a provider listing two refunds
    let provider = ProviderApi::start(200, refunds(&["re_1", "re_2"])).await;
    let (app, downstream) = start_slow(&provider, 1000).await;
    let first = app.post_signed("hmac", &refund("pay_l", 700, None)).await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    // When its look-alike arrives while it is in flight
    let second = app.post_signed("hmac", &refund("pay_l", 700, None)).await;
    assert_eq!(second.json["decision"], "defer", "{}", second.json);
    // Then once the first settles, the look-alike's case is asked about and
    // settled by the provider's answer: a second refund
    app.wait_resolved_cases(1).await;
    downstream.wait_calls(2).await;
    assert_eq!(provider.asked.load(Ordering::SeqCst), 1);
    assert_eq!(app.cases_resolved_as("process_as_distinct").await, 1);
}

/// A refund, then its retry while the refund is in flight: deferred, then
/// decided again once the refund settles, and held in a case for `reason`.
/// Returns the retry's delivery id.
async fn retry_held_once_decided_again(app: &TestApp, payment: &str, reason: &str) -> String {
    let body = refund(payment, 300, Some(&format!("rr_{payment}")));
    let first = app.post_signed("hmac", &body).await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    let retry = app.post_signed("hmac", &body).await;
    assert_eq!(retry.json["decision"], "defer", "{}", retry.json);
    let retry_id = retry.json["delivery_id"].as_str().unwrap().to_owned();
    let held = format!(
        "SELECT COUNT(*) FROM cases WHERE delivery_id = '{retry_id}' \
         AND reason = '{reason}' AND status = 'open'"
    );
    app.wait_for_count(&held, 1).await;
    retry_id
}

/// Whether the case of `delivery_id` is due for a look-up, a few sweeps on.
async fn due_after_sweeps(app: &TestApp, delivery_id: &str) -> bool {
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let due = format!(
        "SELECT COUNT(*) FROM cases WHERE delivery_id = '{delivery_id}' \
         AND next_lookup_at IS NOT NULL"
    );
    app.count(&due).await > 0
}

#[actix_web::test]
async fn a_case_no_look_up_can_settle_is_never_due_for_one() {
    // Given a look-up configured, a slow downstream, and a reference
    // strategy whose collision breaker has tripped
    let provider = ProviderApi::start(200, refunds(&["re_1"])).await;
    let downstream = Downstream::start(Behaviour::Apply { delay_ms: 800 }).await;
    let app = spawn_app_with(&format!(
        "[engine]\nbreaker_threshold = 0.1\nbreaker_min_deliveries = 3\nbreaker_check_ms = 100\n\
         sweep_interval_ms = 100\n{}{}",
        downstream.sink_toml(5000),
        provider.config()
    ))
    .await;
    app.post_signed("hmac", &refund("pay_b0", 50, Some("rr_b0")))
        .await;
    app.collide("pay_b1", 2).await;
    app.wait_journal("StrategyTripped", 1).await;
    // When a refund's retry is decided again once the refund settles: a
    // would-be duplicate, held for a person
    let retry_id = retry_held_once_decided_again(&app, "pay_b2", "breaker_tripped").await;
    // Then the provider's list cannot settle that case: it is not due for
    // the sweeper's look-ups, which would ask nothing and keep it due, a
    // place taken in each of their batches
    assert!(!due_after_sweeps(&app, &retry_id).await);
    assert_eq!(provider.asked.load(Ordering::SeqCst), 0);
}

#[actix_web::test]
async fn a_retry_decided_again_once_its_first_outcome_is_unknown_is_not_due_for_a_look_up() {
    // Given a look-up configured and a downstream that applies, then never
    // answers in time
    let provider = ProviderApi::start(200, refunds(&["re_1"])).await;
    let downstream = Downstream::start(Behaviour::ApplyThenHang).await;
    let app = spawn_app_with(&format!(
        "[engine]\nsweep_interval_ms = 100\n{}{}",
        downstream.sink_toml(600),
        provider.config()
    ))
    .await;
    // When a refund's retry is decided again once the refund's outcome is
    // unknown
    let retry_id = retry_held_once_decided_again(&app, "pay_u1", "outcome_unknown").await;
    // Then the retry's case waits for a person: the effect's own case is the
    // one put to the downstream, and the sweeper would ask nothing about the
    // retry's, keep it due, and give it a place in each of its batches
    assert!(!due_after_sweeps(&app, &retry_id).await);
}

/// Cases an earlier version made due that no look-up settles are cleared by
/// the upgrade, as a rebuild would leave them: a tripped breaker's case, a
/// retry's unknown outcome that names no effect. An unknown outcome naming
/// its effect stays due for the downstream's status URL.
#[actix_web::test]
async fn the_upgrade_leaves_due_only_the_cases_a_look_up_settles() {
    use sea_orm::{ActiveModelTrait, ConnectionTrait, IntoActiveModel};
    use unicity::store::entities::case;
    let (url, _dir) = crate::support::app::fresh_database().await;
    let db = unicity::store::connect(&url).await.expect("database");
    unicity::store::migrate(&db).await.expect("migrations");
    let now = chrono::Utc::now();
    let due = |reason: &str, details: Value| case::Model {
        case_id: uuid::Uuid::now_v7().to_string(),
        delivery_id: uuid::Uuid::now_v7().to_string(),
        business_key: None,
        action: "reconcile".to_owned(),
        reason: reason.to_owned(),
        status: "open".to_owned(),
        lookup_first: true,
        details,
        opened_at: now,
        resolved_at: None,
        resolution: None,
        resolved_by: None,
        lookups: 0,
        next_lookup_at: Some(now),
        assignee: None,
    };
    let effect = uuid::Uuid::now_v7().to_string();
    let resolved = case::Model {
        status: "resolved".to_owned(),
        resolved_at: Some(now),
        resolution: Some("reject".to_owned()),
        resolved_by: Some("cli".to_owned()),
        ..due("breaker_tripped", json!({"effect_id": effect}))
    };
    for case in [
        due("breaker_tripped", json!({"effect_id": effect})),
        resolved,
        due("outcome_unknown", json!({"effect_id": null})),
        due("outcome_unknown", json!({"effect_id": effect})),
        due("weak_match_critical", json!({})),
    ] {
        case.into_active_model()
            .reset_all()
            .insert(&db)
            .await
            .expect("a case");
    }
    for version in [
        "m20261207_000054_no_case_due_that_no_look_up_settles",
        "m20261207_000057_no_resolved_case_due",
    ] {
        db.execute_unprepared(&format!(
            "DELETE FROM seaql_migrations WHERE version = '{version}'"
        ))
        .await
        .expect("the upgrade to run again");
    }
    unicity::store::migrate(&db).await.expect("the upgrade");
    let still_due = db
        .query_all_raw(sea_orm::Statement::from_string(
            db.get_database_backend(),
            "SELECT reason FROM cases WHERE next_lookup_at IS NOT NULL ORDER BY reason".to_owned(),
        ))
        .await
        .expect("read");
    let reasons: Vec<String> = still_due
        .iter()
        .map(|row| row.try_get_by_index(0).expect("a reason"))
        .collect();
    assert_eq!(reasons, ["outcome_unknown", "weak_match_critical"]);
}

#[tokio::test]
async fn who_asked_the_provider_is_in_the_audit_trail_and_the_servers_own_questions_are_not() {
    // Given a case the server asked about by itself as it opened, the
    // provider being down
    let provider = ProviderApi::start(503, json!({"error": "down"})).await;
    let (app, _downstream) = start(&provider).await;
    let case_id = two_equal_refunds(&app).await;
    app.wait_journal("LookupPerformed", 1).await;
    // When finance asks again from the case page
    let mut fin = signed_in(&app, "fin", unicity::auth::Role::Finance).await;
    let page = fin.get(&format!("/cases/{case_id}")).await;
    let csrf = csrf_in(&page.body);
    let asked = fin
        .post(&format!("/cases/{case_id}/lookup"), &[("csrf", &csrf)])
        .await;
    assert_eq!(
        asked.status,
        reqwest::StatusCode::SEE_OTHER,
        "{}",
        asked.body
    );
    assert_eq!(provider.asked.load(Ordering::SeqCst), 2);
    // Then the audit trail says fin asked, about that case, and only that
    let mut eve = signed_in(&app, "eve", unicity::auth::Role::Engineer).await;
    let trail = eve.get("/audit?kind=provider_asked").await;
    let rows: Vec<&str> = trail.body.split("<tr data-kind=\"").skip(1).collect();
    assert_eq!(rows.len(), 1, "{}", trail.body);
    assert!(rows[0].contains("<td>fin</td>"), "{}", rows[0]);
    assert!(
        rows[0].contains("asked the provider about a case: for a person"),
        "{}",
        rows[0]
    );
    assert!(
        rows[0].contains(&format!("/cases/{case_id}")),
        "{}",
        rows[0]
    );
}

#[tokio::test]
async fn a_provider_answering_a_page_at_a_time_is_read_to_its_last_page() {
    // The provider made two refunds on the payment and lists one per page.
    let now = chrono::Utc::now();
    let made = [("re_p1", "pay_l", 700, now), ("re_p2", "pay_l", 700, now)];
    let provider = Provider::start(&made, 1).await;
    let downstream = Downstream::start(Behaviour::Apply { delay_ms: 0 }).await;
    // (Its listing's table, comparing what the fingerprint discriminates on.)
    let app = spawn_app_with(&format!(
        "{}{}",
        downstream.sink_toml(2000),
        provider.lookup_toml().replace(
            "\n[reconciliation]",
            "\n[lookups.compare]\npayment = \"resource\"\namount = \"amount\"\ncurrency = \"currency\"\n\n[reconciliation]"
        )
    ))
    .await;
    let case_id = two_equal_refunds(&app).await;
    app.wait_case_resolved(&case_id).await;
    // Its first page alone lists one refund for the one applied: the
    // second, legitimate, would have been confirmed as a duplicate.
    assert_eq!(
        case_field(&app, &case_id, "resolution").await,
        "process_as_distinct"
    );
    downstream.wait_calls(2).await;
}

#[tokio::test]
async fn a_case_due_for_a_look_up_nothing_can_ask_any_more_stops_being_due() {
    let (url, _dir) = fresh_database().await;
    let provider = ProviderApi::start(503, json!({})).await;
    let downstream = Downstream::start(Behaviour::Apply { delay_ms: 0 }).await;
    let sink = downstream.sink_toml(2000);
    // The first server asks once, at the delivery, and never sweeps (it
    // keeps running beside the second).
    let asking_once = format!(
        "[engine]\nsweep_interval_ms = 600000\n\n{sink}{}",
        provider.config()
    );
    let app = spawn_on(&url, &asking_once, None).await;
    let case_id = two_equal_refunds(&app).await;
    // The provider is down: the case is due again later.
    app.wait_journal("LookupPerformed", 1).await;
    let due = format!(
        "SELECT COUNT(*) FROM cases WHERE case_id = '{case_id}' AND next_lookup_at IS NOT NULL"
    );
    assert_eq!(app.count(&due).await, 1);
    app_execute(
        &url,
        &format!("UPDATE cases SET next_lookup_at = opened_at WHERE case_id = '{case_id}'"),
    )
    .await;
    // Its look-up leaves the configuration: nothing can ask about it now.
    let app = spawn_on(
        &url,
        &format!("[engine]\nsweep_interval_ms = 100\n\n{sink}"),
        None,
    )
    .await;
    app.wait_for_count(&due, 0).await;
    assert_eq!(
        app.journal_count_containing("LookupPerformed", "not asked: no look-up is configured")
            .await,
        1
    );
    // It stays open, for a person, and is asked nothing more.
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert_eq!(app.open_cases().await, 1);
    assert_eq!(app.journal_count("LookupPerformed").await, 2);
}

#[tokio::test]
async fn a_case_whose_first_look_up_was_never_journaled_is_asked_by_the_sweeper() {
    let (url, _dir) = fresh_database().await;
    let provider = ProviderApi::start(200, refunds(&["re_1", "re_2"])).await;
    let downstream = Downstream::start(Behaviour::Apply { delay_ms: 0 }).await;
    let engine = format!(
        "[engine]\nsweep_interval_ms = 100\n\n{}",
        downstream.sink_toml(2000)
    );
    // The first server's look-up never answers: it stops before journaling
    // it (a restart, a crash). (It keeps running beside the second, and
    // never sweeps.)
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let never = format!("http://{}", silent.local_addr().unwrap());
    let asking_nobody = (provider.config())
        .replace(&provider.url, &never)
        .replace("timeout_ms = 2000", "timeout_ms = 600000");
    let silent_server = engine.replace("sweep_interval_ms = 100", "sweep_interval_ms = 600000");
    let app = spawn_on(&url, &format!("{silent_server}{asking_nobody}"), None).await;
    let case_id = two_equal_refunds(&app).await;
    let due = format!(
        "SELECT COUNT(*) FROM cases WHERE case_id = '{case_id}' AND next_lookup_at > opened_at"
    );
    assert_eq!(app.count(&due).await, 1, "the sweeper asks later");
    drop(app);
    // Once that while has passed, the next server asks the provider.
    app_execute(
        &url,
        &format!("UPDATE cases SET next_lookup_at = opened_at WHERE case_id = '{case_id}'"),
    )
    .await;
    let app = spawn_on(&url, &format!("{engine}{}", provider.config()), None).await;
    app.wait_case_resolved(&case_id).await;
    assert_eq!(
        case_field(&app, &case_id, "resolution").await,
        "process_as_distinct"
    );
    downstream.wait_calls(2).await;
}

async fn app_execute(url: &str, sql: &str) {
    use sea_orm::ConnectionTrait;
    let db = sea_orm::Database::connect(url).await.expect("connected");
    db.execute_unprepared(sql).await.expect("executed");
}
