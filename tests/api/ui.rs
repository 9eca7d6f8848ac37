//! The back-office in a real browser (see `browser.rs`): what operators of
//! each role see and do, page by page, with a screenshot of every page.

use secrecy::SecretString;
use unicity::auth::Role;
use unicity::domain::journal::Actor;
use unicity::services::access;

use crate::browser::Browser;
use crate::helpers::{TestApp, spawn_app};

const PASSWORD: &str = "a long enough password";

async fn operator(app: &TestApp, name: &str, role: Role) {
    access::create_operator(
        &app.db,
        name,
        role,
        SecretString::from(PASSWORD),
        Actor::Cli,
    )
    .await
    .expect("operator created");
}

#[tokio::test]
async fn each_role_signs_in_sees_its_navigation_and_signs_out() {
    let app = spawn_app().await;
    let Some(browser) = Browser::open(&app.address, "sign_in").await else {
        return;
    };
    browser.visit("/account").await;
    assert_eq!(
        browser.path().await,
        "/login",
        "anonymous is sent to sign in"
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
        assert!(browser.text().await.contains(&format!("Role: {role}")));
        browser.screenshot(&format!("account-{role}")).await;
        browser.sign_out().await;
        assert_eq!(browser.path().await, "/login");
        browser.visit("/account").await;
        assert_eq!(browser.path().await, "/login", "signed out for good");
    }
    browser.close().await;
}
