//! A finance person's and an engineer's day in a real browser (see
//! `browser.rs`), a screenshot per step: finance takes a money case, asks
//! the provider, compares the two refunds and resolves the case by hand
//! when the provider's answer settles nothing; an engineer resolves two
//! non-money cases in one go while the money case stays one at a time.

use unicity::auth::Role;

use crate::support::chromium::Browser;
use crate::support::counts::Counts;
use crate::support::forms::{PASSWORD, operator};
use crate::support::pages::Pages;
use crate::support::provider::Provider;

#[tokio::test]
async fn finance_takes_asks_compares_and_resolves_a_money_case_and_an_engineer_bulk_resolves_notices()
 {
    // A provider that lists no refund for the payment: its answer cannot
    // tell a retry from a second refund, so a person decides.
    let provider = Provider::start(&[], 50).await;
    let p = Pages::with(&provider.lookup_toml()).await;
    let case = p.money_case("pay_day").await;
    operator(&p.app, "fin", Role::Finance).await;
    operator(&p.app, "eve", Role::Engineer).await;
    let Some(browser) = Browser::open(&p.app.address, "role_days").await else {
        return;
    };

    // Finance: nothing is theirs yet.
    browser.sign_in("fin", PASSWORD).await;
    browser.visit("/cases").await;
    browser.screenshot("finance-queue").await;
    browser.click_and_wait("#my-cases").await;
    browser.screenshot("finance-my-cases-empty").await;
    assert!(browser.text().await.contains("No open case matches"));

    // They take the case.
    browser.visit(&format!("/cases/{case}")).await;
    assert_eq!(
        browser.find("#assignee").await.text().await.unwrap(),
        "Nobody yet."
    );
    browser
        .click_and_wait("form.assign input[type=hidden][name=assignee] ~ button")
        .await;
    browser.screenshot("finance-case-taken").await;
    assert_eq!(browser.find("#assignee").await.text().await.unwrap(), "fin");
    browser.visit("/cases").await;
    browser.click_and_wait("#my-cases").await;
    browser.screenshot("finance-my-cases").await;
    let mine = browser.html().await;
    assert!(mine.contains(&format!(r#"href="/cases/{case}""#)), "{mine}");

    // They ask the provider: what it listed shows in the history, and the
    // case stays theirs to decide.
    browser.visit(&format!("/cases/{case}")).await;
    let asked_before = p.app.journal_count("LookupPerformed").await;
    browser.click_and_wait("form.ask button[type=submit]").await;
    browser.screenshot("finance-asked").await;
    let asked = p.app.journal_count("LookupPerformed").await;
    assert_eq!(asked, asked_before + 1, "one more look-up, journaled");
    let page = browser.text().await;
    assert!(page.contains("Provider look-up"), "{page}");
    assert!(
        page.contains("its answer does not settle the case, which stays for a person"),
        "{page}"
    );

    // They compare the two refunds, side by side, as money.
    assert!(page.contains("Amounts and what tells them apart"), "{page}");
    assert!(page.contains("amount 7.00 EUR 7.00 EUR"), "{page}");

    // And decide: a second, legitimate refund, with the provider's reference.
    browser
        .click("input[name=resolution][value=process_as_distinct]")
        .await;
    browser
        .fill("textarea[name=note]", "the customer confirms two refunds")
        .await;
    browser
        .fill("input[name=authoritative_ref]", "re_day_2")
        .await;
    browser
        .click_and_wait("form.resolve button[type=submit]")
        .await;
    assert_eq!(browser.path().await, format!("/cases/{case}?done=resolved"));
    browser.screenshot("finance-resolved").await;
    p.downstream.wait_calls(2).await;
    p.app.wait_applied(2).await;

    // The resolved view says who resolved it, how, and with what reference.
    browser.visit("/cases?status=resolved").await;
    browser.screenshot("finance-resolved-view").await;
    let resolved = browser.text().await;
    assert!(resolved.contains("fin"), "{resolved}");
    assert!(resolved.contains("process as distinct") || resolved.contains("process_as_distinct"));
    browser.sign_out().await;

    // An engineer: two notice collisions (not money) and one more money case.
    let first = p.notice_case_about("n-day-1").await;
    let second = p.notice_case_about("n-day-2").await;
    let money = p.money_case("pay_day_2").await;
    browser.sign_in("eve", PASSWORD).await;
    browser.visit("/cases").await;
    browser.screenshot("engineer-queue").await;
    // A money case has no box to tick.
    assert!(
        browser
            .find_all(&format!("input[name=case][value='{money}']"))
            .await
            .is_empty()
    );
    browser
        .click(&format!("input[name=case][value='{first}']"))
        .await;
    browser
        .click(&format!("input[name=case][value='{second}']"))
        .await;
    browser
        .fill(
            "form.bulk textarea[name=note]",
            "test notices, sent by mistake",
        )
        .await;
    browser
        .click("form.bulk select[name=resolution] option[value=reject]")
        .await;
    browser.screenshot("engineer-ticked").await;
    browser
        .click_and_wait("form.bulk button[type=submit]")
        .await;
    browser.screenshot("engineer-bulk-resolved").await;
    let after = browser.html().await;
    assert!(
        !after.contains(&format!(r#"href="/cases/{first}""#)),
        "{after}"
    );
    assert!(
        !after.contains(&format!(r#"href="/cases/{second}""#)),
        "{after}"
    );
    assert!(
        after.contains(&format!(r#"href="/cases/{money}""#)),
        "still open: {after}"
    );
    assert_eq!(
        p.app
            .cases_with_status("discriminants_differ", "resolved")
            .await,
        2
    );
    browser.close().await;
}
