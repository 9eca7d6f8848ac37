//! The queue, a money case and the dashboard in a real browser (see
//! `browser.rs`), with a screenshot of every page: support reads the case
//! and cannot resolve it; finance resolves it through the form; the
//! downstream receives exactly one more refund and the queue empties.

use unicity::auth::Role;

use crate::support::chromium::Browser;
use crate::support::forms::{PASSWORD, operator};
use crate::support::pages::Pages;

#[tokio::test]
async fn finance_resolves_a_weak_match_refund_in_the_browser_and_one_more_refund_is_made() {
    let p = Pages::new().await;
    let case = p.money_case("pay_browser").await;
    operator(&p.app, "sue", Role::Support).await;
    operator(&p.app, "fin", Role::Finance).await;
    let Some(browser) = Browser::open(&p.app.address, "case_pages").await else {
        return;
    };

    browser.sign_in("sue", PASSWORD).await;
    browser.visit("/cases").await;
    browser.screenshot("queue").await;
    let queue = browser.text().await;
    assert!(queue.contains("weak_match_critical 1"), "{queue}");
    // The queue by keyboard: j marks the first case, o opens it
    assert!(queue.contains("Keys: j next case"), "{queue}");
    browser.press('j').await;
    let marked = browser.find("table.queue tr[aria-current='true'] a").await;
    assert_eq!(
        marked.attr("href").await.expect("href").as_deref(),
        Some(format!("/cases/{case}").as_str())
    );
    browser.press_and_wait('o').await;
    assert_eq!(browser.path().await, format!("/cases/{case}"));
    let page = browser.text().await;
    browser.screenshot("case-support").await;
    assert!(page.contains("Amounts and what tells them apart"), "{page}");
    assert!(page.contains("Only finance or an admin can resolve this case"));
    // Amounts read as money, in their currency's decimals, on both sides
    assert!(page.contains("amount 7.00 EUR 7.00 EUR"), "{page}");
    // A time, written in UTC, shows the viewer's own time on hover
    let title = browser
        .find("time[datetime]")
        .await
        .attr("title")
        .await
        .expect("the title reads")
        .unwrap_or_default();
    assert!(
        title.contains(" UTC · ") && title.ends_with("your time"),
        "{title}"
    );
    assert!(!browser.html().await.contains("form_token"));
    browser.sign_out().await;

    browser.sign_in("fin", PASSWORD).await;
    browser.visit(&format!("/cases/{case}")).await;
    browser.screenshot("case-finance").await;
    browser
        .click("input[name=resolution][value=process_as_distinct]")
        .await;
    browser
        .fill("textarea[name=note]", "the provider lists two refunds")
        .await;
    browser.fill("input[name=authoritative_ref]", "re_2").await;
    browser
        .click_and_wait("form.resolve button[type=submit]")
        .await;
    assert_eq!(browser.path().await, format!("/cases/{case}?done=resolved"));
    browser.screenshot("case-resolved").await;
    p.downstream.wait_calls(2).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(p.downstream.calls().len(), 2, "exactly one more refund");

    browser.visit("/cases").await;
    assert!(browser.text().await.contains("No open case matches"));
    browser.screenshot("queue-empty").await;
    browser.visit("/dashboard").await;
    assert!(browser.html().await.contains("<svg"));
    browser.screenshot("dashboard").await;
    browser.close().await;
}

#[tokio::test]
async fn no_page_scrolls_sideways_in_a_window_1024_pixels_wide() {
    let p = Pages::new().await;
    let case = p.money_case("pay_narrow").await;
    operator(&p.app, "ada", Role::Admin).await;
    let Some(browser) = Browser::open(&p.app.address, "narrow_pages").await else {
        return;
    };
    browser.sign_in("ada", PASSWORD).await;
    browser.width(1024).await;
    let delivery = p.app.get(&format!("/api/cases/{case}")).await.json["delivery"]["delivery_id"]
        .as_str()
        .expect("the case's delivery")
        .to_owned();
    let mut wide = Vec::new();
    for path in [
        "/deliveries".to_owned(),
        "/deliveries?q=pay_narrow".to_owned(),
        format!("/deliveries/{delivery}"),
        "/cases".to_owned(),
        format!("/cases/{case}"),
        "/dashboard".to_owned(),
        "/strategies".to_owned(),
        "/audit".to_owned(),
        "/admin".to_owned(),
        "/account".to_owned(),
        "/nowhere".to_owned(),
    ] {
        browser.visit(&path).await;
        let name = path.trim_start_matches('/').replace(['/', '?', '='], "-");
        browser.screenshot(&format!("1024-{name}")).await;
        let overflow = browser.overflow().await;
        if overflow > 0 {
            wide.push(format!("{path}: {overflow} px too wide"));
        }
    }
    assert!(wide.is_empty(), "{wide:#?}");
    browser.close().await;
}
