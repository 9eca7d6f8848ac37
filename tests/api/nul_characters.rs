//! U+0000 sent to the back office and the API, as `%00` in a path, a query
//! or a form: PostgreSQL refuses any text holding it, which answered a
//! sign-in, a search or a filter with a 503 "storage unavailable" there and
//! with an answer on SQLite. Both backends now refuse such a request with a
//! 400 before anything reads it; the same request without it is answered.
//! Webhooks are not refused for it: a body is kept as bytes (a JSON body
//! holding U+0000 is quarantined, `hostile.rs`).

use reqwest::StatusCode;
use serde_json::json;
use unicity::auth::Role;

use crate::support::app::spawn_app;
use crate::support::counts::Counts;
use crate::support::forms::{FormClient, PASSWORD, operator, signed_in};
use crate::support::pages::Pages;

const CASE_ID: &str = "0190f0e0-0000-7000-8000-000000000000";

#[tokio::test]
async fn a_path_query_or_form_holding_a_nul_character_is_refused_with_a_400_on_every_backend() {
    let app = spawn_app().await;
    operator(&app, "sam", Role::Support).await;

    // Each pair: the request with %00, and the same one without.
    let api = [
        ("/api/deliveries?q=a%00b", "/api/deliveries?q=ab"),
        (
            "/api/deliveries?q=pay_nul%00*",
            "/api/deliveries?q=pay_nul*",
        ),
        ("/api/deliveries?source=a%00b", "/api/deliveries?source=ab"),
        (
            "/api/deliveries?event_type=a%00b",
            "/api/deliveries?event_type=ab",
        ),
        ("/api/cases?assignee=a%00b", "/api/cases?assignee=ab"),
    ]
    .map(|(nul, plain)| (nul.to_owned(), plain.to_owned()));
    let case = (
        format!("/api/cases/{CASE_ID}%00"),
        format!("/api/cases/{CASE_ID}"),
    );
    for (nul, plain) in api.iter().chain([&case]) {
        let refused = app.get(nul).await;
        assert_eq!(refused.status, 400, "{nul}: {}", refused.json);
        assert_eq!(refused.json["code"], "nul_character", "{nul}");
        let answered = app.get(plain).await;
        assert_ne!(answered.status, 400, "{plain}: {}", answered.json);
        assert!(answered.status < 500, "{plain}: {}", answered.json);
    }

    let mut eve = signed_in(&app, "eve", Role::Engineer).await;
    let pages = [
        ("/deliveries?q=a%00b", "/deliveries?q=ab"),
        ("/cases?assignee=a%00b", "/cases?assignee=ab"),
        ("/audit?who=a%00b", "/audit?who=ab"),
        (
            &format!("/cases/{CASE_ID}%00")[..],
            &format!("/cases/{CASE_ID}")[..],
        ),
    ];
    for (nul, plain) in pages {
        let refused = eve.get(nul).await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{nul}");
        assert!(refused.body.contains("U+0000"), "{nul}: {}", refused.body);
        let answered = eve.get(plain).await;
        assert!(
            answered.status.is_success() || answered.status == StatusCode::NOT_FOUND,
            "{plain}: {}",
            answered.status
        );
    }

    // A sign-in whose name holds it stores no session and is refused, where
    // the right name signs in.
    let sessions = app.sessions().await;
    let mut browser = FormClient::new(&app);
    let csrf = browser.csrf("/login").await;
    let refused = browser
        .post(
            "/login",
            &[
                ("csrf", &csrf),
                ("name", "sam\u{0}"),
                ("password", PASSWORD),
            ],
        )
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.body);
    assert_eq!(app.sessions().await, sessions);
    let signed = browser.login("sam", PASSWORD).await;
    assert_eq!(signed.status, StatusCode::SEE_OTHER, "{}", signed.body);
}

#[tokio::test]
async fn a_webhook_is_not_refused_for_the_text_percent_zero_zero() {
    let app = spawn_app().await;
    // "%00" in a JSON string is three characters, not U+0000.
    let body = serde_json::to_vec(&json!({
        "type": "refund.created",
        "payment_id": "pay_100%00",
        "amount": 900,
        "currency": "EUR",
        "refund_reference": "rr_%00",
    }))
    .unwrap();
    let reply = app.post_signed("hmac", &body).await;
    assert_eq!(reply.status, 202, "{}", reply.json);
    assert_eq!(reply.json["decision"], "process", "{}", reply.json);
}

#[tokio::test]
async fn a_resolution_holding_a_nul_character_is_refused_and_leaves_the_case_open() {
    // Through the API, JSON escapes it: on PostgreSQL the resolution passed
    // its checks and failed at the commit with a 503.
    let p = Pages::new().await;
    let case = p.money_case("pay_nul_resolve").await;
    let refused = p
        .app
        .resolve(
            &case,
            json!({
                "resolution": "process_as_distinct",
                "note": "the provider lists two",
                "authoritative_ref": "re_\u{0}2",
            }),
        )
        .await;
    assert_eq!(refused.status, 400, "{}", refused.json);
    assert_eq!(refused.json["code"], "nul_character", "{}", refused.json);
    // A backslash before the text `u0000` is no NUL.
    let resolved = p
        .app
        .resolve(
            &case,
            json!({
                "resolution": "process_as_distinct",
                "note": "the provider lists two: \\u0000",
                "authoritative_ref": "re_2",
            }),
        )
        .await;
    assert_eq!(resolved.status, 200, "{}", resolved.json);
}

#[tokio::test]
async fn a_nul_character_is_refused_whatever_content_type_the_body_claims() {
    // actix's JSON extractor also reads `text/json` and `*/*+json`: a check
    // made only for `application/json` let U+0000 through to the commit.
    let p = Pages::new().await;
    let case = p.money_case("pay_nul_types").await;
    for kind in [
        "text/json",
        "application/merge-patch+json",
        "Application/JSON",
    ] {
        let refused = p
            .app
            .client
            .post(format!("{}/api/cases/{case}/resolve", p.app.address))
            .header("content-type", kind)
            .body(
                json!({
                    "resolution": "process_as_distinct",
                    "note": "the provider lists two",
                    "authoritative_ref": "re_\u{0}2",
                })
                .to_string(),
            )
            .send()
            .await
            .expect("request sent");
        assert_eq!(refused.status(), StatusCode::BAD_REQUEST, "{kind}");
        let body: serde_json::Value = refused.json().await.expect("json");
        assert_eq!(body["code"], "nul_character", "{kind}: {body}");
    }
    // The case is still open: none of them resolved it.
    let shown = p.app.get(&format!("/api/cases/{case}")).await;
    assert_eq!(shown.json["status"], "open", "{}", shown.json);
}
