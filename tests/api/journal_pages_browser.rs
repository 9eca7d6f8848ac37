//! An engineer reads the journal reports in a real browser (see
//! `browser.rs`), a screenshot per step, at 1024 px without scrolling
//! sideways: from the Strategies page to field stability, filtered by
//! source, then to observe mode for the observed source, and on to a
//! delivery it links.

use unicity::auth::Role;

use crate::observe::legacy_source;
use crate::support::app::{refund, spawn_app_with};
use crate::support::chromium::Browser;
use crate::support::counts::Counts;
use crate::support::forms::{PASSWORD, operator};
use crate::support::processes::{cli, finished};

#[tokio::test]
async fn an_engineer_goes_from_the_strategies_page_to_both_journal_reports_and_a_delivery() {
    let app = spawn_app_with(&legacy_source("observe", "")).await;
    // A journal: a refund and its retry and a second refund on one payment
    // (signed source), and on the observed source a refund sent twice and
    // one with a long payment id the legacy handler never applied.
    for (reference, amount) in [("rr_wb1", 700), ("rr_wb1", 700), ("rr_wb2", 900)] {
        let reply = app
            .post_signed("hmac", &refund("pay_wb1", amount, Some(reference)))
            .await;
        assert!(reply.status < 300, "{}", reply.json);
    }
    let body = refund("pay_wb2", 500, Some("rr_wb3"));
    for _ in 0..2 {
        app.post_raw("legacy", body.clone(), &[]).await;
    }
    let long = "pay_".to_owned() + &"x9".repeat(60);
    app.post_raw("legacy", refund(&long, 700, Some("rr_wb4")), &[])
        .await;
    app.wait_applied(4).await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("legacy.csv");
    std::fs::write(&log, "resource,amount\npay_wb2,500\npay_wb2,500\n").unwrap();
    let mut import = cli(&app.database_url, &legacy_source("observe", ""), dir.path());
    import
        .args(["observe", "import", "--source", "legacy"])
        .arg(&log);
    finished(import).await;
    operator(&app, "eve", Role::Engineer).await;
    let Some(browser) = Browser::open(&app.address, "journal_pages").await else {
        return;
    };
    browser.sign_in("eve", PASSWORD).await;
    browser.width(1024).await;
    let mut wide = Vec::new();

    // From the Strategies page to field stability, for the signed source,
    browser.visit("/strategies").await;
    browser
        .click_and_wait("#journal-reports a[href='/strategies/fields']")
        .await;
    browser.screenshot("1024-fields-all").await;
    browser
        .click("select[name=source] option[value=hmac]")
        .await;
    browser
        .click_and_wait("form[action='/strategies/fields'] button")
        .await;
    browser.screenshot("1024-fields-hmac").await;
    assert!(browser.path().await.contains("source=hmac"));
    let text = browser.text().await;
    assert!(text.contains("volatile: changes between retries"), "{text}");
    assert!(text.contains("$.refund_reference"), "{text}");
    if browser.overflow().await > 0 {
        wide.push(format!("fields: {} px", browser.overflow().await));
    }

    // then to observe mode for the observed source,
    browser.visit("/strategies").await;
    browser
        .click_and_wait("#journal-reports a[href='/strategies/observe']")
        .await;
    browser.screenshot("1024-observe-choose").await;
    assert!(browser.text().await.contains("Choose a source"));
    browser
        .click("select[name=source] option[value=legacy]")
        .await;
    browser
        .click_and_wait("form[action='/strategies/observe'] button")
        .await;
    browser.screenshot("1024-observe-legacy").await;
    let text = browser.text().await;
    assert!(text.contains("pay_wb2"), "{text}");
    assert!(text.contains(&long), "{text}");
    if browser.overflow().await > 0 {
        wide.push(format!("observe: {} px", browser.overflow().await));
    }

    // and on to the delivery behind the double refund.
    browser
        .click_and_wait("#twice ~ table a[href^='/deliveries/']")
        .await;
    browser.screenshot("1024-delivery").await;
    assert!(browser.path().await.starts_with("/deliveries/"));
    assert!(browser.text().await.contains("pay_wb2"));
    assert!(wide.is_empty(), "{wide:?}");
    browser.close().await;
}
