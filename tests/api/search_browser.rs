//! A support person's day in a real browser (see `browser.rs`), a
//! screenshot a step: a payment id typed in capitals, a mistyped one and
//! what was meant, the beginning of a payment id, how many deliveries it
//! matches, a page forward and back, then the ignored duplicate and why it
//! was ignored, and its first reception.

use unicity::auth::Role;

use crate::support::app::{id_of, refund};
use crate::support::chromium::Browser;
use crate::support::counts::Counts;
use crate::support::forms::{PASSWORD, operator};
use crate::support::pages::Pages;

/// The ids of the deliveries the result table links to, in order.
async fn listed(browser: &Browser) -> Vec<String> {
    let mut ids = Vec::new();
    for link in browser
        .find_all("table.results a[href^='/deliveries/']")
        .await
    {
        let href = link.attr("href").await.expect("href").unwrap_or_default();
        ids.push(href.trim_start_matches("/deliveries/").to_owned());
    }
    ids
}

/// Types `q` in the search box and searches.
async fn search(browser: &Browser, q: &str) {
    browser.fill("input[name=q]", q).await;
    browser
        .click_and_wait("form.search button[type=submit]")
        .await;
}

#[tokio::test]
async fn support_finds_a_refund_by_its_payment_pages_through_and_reads_why_a_duplicate_was_ignored()
{
    // A refund the downstream applied, the provider's retry of it, and 52
    // refunds of the day's other payments
    let p = Pages::new().await;
    let body = refund("pay_walk_day_01", 1500, Some("rr_walk_day"));
    let first = p.app.post_signed("hmac", &body).await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    p.downstream.wait_calls(1).await;
    p.app.wait_applied(1).await;
    let retry = p.app.post_signed("hmac", &body).await;
    assert_eq!(
        retry.json["reason"], "duplicate_of_applied",
        "{}",
        retry.json
    );
    let (first, retry) = (id_of(&first), id_of(&retry));
    for i in 2..54 {
        let other = refund(&format!("pay_walk_day_{i:02}"), 100, Some("rr_other"));
        let reply = p.app.post_raw("open", other, &[]).await;
        assert_eq!(reply.status, 202, "{}", reply.json);
    }
    operator(&p.app, "sue", Role::Support).await;
    let Some(browser) = Browser::open(&p.app.address, "support_day").await else {
        return;
    };

    // Support signs in and opens the search
    browser.sign_in("sue", PASSWORD).await;
    browser.visit("/deliveries").await;
    browser.screenshot("1-search").await;
    let help = browser
        .find("#search-help")
        .await
        .text()
        .await
        .expect("help");
    assert!(
        help.contains("End with * to find every id that starts with"),
        "{help}"
    );
    assert!(help.contains("found whole and exactly as stored"), "{help}");

    // The payment id as the customer wrote it, in capitals
    search(&browser, "PAY_WALK_DAY_01").await;
    browser.screenshot("2-payment-in-capitals").await;
    assert_eq!(listed(&browser).await, [retry.clone(), first.clone()]);
    assert!(browser.text().await.contains("2 deliveries match."));

    // Mistyped, one character too many: nothing, but what was meant
    search(&browser, "pay_walk_day_011").await;
    browser.screenshot("3-did-you-mean").await;
    let page = browser.text().await;
    assert!(
        page.contains("No match for pay_walk_day_011; did you mean:"),
        "{page}"
    );
    browser
        .click_and_wait("ul.suggestions a[href='/deliveries?q=pay_walk_day_01']")
        .await;
    assert_eq!(browser.path().await, "/deliveries?q=pay_walk_day_01");
    assert_eq!(listed(&browser).await, [retry.clone(), first.clone()]);

    // The beginning the day's payments share: 54 deliveries, 50 a page
    search(&browser, "pay_walk_day*").await;
    browser.screenshot("4-prefix").await;
    assert!(browser.text().await.contains("54 deliveries match."));
    let page_1 = listed(&browser).await;
    assert_eq!(page_1.len(), 50);
    assert!(browser.find_all("a[rel=prev]").await.is_empty());

    // The next page holds the rest, the oldest last: the first reception
    browser.click_and_wait("a[rel=next]").await;
    browser.screenshot("5-next-page").await;
    assert!(browser.text().await.contains("54 deliveries match."));
    let page_2 = listed(&browser).await;
    assert_eq!(page_2.len(), 4);
    assert_eq!(page_2.last(), Some(&first));
    assert!(page_2.iter().all(|id| !page_1.contains(id)));
    assert!(browser.find_all("a[rel=next]").await.is_empty());

    // and back: the same first page
    browser.click_and_wait("a[rel=prev]").await;
    browser.screenshot("6-previous-page").await;
    assert_eq!(listed(&browser).await, page_1);
    assert!(browser.find_all("a[rel=prev]").await.is_empty());

    // The ignored duplicate: why it was ignored, and its first reception
    search(&browser, "pay_walk_day_01").await;
    browser
        .click_and_wait(&format!("table.results a[href='/deliveries/{retry}']"))
        .await;
    browser.screenshot("7-ignored-duplicate").await;
    let why = browser.find("#sentence").await.text().await.expect("why");
    assert!(why.starts_with("Ignored"), "{why}");
    assert!(why.contains("it asks for the same effect as"), "{why}");
    assert!(why.contains("so nothing was done twice."), "{why}");
    assert!(browser.text().await.contains("duplicate_of_applied"));
    browser
        .click_and_wait(&format!("#sentence a[href='/deliveries/{first}']"))
        .await;
    browser.screenshot("8-first-reception").await;
    assert_eq!(browser.path().await, format!("/deliveries/{first}"));
    let why = browser.find("#sentence").await.text().await.expect("why");
    assert!(why.starts_with("Processed"), "{why}");
    browser.close().await;
}
