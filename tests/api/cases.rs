//! Resolving cases through the service layer, against a real server that
//! opened them and an HTTP downstream that counts refunds: each resolution
//! does what it says, once.

use unicity::auth::{Principal, PrincipalKind, Role};
use unicity::domain::cases::{Refusal, Resolution};
use unicity::services::cases::{self, CaseError, Resolve};
use unicity::services::engine::{Engine, SharedEngine};

use crate::support::app::{TestApp, fresh_database, refund, spawn_on, test_settings};
use crate::support::counts::Counts;
use crate::support::downstream::{Behaviour, Downstream};
use crate::support::forms::operator;
use crate::support::held::AdminChange;

struct Setup {
    app: TestApp,
    downstream: Downstream,
    url: String,
    extra: String,
    _dir: Option<tempfile::TempDir>,
}

impl Setup {
    async fn new() -> Self {
        let downstream = Downstream::start(Behaviour::Apply { delay_ms: 0 }).await;
        let (url, dir) = fresh_database().await;
        let extra = downstream.sink_toml(2000);
        let app = spawn_on(&url, &extra, None).await;
        // Ann (`ann()`) exists: the service reads her role as it is now.
        let ann = ann();
        operator(&app, &ann.name, ann.role).await;
        sea_orm::ConnectionTrait::execute_unprepared(
            &app.db,
            &format!("UPDATE operators SET id = '{}' WHERE name = 'ann'", ann.id),
        )
        .await
        .expect("ann's id set");
        Self {
            app,
            downstream,
            url,
            extra,
            _dir: dir,
        }
    }

    /// Another process on the same database, as an operator's would be.
    async fn engine(&self) -> SharedEngine {
        self.engine_committing(None).await
    }

    /// `engine`, its writer committing each job alone when `group_commit`
    /// is `Some(false)`.
    async fn engine_committing(&self, group_commit: Option<bool>) -> SharedEngine {
        let mut s = test_settings(&self.url, &self.extra);
        s.engine.group_commit = group_commit.or(s.engine.group_commit);
        Engine::open(
            &self.url,
            s.catalog,
            s.key_secret,
            s.sinks,
            s.lookups,
            s.engine,
        )
        .await
        .expect("engine opens")
    }

    /// A third equal refund, after `weak_match_case`: another case.
    async fn another_look_alike(&self) -> uuid::Uuid {
        let other = self
            .app
            .post_signed("hmac", &refund("pay_case", 700, None))
            .await;
        assert_eq!(
            other.json["reason"], "weak_match_critical",
            "{}",
            other.json
        );
        other.json["case_id"].as_str().unwrap().parse().unwrap()
    }

    /// Two equal refunds without a reference: the second is a weak match on
    /// money and opens a case. Returns (first key, case id, second delivery).
    async fn weak_match_case(&self) -> (String, uuid::Uuid, String) {
        let body = refund("pay_case", 700, None);
        let first = self.app.post_signed("hmac", &body).await;
        assert_eq!(first.json["decision"], "process", "{}", first.json);
        self.downstream.wait_calls(1).await;
        self.app.wait_applied(1).await;
        let second = self
            .app
            .post_signed("hmac", &refund("pay_case", 700, None))
            .await;
        assert_eq!(second.json["decision"], "reconcile", "{}", second.json);
        assert_eq!(second.json["reason"], "weak_match_critical");
        // No look-up configured: a person reviews it.
        let summary = second.json["summary"].as_str().unwrap_or_default();
        assert!(summary.contains("a human must review it"), "{summary}");
        let case_id = second.json["case_id"].as_str().unwrap().parse().unwrap();
        (
            first.json["key"].as_str().unwrap().to_owned(),
            case_id,
            second.json["delivery_id"].as_str().unwrap().to_owned(),
        )
    }

    async fn case_column(&self, case_id: uuid::Uuid, column: &str) -> String {
        use sea_orm::ConnectionTrait;
        let row = self
            .app
            .db
            .query_one_raw(sea_orm::Statement::from_string(
                self.app.db.get_database_backend(),
                format!("SELECT {column} FROM cases WHERE case_id = '{case_id}'"),
            ))
            .await
            .unwrap()
            .expect("the case");
        row.try_get_by_index::<Option<String>>(0)
            .unwrap()
            .unwrap_or_default()
    }
}

/// Ann, of finance: she may resolve money cases.
fn ann() -> Principal {
    Principal {
        kind: PrincipalKind::Operator,
        id: uuid::Uuid::nil(),
        name: "ann".to_owned(),
        role: Role::Finance,
    }
}

fn request(case_id: uuid::Uuid, resolution: Resolution, note: &str) -> Resolve {
    Resolve {
        case_id,
        resolution,
        by: ann(),
        note: note.to_owned(),
        authoritative_ref: Some("re_provider_2".to_owned()),
    }
}

#[tokio::test]
async fn processing_a_weak_match_as_distinct_applies_one_more_refund_under_the_cases_own_key() {
    let s = Setup::new().await;
    let (key, case_id, delivery) = s.weak_match_case().await;
    let engine = s.engine().await;
    let resolved = cases::resolve(
        &engine,
        request(
            case_id,
            Resolution::ProcessAsDistinct,
            "the provider lists two refunds",
        ),
    )
    .await
    .expect("resolved");
    let applied_key = resolved.key.expect("a key of its own");
    assert_ne!(applied_key, key, "never the colliding key");
    s.downstream.wait_calls(2).await;
    // The Idempotency-Key header carries the key as a quoted string.
    assert_eq!(s.downstream.calls()[1], format!("\"{applied_key}\""));
    assert_eq!(s.case_column(case_id, "status").await, "resolved");
    assert_eq!(
        s.case_column(case_id, "resolution").await,
        "process_as_distinct"
    );
    assert_eq!(
        s.case_column(case_id, "resolved_by").await,
        ann().signature()
    );
    // The proof is in the delivery's history.
    let shown = s.app.delivery(&delivery).await;
    let resolved_event = shown.json["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["event_type"] == "CaseResolved")
        .expect("CaseResolved in the delivery's history")
        .clone();
    assert_eq!(resolved_event["data"]["authoritative_ref"], "re_provider_2");
    // The ledger names the operation the effect was applied for, and the
    // downstream's own id apart.
    s.app
        .wait_effects_for_operation_with_downstream_ref("re_provider_2", 1)
        .await;

    // The same form submitted again changes nothing.
    let again = cases::resolve(
        &engine,
        request(case_id, Resolution::ProcessAsDistinct, "twice"),
    )
    .await;
    assert!(
        matches!(again, Err(CaseError::Refused(Refusal::AlreadyResolved))),
        "{again:?}"
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(s.downstream.calls().len(), 2, "one more refund, no more");
}

#[tokio::test]
async fn confirming_a_duplicate_links_the_delivery_to_the_existing_effect_and_applies_nothing() {
    let s = Setup::new().await;
    let (_, case_id, delivery) = s.weak_match_case().await;
    let engine = s.engine().await;
    let resolved = cases::resolve(
        &engine,
        request(
            case_id,
            Resolution::ConfirmDuplicate,
            "a retry of the same refund",
        ),
    )
    .await
    .expect("resolved");
    let effect = resolved.effect_id.expect("the existing effect");
    assert_eq!(
        s.app
            .count(&format!(
                "SELECT COUNT(*) FROM effect_deliveries WHERE effect_id = '{effect}' AND delivery_id = '{delivery}'"
            ))
            .await,
        1
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(s.downstream.calls().len(), 1);
    assert_eq!(
        s.case_column(case_id, "resolution").await,
        "confirm_duplicate"
    );
}

#[tokio::test]
async fn rejecting_needs_a_note_and_applies_nothing() {
    let s = Setup::new().await;
    let (_, case_id, _) = s.weak_match_case().await;
    let engine = s.engine().await;
    let refused = cases::resolve(&engine, request(case_id, Resolution::Reject, " ")).await;
    assert!(
        matches!(refused, Err(CaseError::Refused(Refusal::NoteRequired))),
        "{refused:?}"
    );
    assert_eq!(s.case_column(case_id, "status").await, "open");
    cases::resolve(
        &engine,
        request(case_id, Resolution::Reject, "test payment"),
    )
    .await
    .expect("rejected");
    assert_eq!(s.case_column(case_id, "resolution").await, "reject");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(s.downstream.calls().len(), 1);
}

#[tokio::test]
async fn two_operators_resolving_at_once_from_two_processes_apply_one_effect() {
    let s = Setup::new().await;
    let (_, case_id, _) = s.weak_match_case().await;
    let (one, two) = (s.engine().await, s.engine().await);
    let (a, b) = tokio::join!(
        cases::resolve(
            &one,
            request(case_id, Resolution::ProcessAsDistinct, "two refunds")
        ),
        cases::resolve(
            &two,
            request(case_id, Resolution::ProcessAsDistinct, "two refunds")
        ),
    );
    let resolved = [&a, &b].iter().filter(|r| r.is_ok()).count();
    assert_eq!(resolved, 1, "{a:?} {b:?}");
    assert!(
        [&a, &b]
            .iter()
            .any(|r| matches!(r, Err(CaseError::Refused(Refusal::AlreadyResolved)))),
        "{a:?} {b:?}"
    );
    s.downstream.wait_calls(2).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(s.downstream.calls().len(), 2);

    // Rebuilt from the journal, the case reads the same.
    let status = s.case_column(case_id, "resolution").await;
    unicity::services::projections::rebuild(&s.app.db)
        .await
        .expect("rebuild");
    assert_eq!(s.case_column(case_id, "resolution").await, status);
    assert_eq!(s.case_column(case_id, "status").await, "resolved");
}

#[tokio::test]
async fn a_collision_case_shows_both_deliveries_and_the_discriminating_field_that_differs() {
    let s = Setup::new().await;
    let first = s
        .app
        .post_signed("hmac", &refund("pay_q", 800, Some("rr_q")))
        .await;
    assert_eq!(first.json["decision"], "process");
    s.app.wait_applied(1).await;
    let second = s
        .app
        .post_signed("hmac", &refund("pay_q", 900, Some("rr_q")))
        .await;
    assert_eq!(
        second.json["reason"], "discriminants_differ",
        "{}",
        second.json
    );
    let case_id = second.json["case_id"].as_str().unwrap().parse().unwrap();

    let engine = s.engine().await;
    let settings = test_settings(&s.url, &s.extra);
    let sources = settings
        .sources
        .into_iter()
        .map(|source| (source.slug().to_owned(), std::sync::Arc::new(source)))
        .collect();
    let view = unicity::services::case_view::show(&engine, &sources, case_id)
        .await
        .expect("the case");
    assert_eq!(view.status, "open");
    assert!(view.critical, "a refund is money");
    assert_eq!(
        view.reference.as_ref().map(|r| r.delivery_id.to_string()),
        first.json["delivery_id"].as_str().map(str::to_owned)
    );
    let amount = view
        .changes
        .iter()
        .find(|c| c.change.path == "$.amount")
        .expect("the amount differs");
    assert!(amount.discriminating);
    assert_eq!(amount.change.old, Some(serde_json::json!(800)));
    assert_eq!(amount.change.new, Some(serde_json::json!(900)));
    let sent_at = view
        .changes
        .iter()
        .find(|c| c.change.path == "$.sent_at")
        .expect("the send time differs too");
    assert!(!sent_at.discriminating);
    assert!(
        sent_at.volatile.is_some(),
        "the provider declares sent_at volatile"
    );
    assert!(amount.volatile.is_none());
    let figure = view
        .figures
        .iter()
        .find(|f| f.name == "amount")
        .expect("the amounts side by side");
    assert_eq!(
        (figure.delivery.clone(), figure.reference.clone()),
        (Some(serde_json::json!(900)), Some(serde_json::json!(800)))
    );
    assert_eq!(
        view.existing_effect.as_ref().map(|e| e.status.as_str()),
        Some("applied")
    );
    assert!(matches!(
        view.history.first(),
        Some(unicity::services::case_view::CaseEvent::Opened { .. })
    ));
}

#[tokio::test]
async fn the_queue_lists_open_cases_oldest_first_filtered_and_counted_per_reason() {
    use unicity::store::cases::{QueueFilter, counts_by_reason, queue};
    let s = Setup::new().await;
    let (_, weak, _) = s.weak_match_case().await;
    s.app
        .post_signed("hmac", &refund("pay_c", 800, Some("rr_c")))
        .await;
    s.app.wait_applied(2).await;
    let collision = s
        .app
        .post_signed("hmac", &refund("pay_c", 900, Some("rr_c")))
        .await;
    let collision: uuid::Uuid = collision.json["case_id"].as_str().unwrap().parse().unwrap();
    // The queue's filters by source read the deliveries read model.
    s.app.settle().await;

    let all = queue(&s.app.db, &QueueFilter::default(), 50, 0)
        .await
        .unwrap();
    let ids: Vec<String> = all.iter().map(|c| c.case_id.clone()).collect();
    assert_eq!(
        ids,
        [weak.to_string(), collision.to_string()],
        "oldest first"
    );
    let only = QueueFilter {
        reason: Some("discriminants_differ".to_owned()),
        source: Some("hmac".to_owned()),
        ..QueueFilter::default()
    };
    let filtered = queue(&s.app.db, &only, 50, 0).await.unwrap();
    assert_eq!(filtered.len(), 1);
    assert_eq!(filtered[0].case_id, collision.to_string());
    let elsewhere = QueueFilter {
        source: Some("stripe".to_owned()),
        ..QueueFilter::default()
    };
    assert!(
        queue(&s.app.db, &elsewhere, 50, 0)
            .await
            .unwrap()
            .is_empty()
    );
    let mut counts = counts_by_reason(&s.app.db, "open").await.unwrap();
    counts.sort();
    assert_eq!(
        counts,
        [
            ("discriminants_differ".to_owned(), 1),
            ("weak_match_critical".to_owned(), 1)
        ]
    );
    // Resolved cases leave the queue.
    let engine = s.engine().await;
    cases::resolve(&engine, request(weak, Resolution::Reject, "test refund"))
        .await
        .unwrap();
    assert_eq!(
        queue(&s.app.db, &QueueFilter::default(), 50, 0)
            .await
            .unwrap()
            .len(),
        1
    );
}

/// A request to the API with a token of `role` (the test server's own client
/// sends an admin token; these send their own).
async fn as_role(
    s: &Setup,
    role: unicity::auth::Role,
    method: reqwest::Method,
    path: &str,
    body: Option<serde_json::Value>,
) -> (u16, serde_json::Value) {
    let token = crate::support::app::issue_token(&s.app.db, role).await;
    let mut request = reqwest::Client::new()
        .request(method, format!("{}{path}", s.app.address))
        .bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("request sent");
    let status = response.status().as_u16();
    let json = response.json().await.unwrap_or(serde_json::Value::Null);
    (status, json)
}

#[tokio::test]
async fn over_http_support_reads_the_queue_but_only_finance_resolves_a_money_case() {
    use reqwest::Method;
    use unicity::auth::Role;
    let s = Setup::new().await;
    let (_, case_id, _) = s.weak_match_case().await;

    let (status, queue) = as_role(&s, Role::Support, Method::GET, "/api/cases", None).await;
    assert_eq!(status, 200, "{queue}");
    assert_eq!(queue["cases"][0]["case_id"], case_id.to_string());
    assert_eq!(queue["counts"][0]["reason"], "weak_match_critical");
    let path = format!("/api/cases/{case_id}");
    let (status, case) = as_role(&s, Role::Support, Method::GET, &path, None).await;
    assert_eq!(status, 200, "{case}");
    assert_eq!(case["critical"], true);
    assert!(case["reference"]["delivery_id"].is_string());

    let resolve = format!("/api/cases/{case_id}/resolve");
    let body = serde_json::json!({
        "resolution": "process_as_distinct",
        "note": "the provider lists two refunds",
        "authoritative_ref": "re_2",
    });
    for role in [Role::Support, Role::Engineer] {
        let (status, answer) = as_role(&s, role, Method::POST, &resolve, Some(body.clone())).await;
        assert_eq!(status, 403, "{role}: {answer}");
    }
    assert_eq!(s.case_column(case_id, "status").await, "open");

    let (status, answer) = as_role(
        &s,
        Role::Finance,
        Method::POST,
        &resolve,
        Some(body.clone()),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["resolution"], "process_as_distinct");
    s.downstream.wait_calls(2).await;
    let (status, again) = as_role(&s, Role::Finance, Method::POST, &resolve, Some(body)).await;
    assert_eq!(status, 409, "{again}");
    assert_eq!(again["code"], "case_already_resolved");
    let (_, queue) = as_role(&s, Role::Support, Method::GET, "/api/cases", None).await;
    assert_eq!(
        queue["cases"].as_array().unwrap().len(),
        0,
        "the queue drops it"
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(s.downstream.calls().len(), 2);
    let resolved_by = s.case_column(case_id, "resolved_by").await;
    assert!(resolved_by.starts_with("token:"), "{resolved_by}");
    assert!(resolved_by.contains("finance"), "{resolved_by}");
}

#[tokio::test]
async fn a_provider_operation_cited_once_cannot_justify_a_second_effect() {
    // Given a weak-match case processed as distinct citing re_provider_2
    let s = Setup::new().await;
    let (_, first_case, _) = s.weak_match_case().await;
    let engine = s.engine().await;
    cases::resolve(
        &engine,
        request(first_case, Resolution::ProcessAsDistinct, "a second refund"),
    )
    .await
    .expect("resolved");
    s.downstream.wait_calls(2).await;
    // When a third look-alike's case is processed as distinct citing the
    // same operation
    let third = s
        .app
        .post_signed("hmac", &refund("pay_case", 700, None))
        .await;
    assert_eq!(
        third.json["reason"], "weak_match_critical",
        "{}",
        third.json
    );
    let case_id: uuid::Uuid = third.json["case_id"].as_str().unwrap().parse().unwrap();
    let refused = cases::resolve(
        &engine,
        request(case_id, Resolution::ProcessAsDistinct, "yet another"),
    )
    .await;
    // Then it is refused, the case stays open and nothing more is applied
    assert!(
        matches!(refused, Err(CaseError::Refused(Refusal::OperationConsumed))),
        "{refused:?}"
    );
    assert_eq!(s.case_column(case_id, "status").await, "open");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(s.downstream.calls().len(), 2);
    assert_eq!(s.app.effects_for_operation("re_provider_2").await, 1);
}

#[tokio::test]
async fn over_http_a_cited_operation_padded_with_spaces_is_the_same_operation() {
    use reqwest::Method;
    // Given a weak-match case processed as distinct citing re_provider_2
    let s = Setup::new().await;
    let (_, first_case, _) = s.weak_match_case().await;
    let (status, body) = as_role(
        &s,
        Role::Finance,
        Method::POST,
        &format!("/api/cases/{first_case}/resolve"),
        Some(
            serde_json::json!({"resolution": "process_as_distinct", "note": "a second refund",
                    "authoritative_ref": "re_provider_2"}),
        ),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    s.downstream.wait_calls(2).await;
    // When a third look-alike's case is resolved over the API citing the
    // same operation with a space before and after it
    let third = s
        .app
        .post_signed("hmac", &refund("pay_case", 700, None))
        .await;
    let case_id = third.json["case_id"].as_str().expect("a case").to_owned();
    let (status, body) = as_role(
        &s,
        Role::Finance,
        Method::POST,
        &format!("/api/cases/{case_id}/resolve"),
        Some(
            serde_json::json!({"resolution": "process_as_distinct", "note": "yet another",
                    "authoritative_ref": " re_provider_2 "}),
        ),
    )
    .await;
    // Then it is refused as already consumed and nothing more is applied
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["code"], "operation_consumed", "{body}");
    assert_eq!(
        s.case_column(case_id.parse().unwrap(), "status").await,
        "open"
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(s.downstream.calls().len(), 2);
    assert_eq!(s.app.effects_for_operation("re_provider_2").await, 1);
}

/// A cited operation differs from another only by what no one sees (a
/// zero-width space, a Cyrillic letter that looks Latin): cited again so,
/// it justified a second refund for one operation. A provider's operation
/// id is printable ASCII: anything else is refused.
#[tokio::test]
async fn a_cited_operation_holding_characters_no_id_holds_is_refused_and_pays_nothing() {
    let s = Setup::new().await;
    let (_key, first_case, _delivery) = s.weak_match_case().await;
    let resolve = |reference: &str| {
        serde_json::json!({
            "resolution": "process_as_distinct",
            "note": "the provider lists two refunds",
            "authoritative_ref": reference,
        })
    };
    let cited = s
        .app
        .resolve(&first_case.to_string(), resolve("re_seen_1"))
        .await;
    assert_eq!(cited.status, 200, "{}", cited.json);
    s.downstream.wait_calls(2).await;
    for disguised in [
        "re_seen_1\u{200b}",
        "r\u{0435}_seen_1",
        "re_seen\u{00a0}1",
        "re_seen_1\u{0007}",
    ] {
        let another = s
            .app
            .post_signed("hmac", &refund("pay_case", 700, None))
            .await;
        let case_id = another.json["case_id"].as_str().expect("a case").to_owned();
        let refused = s.app.resolve(&case_id, resolve(disguised)).await;
        assert_eq!(refused.status, 400, "{disguised:?}: {}", refused.json);
        assert_eq!(
            refused.json["code"], "reference_not_an_id",
            "{}",
            refused.json
        );
        assert_eq!(
            s.case_column(case_id.parse().unwrap(), "status").await,
            "open"
        );
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(s.downstream.calls().len(), 2);
}

#[tokio::test]
async fn over_http_an_age_filter_out_of_range_is_a_clear_error_not_a_dropped_connection() {
    use reqwest::Method;
    // Given a case opened just now
    let s = Setup::new().await;
    let (_, case_id, _) = s.weak_match_case().await;
    let listed = |body: &serde_json::Value| -> Vec<String> {
        body["cases"]
            .as_array()
            .map(|cases| {
                cases
                    .iter()
                    .map(|c| c["case_id"].as_str().unwrap_or_default().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    // When the queue is asked for cases older than ages in and out of range
    for (age, expected) in [
        ("9223372036854775807", 400),
        ("-9223372036854775808", 400),
        ("-1", 400),
        ("3153600001", 400),
        ("0", 200),
        ("3600", 200),
    ] {
        let (status, body) = as_role(
            &s,
            Role::Support,
            Method::GET,
            &format!("/api/cases?older_than_secs={age}"),
            None,
        )
        .await;
        // Then each answers, in range with the cases that old, else with a
        // stable error
        assert_eq!(status, expected, "{age}: {body}");
        match (status, age) {
            (400, _) => assert_eq!(body["code"], "invalid_older_than_secs", "{body}"),
            (_, "0") => assert_eq!(listed(&body), vec![case_id.to_string()], "{body}"),
            _ => assert!(listed(&body).is_empty(), "{body}"),
        }
    }
}

#[tokio::test]
async fn a_second_look_alike_processed_as_distinct_must_cite_the_operation_it_is() {
    // Given two look-alikes of one refund, each held in a case, and the
    // first processed as distinct by a person who cited nothing
    let s = Setup::new().await;
    let (_, first_case, _) = s.weak_match_case().await;
    let second_case = s.another_look_alike().await;
    let engine = s.engine().await;
    let uncited = |case_id| Resolve {
        authoritative_ref: None,
        ..request(
            case_id,
            Resolution::ProcessAsDistinct,
            "the provider lists two",
        )
    };
    cases::resolve(&engine, uncited(first_case))
        .await
        .expect("resolved");
    s.downstream.wait_calls(2).await;
    // When another person processes the second as distinct citing nothing
    let refused = cases::resolve(&engine, uncited(second_case)).await;
    // Then it is refused, open, and nothing more is applied,
    assert!(
        matches!(refused, Err(CaseError::Refused(Refusal::CiteAnOperation))),
        "{refused:?}"
    );
    assert_eq!(s.case_column(second_case, "status").await, "open");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(s.downstream.calls().len(), 2);
    // and citing the provider's operation it is applies it.
    cases::resolve(
        &engine,
        request(
            second_case,
            Resolution::ProcessAsDistinct,
            "the provider lists three",
        ),
    )
    .await
    .expect("resolved citing re_provider_2");
    s.downstream.wait_calls(3).await;
}

#[tokio::test]
async fn two_processes_citing_the_same_operation_for_two_cases_apply_one_effect() {
    // Given two look-alike cases on one payment, each resolved at once by
    // another process, both citing the provider's operation re_provider_2
    let s = Setup::new().await;
    let (_, one_case, _) = s.weak_match_case().await;
    let other = s
        .app
        .post_signed("hmac", &refund("pay_case", 700, None))
        .await;
    let other_case: uuid::Uuid = other.json["case_id"].as_str().unwrap().parse().unwrap();
    let (one, two) = (s.engine().await, s.engine().await);
    let (a, b) = tokio::join!(
        cases::resolve(
            &one,
            request(one_case, Resolution::ProcessAsDistinct, "a second refund")
        ),
        cases::resolve(
            &two,
            request(other_case, Resolution::ProcessAsDistinct, "a second refund")
        ),
    );
    // Then one of them applies its effect, the other is refused
    let resolved = [&a, &b].iter().filter(|r| r.is_ok()).count();
    assert_eq!(resolved, 1, "{a:?} {b:?}");
    assert!(
        [&a, &b]
            .iter()
            .any(|r| matches!(r, Err(CaseError::Refused(Refusal::OperationConsumed)))),
        "{a:?} {b:?}"
    );
    s.downstream.wait_calls(2).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(s.downstream.calls().len(), 2);
    assert_eq!(s.app.effects_for_operation("re_provider_2").await, 1);
}

#[tokio::test]
async fn the_service_itself_refuses_a_money_case_to_a_role_that_may_not_resolve_it() {
    // Given a money case, and callers of every role
    let s = Setup::new().await;
    let (_, case_id, _) = s.weak_match_case().await;
    let engine = s.engine().await;
    for (name, role) in [("sue", Role::Support), ("eve", Role::Engineer)] {
        // When one that may not resolve money asks the service directly
        let id = operator(&s.app, name, role).await;
        let mut asked = request(case_id, Resolution::ProcessAsDistinct, "two refunds");
        asked.by = Principal {
            kind: PrincipalKind::Operator,
            id,
            name: name.to_owned(),
            role,
        };
        let refused = cases::resolve(&engine, asked).await;
        // Then it is refused and nothing is applied
        assert!(
            matches!(refused, Err(CaseError::Forbidden { critical: true })),
            "{role}: {refused:?}"
        );
    }
    // Nor does a caller who says more than the operator now is: ann,
    // demoted to support since she was let in.
    sea_orm::ConnectionTrait::execute_unprepared(
        &s.app.db,
        "UPDATE operators SET role = 'support' WHERE name = 'ann'",
    )
    .await
    .expect("ann demoted");
    let stale = cases::resolve(
        &engine,
        request(case_id, Resolution::ProcessAsDistinct, "two"),
    )
    .await;
    assert!(
        matches!(stale, Err(CaseError::Forbidden { critical: true })),
        "{stale:?}"
    );
    sea_orm::ConnectionTrait::execute_unprepared(
        &s.app.db,
        "UPDATE operators SET role = 'finance' WHERE name = 'ann'",
    )
    .await
    .expect("ann finance again");
    assert_eq!(s.case_column(case_id, "status").await, "open");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(s.downstream.calls().len(), 1);
    // And finance may
    cases::resolve(
        &engine,
        request(case_id, Resolution::Reject, "a test refund"),
    )
    .await
    .expect("finance resolves");
}

/// A person demoted while their resolution waits its turn for the writer
/// resolves nothing: the role that allows it is read in the transaction
/// that resolves, not before it.
#[tokio::test]
async fn a_resolution_that_waited_while_its_author_was_demoted_resolves_nothing() {
    // Given a money case, and ann of finance asking to resolve it
    let s = Setup::new().await;
    let (_, case_id, _) = s.weak_match_case().await;
    let engine = s.engine().await;
    // While an admin's transaction demoting her holds what the resolution
    // needs (SQLite: the database's write lock; PostgreSQL: the case's row)
    let demoting = AdminChange::begin(&s.url).await;
    if demoting.postgres {
        demoting
            .execute(&format!(
                "SELECT 1 FROM cases WHERE case_id = '{case_id}' FOR UPDATE"
            ))
            .await;
    }
    demoting
        .execute("UPDATE operators SET role = 'support' WHERE name = 'ann'")
        .await;
    let resolving = tokio::spawn(async move {
        cases::resolve(
            &engine,
            request(case_id, Resolution::ProcessAsDistinct, "two refunds"),
        )
        .await
    });
    // When the demotion commits once the resolution waits on it
    demoting.commit_once_waited_on().await;
    // Then she resolves nothing, and nothing is applied
    let outcome = resolving.await.expect("no panic");
    assert!(
        matches!(outcome, Err(CaseError::Forbidden { critical: true })),
        "{outcome:?}"
    );
    assert_eq!(s.case_column(case_id, "status").await, "open");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(s.downstream.calls().len(), 1);
}

/// An operator disabled while their comment and assignment wait their turn
/// for the writer writes neither: they are read again in the transaction
/// that writes, as a resolution's author is.
#[tokio::test]
async fn a_comment_and_an_assignment_that_waited_while_their_author_was_disabled_write_nothing() {
    // Given a case, and ann commenting on it and giving it back to nobody
    let s = Setup::new().await;
    let (_, case_id, _) = s.weak_match_case().await;
    let engine = s.engine().await;
    // While an admin's transaction disabling her holds her row (and, on
    // SQLite, the database's write lock)
    let disabling = AdminChange::begin(&s.url).await;
    disabling
        .execute("UPDATE operators SET enabled = false WHERE name = 'ann'")
        .await;
    let commenting = {
        let engine = engine.clone();
        tokio::spawn(async move {
            cases::comment(&engine, case_id, &ann(), "mine now".to_owned()).await
        })
    };
    let assigning =
        tokio::spawn(async move { cases::assign(&engine, case_id, None, &ann()).await });
    // When the change commits once they wait on it
    disabling.commit_once_waited_on().await;
    // Then neither is written
    let commented = commenting.await.expect("no panic");
    assert!(
        matches!(commented, Err(CaseError::NoLongerAllowed)),
        "{commented:?}"
    );
    let assigned = assigning.await.expect("no panic");
    assert!(
        matches!(assigned, Err(CaseError::NoLongerAllowed)),
        "{assigned:?}"
    );
    assert_eq!(s.app.journal_count("CaseCommented").await, 0);
    assert_eq!(s.app.journal_count("CaseAssigned").await, 0);
}

/// An operator disabled while a case is being given to them is not given
/// it: the assignee is read in the transaction that assigns.
#[tokio::test]
async fn a_case_given_to_an_operator_disabled_meanwhile_is_not_assigned() {
    let s = Setup::new().await;
    let (_, case_id, _) = s.weak_match_case().await;
    let engine = s.engine().await;
    operator(&s.app, "bob", Role::Support).await;
    let disabling = AdminChange::begin(&s.url).await;
    disabling
        .execute("UPDATE operators SET enabled = false WHERE name = 'bob'")
        .await;
    let assigning =
        tokio::spawn(async move { cases::assign(&engine, case_id, Some("bob"), &ann()).await });
    disabling.commit_once_waited_on().await;
    let assigned = assigning.await.expect("no panic");
    assert!(
        matches!(assigned, Err(CaseError::Refused(Refusal::NoSuchOperator))),
        "{assigned:?}"
    );
    assert_eq!(s.app.journal_count("CaseAssigned").await, 0);
}

/// Two people processing two look-alikes of one refund as distinct, each
/// without citing the provider's operation, at once, through writers that
/// commit each job alone (`group_commit = false`): the second must cite
/// one, as through the group-committing writer. PostgreSQL: SQLite has one
/// writer at a time whatever the mode.
#[tokio::test]
async fn two_uncited_distinct_resolutions_at_once_without_group_commit_apply_one() {
    let s = Setup::new().await;
    let (_, first_case, _) = s.weak_match_case().await;
    let second_case = s.another_look_alike().await;
    if !s.app.is_postgres() {
        return;
    }
    let one = s.engine_committing(Some(false)).await;
    let two = s.engine_committing(Some(false)).await;
    // While an admin's transaction keeps new effects waiting
    let holding = AdminChange::begin(&s.url).await;
    holding.execute("LOCK TABLE effects IN SHARE MODE").await;
    let uncited = |case_id| Resolve {
        authoritative_ref: None,
        ..request(case_id, Resolution::ProcessAsDistinct, "another refund")
    };
    let first = tokio::spawn({
        let request = uncited(first_case);
        async move { cases::resolve(&one, request).await }
    });
    let second = tokio::spawn({
        let request = uncited(second_case);
        async move { cases::resolve(&two, request).await }
    });
    // When it lets go once both resolutions wait
    holding.commit_once_waiting(2).await;
    // Then one applies and the other is asked to cite an operation
    let outcomes = [first.await.unwrap(), second.await.unwrap()];
    let refused = outcomes
        .iter()
        .filter(|o| matches!(o, Err(CaseError::Refused(Refusal::CiteAnOperation))))
        .count();
    assert_eq!(refused, 1, "{outcomes:?}");
    assert_eq!(
        s.app
            .count("SELECT COUNT(*) FROM effects WHERE key LIKE '%~case-%'")
            .await,
        1
    );
}

/// A provider's operation id is short; a reference as long as a form
/// allows is refused with a code saying so, the case left open, and the
/// same case resolves without one.
#[tokio::test]
async fn a_reference_too_long_to_be_an_operation_id_is_refused_and_the_case_stays_open() {
    let s = Setup::new().await;
    let (_key, case_id, _delivery) = s.weak_match_case().await;
    let long: String = (0..219)
        .map(|_| uuid::Uuid::new_v4().simple().to_string())
        .collect();
    let resolve = |reference: String| {
        serde_json::json!({
            "resolution": "process_as_distinct",
            "note": "the provider lists two refunds",
            "authoritative_ref": reference,
        })
    };
    let refused = s.app.resolve(&case_id.to_string(), resolve(long)).await;
    assert_eq!(refused.status, 400, "{}", refused.json);
    assert_eq!(
        refused.json["code"], "reference_too_long",
        "{}",
        refused.json
    );
    assert_eq!(s.case_column(case_id, "status").await, "open");
    // An empty one is no reference, not a long one: the case resolves.
    let blank = s
        .app
        .resolve(&case_id.to_string(), resolve(String::new()))
        .await;
    assert_eq!(blank.status, 200, "{}", blank.json);
    s.downstream.wait_calls(2).await;
}
