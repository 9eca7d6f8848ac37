//! The engineers' journal reports as pages: field stability
//! (`/strategies/fields`) and observe mode beside a legacy handler
//! (`/strategies/observe`), read over a real journal, their filters, empty
//! states, links to deliveries, and hostile values escaped.

use unicity::auth::Role;

use crate::observe::legacy_source;
use crate::support::app::{id_of, refund, spawn_app, spawn_app_with};
use crate::support::counts::Counts;
use crate::support::forms::signed_in;
use crate::support::processes::{cli, finished};

/// The `<tr>` of `body` that holds `needle`.
fn row<'a>(body: &'a str, needle: &str) -> &'a str {
    let at = body
        .find(needle)
        .unwrap_or_else(|| panic!("{needle} in {body}"));
    let start = body[..at].rfind("<tr").expect("a row");
    let end = at + body[at..].find("</tr>").expect("the row's end");
    &body[start..end]
}

#[tokio::test]
async fn the_field_stability_page_shows_what_changes_across_retries_and_what_separates_refunds() {
    let app = spawn_app().await;
    // Given a refund sent, then retried with a field of a hostile name,
    let first = app
        .post_signed("hmac", &refund("pay_fp1", 700, Some("rr_fp1")))
        .await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    app.wait_applied(1).await;
    let mut odd: serde_json::Value =
        serde_json::from_slice(&refund("pay_fp1", 700, Some("rr_fp1"))).unwrap();
    odd["<img src=x onerror=alert(1)>"] = "\"quoted\" & more".into();
    let retry = app
        .post_signed("hmac", &serde_json::to_vec(&odd).unwrap())
        .await;
    assert_eq!(retry.json["decision"], "ignore", "{}", retry.json);
    // and a second refund of the same payment under another reference.
    let second = app
        .post_signed("hmac", &refund("pay_fp1", 900, Some("rr_fp2")))
        .await;
    assert_eq!(second.json["decision"], "process", "{}", second.json);
    app.wait_applied(2).await;

    // An engineer finds the page from the Strategies page,
    let mut engineer = signed_in(&app, "eli", Role::Engineer).await;
    let strategies = engineer.get("/strategies").await;
    assert!(
        strategies.body.contains(r#"href="/strategies/fields""#),
        "{}",
        strategies.body
    );
    // and reads the report for the source:
    let page = engineer.get("/strategies/fields?source=hmac&type=").await;
    assert_eq!(page.status, reqwest::StatusCode::OK, "{}", page.body);
    assert!(page.body.contains(r#"<span id="deliveries">3</span>"#));
    assert!(page.body.contains(r#"<span id="repeated">1</span>"#));
    // the send time changes between the retries, linked to both,
    let sent_at = row(&page.body, "<code>$.sent_at</code>");
    assert!(sent_at.contains(r#"class="field volatile""#), "{sent_at}");
    assert!(sent_at.contains("declared volatile"), "{sent_at}");
    for reply in [&first, &retry] {
        let link = format!(r#"href="/deliveries/{}""#, id_of(reply));
        assert!(sent_at.contains(&link), "{sent_at}");
    }
    // the hostile field comes and goes, its name escaped,
    assert!(!page.body.contains("<img src=x"), "{}", page.body);
    let odd_row = row(&page.body, "$.&#60;img src=x onerror=alert(1)&#62;");
    assert!(
        odd_row.contains(r#"class="field conditional""#),
        "{odd_row}"
    );
    assert!(
        row(&page.body, "<code>$.payment_id</code>").contains(r#"class="field stable""#),
        "{}",
        page.body
    );
    // and the two refunds of the payment are told apart by their reference,
    // linked to both.
    assert!(page.body.contains(r#"<span id="distinct">1</span>"#));
    let separating = &page.body[page.body.find(r#"id="separating""#).unwrap()..];
    let reference = row(separating, "<code>$.refund_reference</code>");
    for reply in [&first, &second] {
        let link = format!(r#"href="/deliveries/{}""#, id_of(reply));
        assert!(reference.contains(&link), "{reference}");
    }

    // An event type nothing was delivered as says so,
    let none = engineer.get("/strategies/fields?type=no.such").await;
    assert_eq!(none.status, reqwest::StatusCode::OK);
    assert!(none.body.contains(r#"id="no-delivery""#), "{}", none.body);
    assert!(
        none.body.contains(r#"value="no.such""#),
        "the filter is kept"
    );
    // and a source not configured is refused, named escaped.
    let unknown = engineer
        .get("/strategies/fields?source=%3Cscript%3Ex%3C%2Fscript%3E")
        .await;
    assert_eq!(unknown.status, reqwest::StatusCode::BAD_REQUEST);
    assert!(!unknown.body.contains("<script>x"), "{}", unknown.body);
    assert!(unknown.body.contains("No source is configured as"));
}

#[tokio::test]
async fn the_observe_page_names_the_legacy_double_refund_and_the_lost_one_with_their_deliveries() {
    let app = spawn_app_with(&legacy_source("observe", "")).await;
    // Given an observed source: a refund sent twice by the provider, and one
    // whose payment id is hostile,
    let body = refund("pay_op1", 500, Some("rr_op1"));
    let first = app.post_raw("legacy", body.clone(), &[]).await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    app.wait_applied(1).await;
    let retry = app.post_raw("legacy", body, &[]).await;
    assert_eq!(retry.json["decision"], "ignore", "{}", retry.json);
    let hostile = r#"pay_<b>&"x?#/"#;
    let lost = app
        .post_raw("legacy", refund(hostile, 700, Some("rr_op2")), &[])
        .await;
    assert_eq!(lost.json["decision"], "process", "{}", lost.json);
    app.wait_applied(2).await;
    let mut engineer = signed_in(&app, "eli", Role::Engineer).await;

    // Before any log is imported, the page says so.
    let bare = engineer.get("/strategies/observe?source=legacy").await;
    assert_eq!(bare.status, reqwest::StatusCode::OK, "{}", bare.body);
    assert!(bare.body.contains(r#"id="no-log""#), "{}", bare.body);
    assert!(bare.body.contains(r#"id="no-twice""#), "{}", bare.body);

    // When the legacy handler's log, saying it refunded pay_op1 twice and
    // never the other, is imported with the command,
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("legacy.csv");
    std::fs::write(
        &log,
        "reference,resource,amount\nlg_1,pay_op1,500\nlg_2,pay_op1,500\n",
    )
    .unwrap();
    let mut import = cli(&app.database_url, &legacy_source("observe", ""), dir.path());
    import
        .args(["observe", "import", "--source", "legacy"])
        .arg(&log);
    finished(import).await;

    // then the page, found from the Strategies page, shows the double
    // refund with Unicity's one delivery,
    let strategies = engineer.get("/strategies").await;
    assert!(strategies.body.contains(r#"href="/strategies/observe""#));
    let page = engineer.get("/strategies/observe?source=legacy").await;
    assert_eq!(page.status, reqwest::StatusCode::OK, "{}", page.body);
    assert!(page.body.contains(r#"<span id="legacy-effects">2</span>"#));
    assert!(page.body.contains(r#"<span id="unicity-effects">2</span>"#));
    assert!(!page.body.contains(r#"id="no-log""#));
    let twice = row(&page.body, "<code>pay_op1</code>");
    assert!(
        twice.contains(r#"<td class="count">2</td><td class="count">1</td>"#),
        "{twice}"
    );
    assert!(
        twice.contains(&format!(r#"href="/deliveries/{}""#, id_of(&first))),
        "{twice}"
    );
    assert!(!twice.contains(&id_of(&retry)), "{twice}");
    // and the lost one, its id escaped in the text and encoded in the search
    // link, which finds it.
    assert!(!page.body.contains("pay_<b>"), "{}", page.body);
    let search = "/deliveries?q=pay_%3Cb%3E%26%22x%3F%23%2F";
    assert!(
        page.body.contains(&format!(r#"href="{search}""#)),
        "{}",
        page.body
    );
    let found = engineer.get(search).await;
    assert!(found.body.contains(&id_of(&lost)), "{}", found.body);
    let missed = &page.body[page.body.find(r#"id="missed""#).unwrap()..];
    assert!(missed.contains(&format!(r#"href="/deliveries/{}""#, id_of(&lost))));

    // With no source chosen, the page asks for one; an unknown one is refused.
    let choose = engineer.get("/strategies/observe").await;
    assert!(choose.body.contains(r#"id="choose""#), "{}", choose.body);
    assert!(choose.body.contains("legacy (observe)"), "{}", choose.body);
    let unknown = engineer.get("/strategies/observe?source=nope").await;
    assert_eq!(unknown.status, reqwest::StatusCode::BAD_REQUEST);
}
