//! The back-office in a real browser (see `browser.rs`): what operators of
//! each role see and do, page by page, with a screenshot of every page.

use unicity::auth::Role;

use actix_web::{App, HttpResponse, HttpServer, web};

use crate::support::app::{Reply, TestApp, refund, spawn_app, spawn_app_with};
use crate::support::chromium::Browser;
use crate::support::counts::Counts;
use crate::support::downstream::{Behaviour, Downstream};
use crate::support::forms::{PASSWORD, operator};

#[tokio::test]
async fn each_role_signs_in_sees_its_navigation_and_signs_out() {
    let app = spawn_app().await;
    let Some(browser) = Browser::open(&app.address, "sign_in").await else {
        return;
    };
    browser.visit("/account").await;
    assert_eq!(
        browser.path().await,
        "/login?next=%2Faccount",
        "anonymous is sent to sign in, and back to the page after"
    );
    browser.screenshot("login").await;
    let login = browser.html().await;
    assert!(
        login.contains(r#"<script src="/static/app.js""#) && !login.contains("<script>"),
        "scripts come from /static only (the CSP allows no inline script)"
    );

    for role in Role::ALL {
        let name = format!("{role}-operator");
        operator(&app, &name, role).await;
        browser.sign_in(&name, PASSWORD).await;
        browser.visit("/account").await;
        let nav = browser.find("header nav").await.text().await.expect("nav");
        assert!(nav.contains(&format!("{name} ({role})")), "{nav}");
        assert_eq!(nav.contains("Operators"), role == Role::Admin, "{nav}");
        assert_eq!(
            nav.contains("Strategies"),
            matches!(role, Role::Engineer | Role::Admin),
            "{nav}"
        );
        assert!(browser.text().await.contains(&format!("Role: {role}")));
        browser.screenshot(&format!("account-{role}")).await;
        if role == Role::Engineer {
            app.post_signed("hmac", &refund("pay_ui_st", 300, Some("rr_ui_st")))
                .await;
            browser.visit("/strategies").await;
            assert!(browser.text().await.contains("norefid-refund-ref@1"));
            browser.screenshot("strategies").await;
            browser
                .fill(
                    "textarea[name=candidate]",
                    include_str!("../../src/bin/unicity-bench/candidate-payment-only.toml"),
                )
                .await;
            browser
                .click_and_wait("form[action='/strategies/replay'] button[type=submit]")
                .await;
            assert!(browser.text().await.contains("Deliveries replayed"));
            browser.screenshot("strategies-replay").await;
            browser.visit("/dashboard").await;
            assert!(browser.text().await.contains("Decided on a strong key"));
            browser.screenshot("dashboard-headline").await;
        }
        browser.sign_out().await;
        assert_eq!(browser.path().await, "/login");
        browser.visit("/account").await;
        assert_eq!(
            browser.path().await,
            "/login?next=%2Faccount",
            "signed out for good"
        );
    }
    // A link followed before signing in leads back to its page after.
    operator(&app, "back-operator", Role::Support).await;
    browser.visit("/cases?status=all").await;
    assert_eq!(browser.path().await, "/login?next=%2Fcases%3Fstatus%3Dall");
    browser.fill("input[name=name]", "back-operator").await;
    browser.fill("input[name=password]", PASSWORD).await;
    browser
        .click_and_wait("form[action='/login'] button[type=submit]")
        .await;
    assert_eq!(browser.path().await, "/cases?status=all");
    browser.close().await;
}

/// What support is asked about: a refund of `pay_ui` applied once and its
/// retry ignored; a delivery carrying script in a value and a field name;
/// and two equal refunds of `pay_case`, the second held as a money case.
struct Story {
    app: TestApp,
    downstream: Downstream,
    first: String,
    ignored: String,
    hostile: String,
    case_id: String,
}

const XSS_VALUE: &str = "<img src=x onerror=alert('value')>";
const XSS_FIELD: &str = "<script>alert('field')</script>";

impl Story {
    async fn new() -> Self {
        let downstream = Downstream::start(Behaviour::Apply { delay_ms: 0 }).await;
        let app = spawn_app_with(&downstream.sink_toml(2000)).await;
        let applied = app
            .post_signed("hmac", &refund("pay_ui", 1250, Some("rr_ui_1")))
            .await;
        assert_eq!(applied.json["decision"], "process", "{}", applied.json);
        downstream.wait_calls(1).await;
        app.wait_applied(1).await;
        let retry = app
            .post_signed("hmac", &refund("pay_ui", 1250, Some("rr_ui_1")))
            .await;
        assert_eq!(retry.json["decision"], "ignore", "{}", retry.json);

        let mut body: serde_json::Value =
            serde_json::from_slice(&refund("pay_xss", 90, Some("rr_xss"))).expect("json");
        body["note"] = XSS_VALUE.into();
        body[XSS_FIELD] = "field name".into();
        let hostile = app
            .post_signed("open", &serde_json::to_vec(&body).expect("json"))
            .await;
        assert_eq!(hostile.json["decision"], "process", "{}", hostile.json);

        let original = app
            .post_signed("hmac", &refund("pay_case", 700, None))
            .await;
        assert_eq!(original.json["decision"], "process", "{}", original.json);
        downstream.wait_calls(3).await;
        app.wait_applied(3).await;
        let twin = app
            .post_signed("hmac", &refund("pay_case", 700, None))
            .await;
        assert_eq!(twin.json["decision"], "reconcile", "{}", twin.json);
        let id = |reply: &Reply, field: &str| reply.json[field].as_str().expect(field).to_owned();
        Self {
            first: id(&applied, "delivery_id"),
            ignored: id(&retry, "delivery_id"),
            hostile: id(&hostile, "delivery_id"),
            case_id: id(&twin, "case_id"),
            app,
            downstream,
        }
    }
}

/// A page of another site (another origin) with a form that posts a
/// resolution to Unicity, as a forged request would.
async fn foreign_site(target: &str) -> String {
    let page = format!(
        r#"<!doctype html><title>Win a prize</title>
<form method="post" action="{target}">
<input type="hidden" name="resolution" value="process_as_distinct">
<input type="hidden" name="note" value="forged">
<button type="submit" id="go">Claim</button></form>"#
    );
    let server = HttpServer::new(move || {
        let page = page.clone();
        App::new().route(
            "/",
            web::get().to(move || {
                let page = page.clone();
                async move { HttpResponse::Ok().content_type("text/html").body(page) }
            }),
        )
    })
    .workers(1)
    .bind("127.0.0.1:0")
    .expect("foreign site binds");
    let port = server.addrs()[0].port();
    tokio::spawn(server.run());
    format!("http://127.0.0.1:{port}/")
}

#[tokio::test]
async fn support_finds_by_payment_id_why_a_refund_was_ignored_and_hostile_input_stays_text() {
    let story = Story::new().await;
    for (name, role) in [
        ("sue", Role::Support),
        ("fin", Role::Finance),
        ("ada", Role::Admin),
    ] {
        operator(&story.app, name, role).await;
    }
    let Some(browser) = Browser::open(&story.app.address, "support").await else {
        return;
    };

    // "Why was my second refund on pay_ui ignored?"
    browser.sign_in("sue", PASSWORD).await;
    browser.visit("/deliveries").await;
    browser.fill("input[name=q]", "pay_ui").await;
    browser
        .click_and_wait("form.search button[type=submit]")
        .await;
    browser.screenshot("search").await;
    let rows = browser.find_all("main table tbody tr").await;
    assert_eq!(rows.len(), 2, "both deliveries of pay_ui, nothing else");
    browser
        .click_and_wait(&format!("a[href='/deliveries/{}']", story.ignored))
        .await;
    browser.screenshot("delivery-ignored").await;
    let sentence = browser.find("#sentence").await.text().await.expect("text");
    assert!(sentence.to_lowercase().contains("ignored"), "{sentence}");
    browser
        .find(&format!("#sentence a[href='/deliveries/{}']", story.first))
        .await;

    // Script from a webhook is shown as text and never runs.
    browser
        .visit(&format!("/deliveries/{}", story.hostile))
        .await;
    browser.screenshot("delivery-hostile").await;
    assert_eq!(browser.alert().await, None, "no script ran");
    let text = browser.text().await;
    assert!(
        text.contains(XSS_VALUE) && text.contains(XSS_FIELD),
        "shown as text"
    );
    assert!(browser.find_all("main img").await.is_empty());
    browser.visit("/deliveries?q=pay_xss").await;
    assert_eq!(browser.alert().await, None);
    browser.sign_out().await;

    // A form on another site cannot resolve a case with finance's session.
    browser.sign_in("fin", PASSWORD).await;
    let target = format!("{}/cases/{}/resolve", story.app.address, story.case_id);
    browser.visit_url(&foreign_site(&target).await).await;
    browser.click_and_wait("#go").await;
    browser.screenshot("forged-post").await;
    let refused = browser.text().await;
    assert!(
        refused.contains("403") || refused.to_lowercase().contains("refused"),
        "{refused}"
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(
        story.downstream.calls().len(),
        3,
        "no refund from a forged post"
    );
    assert_eq!(
        story
            .app
            .count(&format!(
                "SELECT COUNT(*) FROM cases WHERE case_id = '{}' AND status = 'open'",
                story.case_id
            ))
            .await,
        1
    );
    browser.visit("/dashboard").await;
    browser.screenshot("dashboard").await;
    browser.sign_out().await;

    browser.sign_in("ada", PASSWORD).await;
    browser.visit("/admin").await;
    browser.screenshot("admin").await;
    assert!(browser.text().await.contains("sue"));
    browser.close().await;
}
