//! Unauthenticated floods: whoever knows a source's URL can send it anything,
//! as often as they like. What they leave in the append-only journal must stay
//! bounded, every refusal must still be counted, and valid deliveries must go
//! on being accepted.

use std::time::Duration;

use unicity::domain::journal::{JournalEvent, RejectionsAggregated};
use unicity::domain::rejection::{KEPT_VALUE_BYTES, MAX_HEADER_VALUE_BYTES};
use unicity::store::journal;

use crate::support::app::{TestApp, refund, spawn_app_with};
use crate::support::counts::Counts;

/// No rate limit on refusals, so that every request reaches the journal path.
const NO_REJECTION_LIMITS: &str =
    "[engine]\nclient_rejections_per_sec = 0\nsource_rejections_per_sec = 0\n";

/// Posts `body` to `slug` signed with a wrong secret, with `extra` headers.
async fn post_forged(
    app: &TestApp,
    slug: &str,
    body: &[u8],
    extra: &[(String, String)],
) -> reqwest::Response {
    let scheme = &app.source(slug).scheme;
    let now = chrono::Utc::now().timestamp();
    let mut headers = unicity::providers::signature::sign(scheme, "wrong-secret", "m", now, body)
        .expect("signable");
    headers.extend_from_slice(extra);
    let mut request = app
        .client
        .post(format!("{}/hooks/{slug}", app.address))
        .body(body.to_vec());
    for (name, value) in headers {
        request = request.header(name, value);
    }
    request.send().await.expect("request sent")
}

fn padding(bytes: usize) -> Vec<(String, String)> {
    vec![("x-padding".to_owned(), "p".repeat(bytes))]
}

async fn json(response: reqwest::Response) -> serde_json::Value {
    response.json().await.expect("a JSON answer")
}

/// Every journal event, read back through the journal reader.
async fn events(app: &TestApp) -> Vec<JournalEvent> {
    let mut all = Vec::new();
    let mut after = 0;
    loop {
        let page = journal::page_after(&app.db, after, 1000)
            .await
            .expect("journal reads");
        let Some(last) = page.last() else {
            return all;
        };
        after = last.position;
        all.extend(page.into_iter().map(|s| s.event));
    }
}

fn aggregates(events: &[JournalEvent]) -> Vec<&RejectionsAggregated> {
    events
        .iter()
        .filter_map(|e| match e {
            JournalEvent::RejectionsAggregated(a) => Some(a),
            _ => None,
        })
        .collect()
}

fn rejected(events: &[JournalEvent]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e, JournalEvent::DeliveryRejected(_)))
        .count()
}

/// Waits until the journal accounts for `expected` refusals (journaled one by
/// one, or counted in aggregates of `status`), or fails after 15 s.
async fn wait_accounted(app: &TestApp, expected: u64) -> Vec<JournalEvent> {
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let all = events(app).await;
        let counted: u64 = aggregates(&all).iter().map(|a| a.count).sum();
        let accounted = rejected(&all) as u64 + counted;
        if accounted >= expected {
            assert_eq!(accounted, expected, "more refusals accounted than sent");
            return all;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "only {accounted} of {expected} refusals accounted for"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn bad_signatures_with_large_headers_leave_a_bounded_trace() {
    let app = spawn_app_with(&format!(
        "{NO_REJECTION_LIMITS}rejections_journaled_per_window = 1000\n"
    ))
    .await;
    let body = refund("pay_flood", 100, Some("rr_flood"));
    let before = app.journal_count("DeliveryRejected").await;
    assert_eq!(before, 0);

    // 100 KB headers are refused before the body is read, the largest value
    // allowed is read and its signature refused: both leave a summary.
    for _ in 0..200 {
        let reply = post_forged(&app, "stripe", &body, &padding(100_000)).await;
        assert_eq!(reply.status().as_u16(), 431);
        let reply = json(reply).await;
        assert_eq!(reply["code"], "request_header_fields_too_large");
        assert!(reply["delivery_id"].is_string(), "journaled: {reply}");
    }
    let mut ids = Vec::new();
    for _ in 0..200 {
        let reply = post_forged(&app, "stripe", &body, &padding(MAX_HEADER_VALUE_BYTES)).await;
        assert_eq!(reply.status().as_u16(), 401);
        let reply = json(reply).await;
        assert_eq!(reply["code"], "invalid_signature");
        ids.push(reply["delivery_id"].as_str().expect("journaled").to_owned());
    }

    let rows = "FROM journal WHERE event_type = 'DeliveryRejected'";
    assert_eq!(app.count(&format!("SELECT COUNT(*) {rows}")).await, 400);
    let total = app
        .count(&format!(
            "SELECT CAST(SUM(LENGTH(CAST(data AS TEXT))) AS BIGINT) {rows}"
        ))
        .await;
    let largest = app
        .count(&format!(
            "SELECT CAST(MAX(LENGTH(CAST(data AS TEXT))) AS BIGINT) {rows}"
        ))
        .await;
    assert!(largest < 2048, "one rejection stored {largest} bytes");
    assert!(total < 400 * 2048, "400 rejections stored {total} bytes");

    // Nothing over the cap is stored, and the summary says what was cut.
    for event in events(&app).await {
        let JournalEvent::DeliveryRejected(e) = event else {
            continue;
        };
        assert!(e.header_bytes.unwrap_or(0) >= MAX_HEADER_VALUE_BYTES as u64);
        for (name, value) in &e.headers {
            assert!(value.len() <= KEPT_VALUE_BYTES + 32, "{name}: {value}");
        }
        let (_, padded) = e
            .headers
            .iter()
            .find(|(name, _)| name == "x-padding")
            .expect("the header's name is kept");
        assert!(padded.ends_with(" bytes)"), "{padded}");
    }
    let shown = app.delivery(&ids[0]).await;
    assert_eq!(shown.status, 200);
    assert_eq!(shown.json["status"], "rejected");
}

#[tokio::test]
async fn beyond_the_quota_rejections_are_counted_and_none_is_dropped() {
    let app = spawn_app_with(&format!(
        "{NO_REJECTION_LIMITS}rejections_journaled_per_window = 10\nrejection_window_secs = 1\n"
    ))
    .await;
    let body = refund("pay_count", 100, Some("rr_count"));
    let sent = 150;
    let mut with_id = 0;
    for _ in 0..sent {
        let reply = post_forged(&app, "github", &body, &padding(4096)).await;
        assert_eq!(reply.status().as_u16(), 401);
        with_id += usize::from(json(reply).await["delivery_id"].is_string());
    }

    let all = wait_accounted(&app, sent).await;
    let individual = rejected(&all);
    let aggregated = aggregates(&all);
    // Only what was journaled on its own can be looked up by id.
    assert_eq!(individual, with_id);
    let mut per_window = std::collections::BTreeMap::<i64, usize>::new();
    for event in &all {
        if let JournalEvent::DeliveryRejected(e) = event {
            *per_window.entry(e.received_at.timestamp()).or_default() += 1;
        }
    }
    assert!(
        per_window.values().all(|n| *n <= 10),
        "more than the quota journaled one by one: {per_window:?}"
    );
    assert!(!aggregated.is_empty(), "nothing was aggregated");
    for a in &aggregated {
        assert_eq!((a.reason.as_str(), a.status), ("invalid_signature", 401));
        assert_eq!(a.origin.source, "github");
        assert_eq!(a.window_secs, 1);
        assert!(a.bytes >= a.count * 4096, "{a:?}");
    }
}

#[tokio::test]
async fn refusals_past_a_client_rate_get_429_with_retry_after_and_are_counted() {
    let app = spawn_app_with(
        "[engine]\nclient_rejections_per_sec = 2\nrate_burst_secs = 1\nrejection_window_secs = 1\n",
    )
    .await;
    let body = refund("pay_rate", 100, Some("rr_rate"));
    let mut statuses = Vec::new();
    for _ in 0..12 {
        let reply = post_forged(&app, "hmac", &body, &[]).await;
        let status = reply.status().as_u16();
        if status == 429 {
            let retry = reply.headers().get("retry-after").expect("Retry-After");
            let secs: u64 = retry.to_str().unwrap().parse().expect("seconds");
            assert!(secs >= 1);
            let reply = json(reply).await;
            assert_eq!(reply["code"], "rate_limited");
            assert!(reply.get("delivery_id").is_none(), "{reply}");
        }
        statuses.push(status);
    }
    let limited = statuses.iter().filter(|s| **s == 429).count() as u64;
    assert!(limited >= 8, "{statuses:?}");
    assert_eq!(
        statuses.iter().filter(|s| **s == 401).count() as u64,
        12 - limited
    );

    let all = wait_accounted(&app, 12).await;
    let counted_429: u64 = aggregates(&all)
        .iter()
        .filter(|a| a.status == 429 && a.reason == "invalid_signature")
        .map(|a| a.count)
        .sum();
    assert_eq!(counted_429, limited);

    // A valid delivery from the same client is not a refusal: still accepted.
    let reply = app.post_signed("hmac", &body).await;
    assert_eq!(reply.status, 202, "{}", reply.json);
}

#[tokio::test]
async fn requests_past_a_source_rate_get_429_before_their_body_is_read() {
    let app = spawn_app_with(
        "[engine]\nsource_requests_per_sec = 3\nrate_burst_secs = 1\nrejection_window_secs = 1\n",
    )
    .await;
    let mut statuses = Vec::new();
    for i in 0..8 {
        let body = refund(&format!("pay_{i}"), 100, Some(&format!("rr_{i}")));
        statuses.push(app.post_signed("hmac", &body).await.status);
    }
    let limited = statuses.iter().filter(|s| **s == 429).count();
    assert!(limited >= 4, "{statuses:?}");
    assert!(
        statuses.iter().all(|s| *s == 202 || *s == 429),
        "{statuses:?}"
    );
    // Another source has its own budget.
    let reply = app
        .post_signed("github", &refund("pay_gh", 1, Some("rr_gh")))
        .await;
    assert_eq!(reply.status, 202, "{}", reply.json);

    let all = wait_accounted(&app, limited as u64).await;
    assert!(
        aggregates(&all)
            .iter()
            .all(|a| (a.reason.as_str(), a.status) == ("rate_limited", 429))
    );
}

#[tokio::test]
async fn valid_deliveries_are_accepted_during_a_flood_whose_trace_stays_within_the_quota() {
    // Default limits and quota (60 rejections journaled per source and window).
    let app = std::sync::Arc::new(spawn_app_with("").await);
    let mut flood = Vec::new();
    for _ in 0..6 {
        let app = app.clone();
        flood.push(tokio::spawn(async move {
            let body = refund("pay_forged", 1, Some("rr_forged"));
            let mut statuses = Vec::new();
            for _ in 0..50 {
                let reply = post_forged(&app, "hmac", &body, &padding(8000)).await;
                statuses.push(reply.status().as_u16());
            }
            statuses
        }));
    }
    for i in 0..40 {
        let body = refund(&format!("pay_ok_{i}"), 100, Some(&format!("rr_ok_{i}")));
        let reply = app.post_signed("hmac", &body).await;
        assert_eq!(reply.status, 202, "valid delivery {i}: {}", reply.json);
    }
    let mut statuses = Vec::new();
    for task in flood {
        statuses.extend(task.await.expect("flood task"));
    }
    assert!(
        statuses.iter().all(|s| *s == 401 || *s == 429),
        "{statuses:?}"
    );
    assert!(statuses.contains(&429), "the flood was never limited");
    let journaled = app.journal_count("DeliveryRejected").await;
    // The flood may straddle two windows.
    assert!(
        journaled <= 120,
        "{journaled} rejections journaled one by one"
    );
    assert_eq!(
        app.count("SELECT COUNT(*) FROM deliveries WHERE status <> 'rejected'")
            .await,
        40
    );
}
