//! An admin's day in a real browser (see `browser.rs`), a screenshot per
//! step: the admin adds an operator from the admin page and copies the
//! one-time link; the new operator opens it, chooses a password and signs
//! in with the role the admin gave.

use unicity::auth::Role;

use crate::support::app::spawn_app;
use crate::support::chromium::Browser;
use crate::support::forms::{PASSWORD, operator};

#[tokio::test]
async fn an_admin_adds_an_operator_in_the_browser_who_then_signs_in_with_the_link() {
    let app = spawn_app().await;
    operator(&app, "ada", Role::Admin).await;
    operator(&app, "eve", Role::Engineer).await;
    let Some(browser) = Browser::open(&app.address, "admin_pages").await else {
        return;
    };

    browser.sign_in("ada", PASSWORD).await;
    browser.visit("/admin").await;
    browser.screenshot("admin").await;
    browser
        .fill("form[action='/admin/operators'] input[name=name]", "nina")
        .await;
    browser
        .click_and_wait("form[action='/admin/operators'] button[type=submit]")
        .await;
    browser.screenshot("admin-link").await;
    assert!(
        browser.text().await.contains("nina was added as support"),
        "{}",
        browser.text().await
    );
    let link = browser
        .find("#secret")
        .await
        .text()
        .await
        .expect("the link reads");
    assert!(
        link.starts_with(&format!("{}/password/", app.address)),
        "{link}"
    );
    let row = browser
        .find("tr[data-operator='nina']")
        .await
        .text()
        .await
        .expect("row");
    assert!(row.contains("support") && row.contains("enabled"), "{row}");
    browser.sign_out().await;

    browser.visit_url(&link).await;
    browser.screenshot("choose-password").await;
    assert!(browser.text().await.contains("Choose your password, nina"));
    let password = "nina's own long password";
    browser.fill("input[name=password]", password).await;
    browser.fill("input[name=confirm]", password).await;
    browser
        .click_and_wait("form[action^='/password/'] button[type=submit]")
        .await;
    assert_eq!(browser.path().await, "/login");

    browser.sign_in("nina", password).await;
    browser.visit("/account").await;
    browser.screenshot("nina-account").await;
    let account = browser.text().await;
    assert!(
        account.contains("nina") && account.contains("support"),
        "{account}"
    );
    browser.sign_out().await;

    // An engineer reads the strategies and the audit trail of all this
    browser.sign_in("eve", PASSWORD).await;
    browser.visit("/strategies").await;
    browser.screenshot("engineer-strategies").await;
    assert!(browser.text().await.contains("Strategies"));
    browser.visit("/audit").await;
    browser.screenshot("engineer-audit").await;
    let audit = browser.text().await;
    for said in [
        "added operator nina as support",
        "set the password of nina",
        "signed in from",
    ] {
        assert!(audit.contains(said), "{said}: {audit}");
    }
    browser.close().await;
}
