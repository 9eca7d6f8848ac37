//! An effect whose outcome is unknown (the downstream timed out after the
//! request was sent) is settled by asking the downstream's status URL by its
//! Idempotency-Key — never by sending it again blindly. Real HTTP on every
//! side: Unicity, a downstream that applies (or not) and answers for its keys.

use crate::support::app::{TestApp, refund, spawn_app_with};
use crate::support::counts::Counts;
use crate::support::downstream::{Behaviour, Downstream};

/// Short sink timeout, frequent sweeps.
async fn start(downstream: &Downstream, with_status: bool) -> TestApp {
    let sink = if with_status {
        downstream.sink_toml_with_status(300)
    } else {
        downstream.sink_toml(300)
    };
    spawn_app_with(&format!(
        "[engine]\nsweep_interval_ms = 100\nlookup_retry_secs = 1\n\n{sink}"
    ))
    .await
}

/// Leases of one second, frequent sweeps and look-ups, and `downstream`
/// with its status URL and a call timeout of `timeout_ms`.
async fn leasing_a_second(downstream: &Downstream, timeout_ms: u64) -> TestApp {
    spawn_app_with(&format!(
        "[engine]\nlease_secs = 1\nsweep_interval_ms = 100\nlookup_retry_secs = 1\n\n{}",
        downstream.sink_toml_with_status(timeout_ms)
    ))
    .await
}

/// Posts one refund and waits for its `outcome_unknown` case; returns its id.
async fn an_unknown_outcome(app: &TestApp) -> String {
    let sent = app
        .post_signed("hmac", &refund("pay_s", 700, Some("rr_1")))
        .await;
    assert_eq!(sent.json["decision"], "process", "{}", sent.json);
    app.wait_journal("EffectOutcomeUnknown", 1).await;
    let row = app
        .get("/api/cases?reason=outcome_unknown&status=open")
        .await;
    let mut id = row.json["cases"][0]["case_id"].as_str().map(str::to_owned);
    if id.is_none() {
        let resolved = app.get("/api/cases?status=resolved").await;
        id = resolved.json["cases"][0]["case_id"]
            .as_str()
            .map(str::to_owned);
    }
    id.expect("an outcome_unknown case")
}

/// Waits until `unicity_effects_total` by outcome reads `expected` (it is
/// counted once the writer answered, a moment after the commit), and
/// asserts it.
async fn wait_counted(app: &TestApp, expected: &[&str]) {
    let started = std::time::Instant::now();
    let mut counted = effects_counted(app).await;
    while counted != expected && started.elapsed() < std::time::Duration::from_secs(5) {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        counted = effects_counted(app).await;
    }
    assert_eq!(counted, expected);
}

/// `unicity_effects_total` by outcome, as `/metrics` shows it.
async fn effects_counted(app: &TestApp) -> Vec<String> {
    let metrics = app.get_text("/metrics").await;
    let mut counted: Vec<String> = metrics
        .lines()
        .filter(|line| line.starts_with("unicity_effects_total{"))
        .filter_map(|line| {
            let outcome = line.split(r#"outcome=""#).nth(1)?.split('"').next()?;
            let n = line.rsplit(' ').next()?;
            Some(format!("{outcome} {n}"))
        })
        .collect();
    counted.sort();
    counted
}

async fn wait_resolved(app: &TestApp, case_id: &str) -> serde_json::Value {
    app.wait_case_resolved(case_id).await;
    app.get(&format!("/api/cases/{case_id}")).await.json
}

#[tokio::test]
async fn an_unknown_outcome_the_downstream_reports_applied_is_settled_applied_without_a_second_call()
 {
    let downstream = Downstream::start(Behaviour::ApplyThenHang).await;
    let app = start(&downstream, true).await;
    let case_id = an_unknown_outcome(&app).await;
    let case = wait_resolved(&app, &case_id).await;
    assert_eq!(case["resolution"], "effect_confirmed", "{case}");
    assert_eq!(case["resolved_by"], "look-up");
    app.wait_applied(1).await;
    assert_eq!(
        app.journal_count_containing("StatusLookupPerformed", "answer%applied")
            .await,
        1,
        "the question and its answer are journaled"
    );
    // and counted: the effect unknown, then applied by the answer
    wait_counted(&app, &["applied 1", "unknown 1"]).await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(downstream.calls().len(), 1, "never sent again");
    assert_eq!(downstream.applied().len(), 1);
}

#[tokio::test]
async fn an_unknown_outcome_the_downstream_never_applied_is_sent_again_under_its_key_once() {
    let downstream = Downstream::start(Behaviour::HangOnceWithoutApplying).await;
    let app = start(&downstream, true).await;
    let case_id = an_unknown_outcome(&app).await;
    let case = wait_resolved(&app, &case_id).await;
    assert_eq!(case["resolution"], "effect_retried", "{case}");
    assert_eq!(case["resolved_by"], "look-up");
    app.wait_applied(1).await;
    // Settled failed, taken back with the next fencing token, applied.
    assert_eq!(app.reservations_at("applied", 2).await, 1);
    assert_eq!(app.journal_count("EffectFailed").await, 1);
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let calls = downstream.calls();
    assert_eq!(calls.len(), 2, "the lost attempt, then one more");
    assert_eq!(calls[0], calls[1], "both with the same Idempotency-Key");
    assert_eq!(downstream.applied().len(), 1, "one effect in the end");
    assert_eq!(app.open_cases().await, 0);
}

#[tokio::test]
async fn without_a_status_url_an_unknown_outcome_stays_for_a_person() {
    let downstream = Downstream::start(Behaviour::ApplyThenHang).await;
    let app = start(&downstream, false).await;
    let case_id = an_unknown_outcome(&app).await;
    app.wait_journal_containing("StatusLookupPerformed", "no status URL", 1)
        .await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let case = app.get(&format!("/api/cases/{case_id}")).await.json;
    assert_eq!(case["status"], "open", "{case}");
    assert_eq!(app.effects_in("unknown").await, 1);
    assert_eq!(
        app.journal_count("StatusLookupPerformed").await,
        1,
        "asked once, not again and again"
    );
    assert_eq!(downstream.calls().len(), 1);
}

/// A case whose effect settled meanwhile (a late answer of the call that
/// timed out, accepted on the expired lease) has nothing left to ask the
/// downstream: it is no longer due, rather than fetched and skipped at
/// every sweep, ahead of the cases still waiting for their question.
#[tokio::test]
async fn a_case_whose_effect_settled_meanwhile_stops_being_due_and_says_why() {
    let downstream = Downstream::start(Behaviour::ApplyThenHang).await;
    let app = start(&downstream, false).await;
    let case_id = an_unknown_outcome(&app).await;
    app.wait_journal_containing("StatusLookupPerformed", "no status URL", 1)
        .await;
    // The late call's failure was accepted, and the case is due again
    sea_orm::ConnectionTrait::execute_unprepared(
        &app.db,
        &format!(
            "UPDATE effects SET state = 'failed' WHERE state = 'unknown'; \
             UPDATE cases SET next_lookup_at = opened_at WHERE case_id = '{case_id}'"
        ),
    )
    .await
    .expect("the effect settled late");
    app.wait_journal_containing("StatusLookupPerformed", "no longer", 1)
        .await;
    let due = format!(
        "SELECT COUNT(*) FROM cases WHERE case_id = '{case_id}' AND next_lookup_at IS NULL"
    );
    app.wait_for_count(&due, 1).await;
    let case = app.get(&format!("/api/cases/{case_id}")).await.json;
    assert_eq!(
        case["status"], "open",
        "a person sees what became of it: {case}"
    );
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert_eq!(
        app.journal_count("StatusLookupPerformed").await,
        2,
        "not asked again"
    );
}

/// A status URL that answers 404 ("never applied") after `delay_ms`,
/// counting the questions.
struct SlowStatus {
    url: String,
    asked: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl SlowStatus {
    async fn start(delay_ms: u64) -> Self {
        use std::sync::atomic::Ordering;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let asked = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = asked.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut request = [0u8; 4096];
                    let _ = socket.read(&mut request).await;
                    tokio::time::sleep(std::time::Duration::from_millis(delay_ms)).await;
                    let _ = socket
                        .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                        .await;
                });
            }
        });
        Self { url, asked }
    }

    async fn wait_asked(&self) {
        for _ in 0..200 {
            if self.asked.load(std::sync::atomic::Ordering::SeqCst) > 0 {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
        panic!("the status URL was never asked");
    }
}

/// A person who resolved the case while the downstream's status answer was
/// on its way decided: an answer "never applied" arriving after them
/// settles nothing, so the key stays unknown and a retry of the refund
/// goes to a person instead of being sent a second time.
#[tokio::test]
async fn a_status_answer_arriving_after_a_person_resolved_the_case_sends_nothing_again() {
    let downstream = Downstream::start(Behaviour::HangOnceWithoutApplying).await;
    let status = SlowStatus::start(1_500).await;
    let sink = format!(
        "{}status_url = \"{}/{{idempotency_key}}\"\nstatus_not_found = \"failed\"\n",
        downstream.sink_toml(300),
        status.url
    );
    let app = spawn_app_with(&format!(
        "[engine]\nsweep_interval_ms = 100\nlookup_retry_secs = 1\n\n{sink}"
    ))
    .await;
    let case_id = an_unknown_outcome(&app).await;
    // While the question is on its way, finance refunds by hand and says so
    status.wait_asked().await;
    let resolved = app
        .resolve(
            &case_id,
            serde_json::json!({"resolution": "reject", "note": "refunded by hand"}),
        )
        .await;
    assert_eq!(resolved.status, 200, "{}", resolved.json);
    // When the answer "never applied" arrives
    app.wait_journal("StatusLookupPerformed", 1).await;
    // Then the effect stays unknown
    assert_eq!(app.journal_count("EffectFailed").await, 0);
    assert_eq!(app.effects_in("unknown").await, 1);
    // and the provider's retry of the refund is not sent again
    let retry = app
        .post_signed("hmac", &refund("pay_s", 700, Some("rr_1")))
        .await;
    assert_eq!(retry.json["decision"], "reconcile", "{}", retry.json);
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(downstream.calls().len(), 1, "{:?}", downstream.calls());
    // and the answer is counted as one that settled nothing, not a retry
    wait_counted(&app, &["unknown 1"]).await;
    let started = std::time::Instant::now();
    loop {
        let metrics = app.get_text("/metrics").await;
        let status = |verdict: &str| {
            metrics
                .lines()
                .filter(|line| line.starts_with("unicity_lookups_total{"))
                .any(|line| line.contains(r#"kind="status""#) && line.contains(verdict))
        };
        assert!(!status("effect_retried"), "{metrics}");
        if status("settled_meanwhile") {
            break;
        }
        assert!(started.elapsed().as_secs() < 5, "{metrics}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Retention purges the stored result of applied effects only: an effect
/// whose outcome is unknown has no result to prove anything yet, and
/// flagged purged it would keep the one its status answer brings forever.
#[tokio::test]
async fn retention_leaves_an_effect_whose_outcome_is_unknown_alone() {
    let downstream = Downstream::start(Behaviour::ApplyThenHang).await;
    let app = start(&downstream, false).await;
    an_unknown_outcome(&app).await;
    assert_eq!(app.effects_in("unknown").await, 1);
    let later = chrono::Utc::now() + chrono::Duration::hours(1);
    let purged = unicity::services::retention::purge_evidence(&app.db, later)
        .await
        .expect("purged");
    assert_eq!(purged, 0);
    assert_eq!(app.journal_count("EvidencePurged").await, 0);
    assert_eq!(
        app.count("SELECT COUNT(*) FROM effects WHERE evidence_purged_at IS NOT NULL")
            .await,
        0
    );
}

/// A call outlives its lease while the downstream is still working on it:
/// the sweeper makes its outcome unknown, and the status URL does not know
/// the key yet. Asked then, "never applied" would send a second call beside
/// the first; the status URL is asked only once the first call's own
/// timeout has run out, and by then its answer has settled the effect.
#[tokio::test]
async fn a_lease_that_runs_out_while_its_call_is_in_flight_sends_no_second_call() {
    let downstream = Downstream::start(Behaviour::ApplyLate { delay_ms: 3_000 }).await;
    let app = leasing_a_second(&downstream, 10_000).await;
    let sent = app
        .post_signed("hmac", &refund("pay_inflight", 700, Some("rr_inflight")))
        .await;
    assert_eq!(sent.json["decision"], "process", "{}", sent.json);
    app.wait_journal("ReservationExpired", 1).await;
    // The first call answers after three seconds, applied
    app.wait_applied(1).await;
    tokio::time::sleep(std::time::Duration::from_millis(1_000)).await;
    assert_eq!(downstream.calls().len(), 1, "a second call was sent");
    assert_eq!(downstream.applied().len(), 1);
    // The lease that ran out made the outcome unknown, the answer applied
    wait_counted(&app, &["applied 1", "unknown 1"]).await;
}

/// A call that hangs leaves two cases for one attempt (its lease ran out,
/// then its call timed out); the status answer settles it and sends the
/// retry, whose own lease runs out while its call is in flight. The
/// earlier attempt's case, still open, is asked about then: "never
/// applied" would send a third call beside the retry's. The wait is read
/// from the key's row, whichever case asks.
#[tokio::test]
async fn an_earlier_attempts_open_case_asks_nothing_while_the_retrys_call_is_in_flight() {
    let downstream = Downstream::start(Behaviour::HangOnceThenApplyLate { delay_ms: 2_000 }).await;
    let app = leasing_a_second(&downstream, 3_000).await;
    let sent = app
        .post_signed("hmac", &refund("pay_old_case", 700, Some("rr_old_case")))
        .await;
    assert_eq!(sent.json["decision"], "process", "{}", sent.json);
    // The retry's call went out, and its lease ran out in turn
    downstream.wait_calls(2).await;
    app.wait_journal("ReservationExpired", 2).await;
    // When someone asks about every outcome still open
    let open = app
        .get("/api/cases?reason=outcome_unknown&status=open")
        .await;
    let cases = open.json["cases"].as_array().expect("cases").clone();
    assert!(cases.len() >= 2, "{}", open.json);
    for case in &cases {
        let asked = app.look_up(case["case_id"].as_str().expect("an id")).await;
        assert_eq!(asked.status, 200, "{}", asked.json);
    }
    // Then no third call goes out beside the retry's, which applies
    app.wait_applied(1).await;
    tokio::time::sleep(std::time::Duration::from_millis(1_000)).await;
    assert_eq!(
        downstream.calls().len(),
        2,
        "a call went out beside the retry's"
    );
    assert_eq!(downstream.applied().len(), 1);
}

#[tokio::test]
async fn a_look_alike_held_while_an_outcome_is_unknown_stays_open_once_that_effect_is_applied() {
    let downstream = Downstream::start(Behaviour::ApplyThenHang).await;
    // No sweep before the test asks: the look-alike arrives while the
    // first refund's outcome is unknown.
    let app = spawn_app_with(&format!(
        "[engine]\nsweep_interval_ms = 600000\n\n{}",
        downstream.sink_toml_with_status(300)
    ))
    .await;
    // Two refunds without a reference look alike (a weak fingerprint):
    // nothing tells a retry from a second legitimate refund.
    let first = app.post_signed("hmac", &refund("pay_u", 700, None)).await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    app.wait_journal("EffectOutcomeUnknown", 1).await;
    let second = app.post_signed("hmac", &refund("pay_u", 700, None)).await;
    assert_eq!(second.json["reason"], "outcome_unknown", "{}", second.json);
    let look_alike = second.json["case_id"].as_str().expect("a case").to_owned();
    let cases = app
        .get("/api/cases?reason=outcome_unknown&status=open")
        .await;
    let own = (cases.json["cases"].as_array().expect("cases").iter())
        .filter_map(|c| c["case_id"].as_str())
        .find(|id| *id != look_alike)
        .expect("the first effect's own case")
        .to_owned();
    // While the first refund's outcome is unknown, applying the look-alike
    // could be that refund twice: refused.
    let distinct = serde_json::json!({"resolution": "process_as_distinct",
        "note": "a second refund", "authoritative_ref": "re_second"});
    let early = app.resolve(&look_alike, distinct.clone()).await;
    assert_eq!(early.status, 409, "{}", early.json);
    assert_eq!(early.json["code"], "outcome_unknown", "{}", early.json);
    let asked = app.look_up(&own).await;
    assert_eq!(asked.json["verdict"], "effect_confirmed", "{}", asked.json);
    // The first refund is applied; whether the second is another refund is
    // still nobody's answer: its case stays open for a person…
    let case = app.get(&format!("/api/cases/{look_alike}")).await;
    assert_eq!(case.json["status"], "open", "{}", case.json);
    // …who can apply it as distinct, citing the provider's operation.
    let resolved = app.resolve(&look_alike, distinct).await;
    assert_eq!(resolved.status, 200, "{}", resolved.json);
    // (This downstream applies each call, then lets it time out.)
    downstream.wait_calls(2).await;
    assert_eq!(downstream.applied().len(), 2);
}

#[tokio::test]
async fn an_answer_arriving_after_the_lease_ran_out_closes_the_cases_of_its_effect() {
    // The call outlives its one-second lease; its answer comes before the
    // downstream is asked (not until the call's own timeout after the lease).
    let downstream = Downstream::start(Behaviour::ApplyLate { delay_ms: 2500 }).await;
    let app = leasing_a_second(&downstream, 5000).await;
    let sent = app
        .post_signed("hmac", &refund("pay_late", 700, Some("rr_late")))
        .await;
    assert_eq!(sent.json["decision"], "process", "{}", sent.json);
    app.wait_journal("ReservationExpired", 1).await;
    assert_eq!(app.cases_with_status("outcome_unknown", "open").await, 1);
    app.wait_applied(1).await;
    let open = "SELECT COUNT(*) FROM cases WHERE status = 'open'";
    app.wait_for_count(open, 0).await;
    assert_eq!(downstream.calls().len(), 1);
}

/// A downstream that asks for a credential gets it on every call: the
/// effect, and the status question that settles it when its answer was
/// lost. Without it (the sink sends none) the effect is refused, applying
/// nothing; the credential is in no journal row.
#[tokio::test]
async fn a_downstream_that_asks_for_a_credential_gets_it_on_the_effect_and_its_status_question() {
    use crate::support::app::{DOWNSTREAM_CREDENTIAL, DOWNSTREAM_CREDENTIAL_ENV};
    let bearer = format!("Bearer {DOWNSTREAM_CREDENTIAL}");
    let bearer: &'static str = Box::leak(bearer.into_boxed_str());
    let downstream =
        Downstream::start_guarded(Behaviour::ApplyThenHang, "authorization", bearer).await;
    let app = spawn_app_with(&format!(
        "[engine]\nsweep_interval_ms = 100\nlookup_retry_secs = 1\n\n{}auth_env = \"{DOWNSTREAM_CREDENTIAL_ENV}\"\n",
        downstream.sink_toml_with_status(300)
    ))
    .await;
    let case_id = an_unknown_outcome(&app).await;
    let case = wait_resolved(&app, &case_id).await;
    assert_eq!(case["resolution"], "effect_confirmed", "{case}");
    assert_eq!(downstream.unauthorized(), 0);
    assert_eq!(downstream.applied().len(), 1);
    assert_eq!(
        app.count(&format!(
            "SELECT COUNT(*) FROM journal WHERE CAST(data AS TEXT) LIKE '%{DOWNSTREAM_CREDENTIAL}%'"
        ))
        .await,
        0,
        "the credential is never journaled"
    );

    // A key in another header, as the downstream names it
    let keyed = Downstream::start_guarded(
        Behaviour::Apply { delay_ms: 0 },
        "x-api-key",
        DOWNSTREAM_CREDENTIAL,
    )
    .await;
    let app = spawn_app_with(&format!(
        "{}auth_env = \"{DOWNSTREAM_CREDENTIAL_ENV}\"\nauth_header = \"X-Api-Key\"\n",
        keyed.sink_toml(2_000)
    ))
    .await;
    let sent = app
        .post_signed("hmac", &refund("pay_k", 700, Some("rr_k")))
        .await;
    assert_eq!(sent.json["decision"], "process", "{}", sent.json);
    app.wait_applied(1).await;
    assert_eq!((keyed.unauthorized(), keyed.applied().len()), (0, 1));

    // And a sink that sends none is refused
    let refused = Downstream::start_guarded(
        Behaviour::Apply { delay_ms: 0 },
        "x-api-key",
        DOWNSTREAM_CREDENTIAL,
    )
    .await;
    let app = spawn_app_with(&refused.sink_toml(2_000)).await;
    app.post_signed("hmac", &refund("pay_k", 700, Some("rr_k")))
        .await;
    app.wait_journal("EffectFailed", 1).await;
    assert_eq!((refused.unauthorized(), refused.applied().len()), (1, 0));
}
