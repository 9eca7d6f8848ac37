//! The queue and case pages over real HTTP, as signed-in operators use them:
//! what they list and filter, what a case shows, who can resolve it, and
//! that a resolution form applies one effect however often it is posted.

use reqwest::StatusCode;
use unicity::auth::Role;

use crate::support::app::{TestApp, fresh_database_with};
use crate::support::counts::Counts;
use crate::support::forms::{FormClient, csrf_in, signed_in};
use crate::support::pages::{Pages, form_token, resolve_as_distinct};

/// The count the queue shows for `reason` (0 when it lists none).
fn reason_count(html: &str, reason: &str) -> i64 {
    let marker = format!(r#"data-reason="{reason}">"#);
    html.find(&marker)
        .map(|i| {
            html[i + marker.len()..]
                .split('<')
                .next()
                .unwrap()
                .parse()
                .unwrap()
        })
        .unwrap_or(0)
}

fn lists(html: &str, case: &str) -> bool {
    html.contains(&format!(r#"href="/cases/{case}""#))
}

#[tokio::test]
async fn the_queue_lists_open_cases_with_their_counts_and_every_filter_narrows_it() {
    let p = Pages::new().await;
    let money = p.money_case("pay_queue").await;
    let notice = p.notice_case().await;
    let mut support = signed_in(&p.app, "sue", Role::Support).await;

    let queue = support.get("/cases").await;
    assert_eq!(queue.status, StatusCode::OK, "{}", queue.body);
    assert!(lists(&queue.body, &money) && lists(&queue.body, &notice));
    assert_eq!(reason_count(&queue.body, "weak_match_critical"), 1);
    assert_eq!(reason_count(&queue.body, "discriminants_differ"), 1);
    assert!(
        queue
            .body
            .contains(r#"href="/cases?reason=weak_match_critical"#)
    );

    // (query, shows the money case, shows the notice case)
    for (query, shows_money, shows_notice) in [
        ("critical=yes", true, false),
        ("critical=no", false, true),
        ("effect_type=notice.send", false, true),
        ("effect_type=refund.create", true, false),
        ("reason=weak_match_critical", true, false),
        ("source=hmac&provider=norefid", true, true),
        ("provider=github", false, false),
        ("event_type=notice.sent", false, true),
        ("age=1d", false, false),
    ] {
        let page = support.get(&format!("/cases?{query}")).await;
        assert_eq!(page.status, StatusCode::OK, "{query}");
        assert_eq!(
            lists(&page.body, &money),
            shows_money,
            "{query}: money case"
        );
        assert_eq!(
            lists(&page.body, &notice),
            shows_notice,
            "{query}: notice case"
        );
    }

    // The same filters through the API.
    let api = p.app.get("/api/cases?critical=false").await;
    let ids: Vec<&str> = api.json["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["case_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [notice.as_str()]);
    let api = p.app.get("/api/cases?effect_type=refund.create").await;
    assert_eq!(api.json["cases"][0]["case_id"], money.as_str());
    assert_eq!(api.json["cases"][0]["critical"], true);
}

#[tokio::test]
async fn a_money_case_shows_both_amounts_and_only_finance_resolves_it_once() {
    let p = Pages::new().await;
    let case = p.money_case("pay_page").await;
    let path = format!("/cases/{case}");
    let resolve = format!("{path}/resolve");

    // Support reads the case: both amounts, the volatile send time, and a
    // sentence instead of a button.
    let mut support = signed_in(&p.app, "sam", Role::Support).await;
    let page = support.get(&path).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    for side in ["delivery", "reference"] {
        assert!(
            page.body.contains(&format!(
                r#"data-side="{side}" data-name="amount">7.00 EUR<"#
            )),
            "{side} amount shown as money"
        );
    }
    assert!(page.body.contains("<code>$.sent_at</code>"), "the diff");
    assert!(page.body.contains(r#"class="mark volatile""#));
    assert!(page.body.contains("Only finance or an admin can resolve"));
    assert!(!page.body.contains(&format!(r#"action="{resolve}""#)));
    assert_eq!(form_token(&page.body), None);
    let csrf = csrf_in(&page.body);
    let refused = support
        .post(&resolve, &[("csrf", &csrf), ("resolution", "reject")])
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);

    // An engineer may resolve other cases, not money ones.
    let mut engineer = signed_in(&p.app, "eng", Role::Engineer).await;
    let page = engineer.get(&path).await;
    assert!(page.body.contains("Only finance or an admin can resolve"));
    let csrf = csrf_in(&page.body);
    let refused = engineer
        .post(
            &resolve,
            &[
                ("csrf", &csrf),
                ("form_token", "x"),
                ("resolution", "process_as_distinct"),
                ("note", "mine"),
            ],
        )
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);

    // Finance resolves it as distinct: exactly one more refund.
    let mut finance = signed_in(&p.app, "fin", Role::Finance).await;
    let page = finance.get(&path).await;
    let token = form_token(&page.body).expect("finance sees the resolution form");
    let csrf = csrf_in(&page.body);
    let form = [
        ("csrf", csrf.as_str()),
        ("form_token", token.as_str()),
        ("resolution", "process_as_distinct"),
        ("note", "the provider lists two refunds"),
        ("authoritative_ref", "re_2"),
    ];
    let done = finance.post(&resolve, &form).await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body);
    assert_eq!(done.location, format!("{path}?done=resolved"));
    p.downstream.wait_calls(2).await;

    // The same form again: the resolved page, still one more refund.
    let again = finance.post(&resolve, &form).await;
    assert_eq!(again.status, StatusCode::SEE_OTHER);
    assert_eq!(again.location, format!("{path}?done=used"));
    let shown = finance.get(&again.location).await;
    assert_eq!(shown.status, StatusCode::OK);
    assert!(shown.body.contains("already submitted"));
    assert!(shown.body.contains("process_as_distinct"));
    assert!(shown.body.contains("re_2"), "the reference in the history");
    assert_eq!(form_token(&shown.body), None, "no form on a resolved case");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(p.downstream.calls().len(), 2);

    // The queue count drops.
    let queue = support.get("/cases").await;
    assert_eq!(reason_count(&queue.body, "weak_match_critical"), 0);
    assert!(!lists(&queue.body, &case));
}

type Form = Vec<(&'static str, String)>;

/// The resolution form of `case` as `browser` gets it, filled in to process
/// the delivery as distinct.
async fn resolution_form(browser: &mut FormClient, case: &str) -> Form {
    let page = browser.get(&format!("/cases/{case}")).await;
    vec![
        ("csrf", csrf_in(&page.body)),
        (
            "form_token",
            form_token(&page.body).expect("a resolution form"),
        ),
        ("resolution", "process_as_distinct".to_owned()),
        ("note", "two refunds".to_owned()),
    ]
}

fn pairs(form: &Form) -> Vec<(&str, &str)> {
    form.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// Posts two resolution forms of `case` at once; where each lands, sorted.
async fn at_once(
    case: &str,
    (a, first): (&mut FormClient, &Form),
    (b, second): (&mut FormClient, &Form),
) -> [String; 2] {
    let path = format!("/cases/{case}/resolve");
    let (one, two) = (a.form(&path, &pairs(first)), b.form(&path, &pairs(second)));
    let (one, two) = tokio::join!(a.send(one), b.send(two));
    let mut outcomes = [one.location, two.location];
    outcomes.sort();
    outcomes
}

#[tokio::test]
async fn concurrent_submissions_of_one_form_or_of_two_operators_apply_one_effect() {
    let p = Pages::new().await;
    let one_form = p.money_case("pay_twice").await;
    let two_people = p.money_case("pay_both").await;
    assert_eq!(p.downstream.calls().len(), 2);

    let mut ann = signed_in(&p.app, "ann", Role::Finance).await;
    let mut bob = signed_in(&p.app, "bob", Role::Admin).await;

    // One form posted twice at once (a double click, two tabs).
    let form = resolution_form(&mut ann, &one_form).await;
    let mut tab = ann.clone();
    let outcomes = at_once(&one_form, (&mut ann, &form), (&mut tab, &form)).await;
    assert_eq!(
        outcomes,
        [
            format!("/cases/{one_form}?done=resolved"),
            format!("/cases/{one_form}?done=used"),
        ]
    );

    // Two operators, each with their own form, at once.
    let first = resolution_form(&mut ann, &two_people).await;
    let second = resolution_form(&mut bob, &two_people).await;
    let outcomes = at_once(&two_people, (&mut ann, &first), (&mut bob, &second)).await;
    assert_eq!(
        outcomes,
        [
            format!("/cases/{two_people}?done=case_already_resolved"),
            format!("/cases/{two_people}?done=resolved"),
        ]
    );
    let page = bob.get(&outcomes[0]).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("already resolved"));

    p.downstream.wait_calls(4).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(p.downstream.calls().len(), 4, "one more effect per case");
}

#[tokio::test]
async fn a_form_post_without_its_csrf_token_or_from_another_origin_changes_nothing() {
    let p = Pages::new().await;
    let case = p.money_case("pay_csrf").await;
    let path = format!("/cases/{case}");
    let mut finance = signed_in(&p.app, "fay", Role::Finance).await;
    let page = finance.get(&path).await;
    let token = form_token(&page.body).unwrap();
    let csrf = csrf_in(&page.body);
    let resolve = [
        ("form_token", token.as_str()),
        ("resolution", "process_as_distinct"),
        ("note", "forged"),
    ];

    let no_token = finance.post(&format!("{path}/resolve"), &resolve).await;
    assert_eq!(no_token.status, StatusCode::FORBIDDEN);
    let with_csrf: Vec<(&str, &str)> = [("csrf", csrf.as_str())]
        .into_iter()
        .chain(resolve)
        .collect();
    for (action, form) in [
        ("resolve", with_csrf.clone()),
        (
            "comments",
            vec![("csrf", csrf.as_str()), ("note", "forged")],
        ),
    ] {
        for (header, value) in [
            ("origin", "https://attacker.example"),
            ("sec-fetch-site", "cross-site"),
        ] {
            let request = finance
                .form(&format!("{path}/{action}"), &form)
                .header(header, value);
            let foreign = finance.send(request).await;
            assert_eq!(foreign.status, StatusCode::FORBIDDEN, "{action} {header}");
        }
    }
    let journaled =
        "SELECT COUNT(*) FROM journal WHERE event_type IN ('CaseResolved', 'CaseCommented')";
    assert_eq!(p.app.count(journaled).await, 0);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(p.downstream.calls().len(), 1);

    // The same form from this site's own origin goes through.
    let request = finance
        .form(&format!("{path}/resolve"), &with_csrf)
        .header("origin", &p.app.address)
        .header("sec-fetch-site", "same-origin");
    let done = finance.send(request).await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body);
    p.downstream.wait_calls(2).await;
}

#[tokio::test]
async fn webhook_markup_in_a_value_a_header_and_a_field_name_renders_as_text() {
    let p = Pages::new().await;
    let hostile = |sent_at: &str| {
        serde_json::to_vec(&serde_json::json!({
            "type": "refund.<svg onload=alert(1)>",
            "payment_id": "<script>alert('pay')</script>",
            "amount": 5,
            "currency": "EUR",
            "<img src=x onerror=alert(2)>": "name",
            "sent_at": sent_at,
        }))
        .unwrap()
    };
    let headers = [(
        "x-note".to_owned(),
        "<script>alert('header')</script>".to_owned(),
    )];
    let first = p.app.post_raw("open", hostile("t1"), &headers).await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    p.app.wait_applied(1).await;
    let second = p.app.post_raw("open", hostile("t2"), &headers).await;
    let case = second.json["case_id"].as_str().expect("a case").to_owned();

    let mut support = signed_in(&p.app, "xss", Role::Support).await;
    let queue = support.get("/cases").await;
    let page = support.get(&format!("/cases/{case}")).await;
    assert_eq!(page.status, StatusCode::OK);
    for (name, html) in [("queue", &queue.body), ("case", &page.body)] {
        for raw in ["<svg onload", "<script>alert", "<img src=x"] {
            assert!(!html.contains(raw), "{name} page shows {raw} unescaped");
        }
        assert!(
            html.contains("refund.&#60;svg onload=alert(1)&#62;"),
            "{name}"
        );
    }
    // As text: the header value, the field name (in the body shown), the
    // payment id (a discriminating figure).
    for escaped in [
        "&#60;script&#62;alert(&#39;header&#39;)&#60;/script&#62;",
        "&#60;img src=x onerror=alert(2)&#62;",
        "&#60;script&#62;alert(&#39;pay&#39;)&#60;/script&#62;",
    ] {
        assert!(page.body.contains(escaped), "{escaped} in {}", page.body);
    }
}

/// The delivery a case is about, read through the API.
async fn delivery_of(app: &TestApp, case: &str) -> String {
    let view = app.get(&format!("/api/cases/{case}")).await;
    assert_eq!(view.status, 200, "{}", view.json);
    view.json["delivery"]["delivery_id"]
        .as_str()
        .expect("a delivery")
        .to_owned()
}

#[tokio::test]
async fn once_its_case_is_resolved_a_delivery_page_says_how_it_ended_by_whom_with_what_reference() {
    let p = Pages::new().await;
    let case = p.money_case("pay_ended").await;
    let id = delivery_of(&p.app, &case).await;
    let delivery = format!("/deliveries/{id}");
    let mut finance = signed_in(&p.app, "fin", Role::Finance).await;

    let before = finance.get(&delivery).await;
    assert_eq!(before.status, StatusCode::OK, "{}", before.body);
    assert!(before.body.contains("a person must decide"));
    assert!(before.body.contains("open, waiting for a person"));

    resolve_as_distinct(&mut finance, &case, "re_ended_2").await;

    let after = finance.get(&delivery).await;
    assert_eq!(after.status, StatusCode::OK);
    assert!(
        !after.body.contains("a person must decide"),
        "{}",
        after.body
    );
    assert!(!after.body.contains("waiting for a person"));
    assert!(
        after
            .body
            .contains("its case was resolved: processed as a distinct operation")
    );
    assert!(
        after
            .body
            .contains(r#"resolved <strong class="resolution">process_as_distinct</strong>"#)
    );
    assert!(
        after
            .body
            .contains(r#"by <span class="resolved-by">operator:fin (finance, "#),
        "the resolver"
    );
    assert!(
        after
            .body
            .contains(r#"<code class="reference">re_ended_2</code>"#)
    );
    assert!(after.body.contains("the provider lists two refunds"));
    // The API says the same.
    let view = p.app.delivery(&id).await;
    let ended = &view.json["resolutions"][0];
    assert_eq!(ended["case_id"], case.as_str());
    assert_eq!(ended["resolution"], "process_as_distinct");
    assert_eq!(ended["authoritative_ref"], "re_ended_2");
    assert!(
        ended["resolved_by"]
            .as_str()
            .unwrap()
            .starts_with("operator:fin")
    );
    let sentence: String = view.json["explanation"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|part| part["text"].as_str())
        .collect();
    assert!(!sentence.contains("a person must decide"), "{sentence}");
}

#[tokio::test]
async fn the_queue_lists_open_resolved_or_all_cases_as_asked_and_says_which() {
    let p = Pages::new().await;
    let resolved = p.money_case("pay_settled").await;
    let open = p.money_case("pay_waiting").await;
    let mut finance = signed_in(&p.app, "fin", Role::Finance).await;
    resolve_as_distinct(&mut finance, &resolved, "re_settled_2").await;

    // (query, lists the resolved case, lists the open one, status selected)
    for (query, shows_resolved, shows_open, selected) in [
        ("", false, true, "open"),
        ("?status=open", false, true, "open"),
        ("?status=resolved", true, false, "resolved"),
        ("?status=all", true, true, "all"),
        (
            "?status=resolved&reason=weak_match_critical",
            true,
            false,
            "resolved",
        ),
        (
            "?status=resolved&reason=discriminants_differ",
            false,
            false,
            "resolved",
        ),
    ] {
        let queue = finance.get(&format!("/cases{query}")).await;
        assert_eq!(queue.status, StatusCode::OK, "{query}");
        assert_eq!(lists(&queue.body, &resolved), shows_resolved, "{query}");
        assert_eq!(lists(&queue.body, &open), shows_open, "{query}");
        assert!(
            queue
                .body
                .contains(&format!(r#"<option value="{selected}" selected>"#)),
            "{query}: the status filter shows {selected}"
        );
    }
    let listing = finance.get("/cases?status=resolved").await;
    assert!(listing.body.contains("<h1>Resolved cases"));
    assert!(
        listing
            .body
            .contains("resolved: process_as_distinct, by fin, just now"),
        "who resolved it and when: {}",
        listing.body
    );
    assert_eq!(reason_count(&listing.body, "weak_match_critical"), 1);
    let marker = r#"href="/cases?reason=weak_match_critical"#;
    let link = listing.body[listing.body.find(marker).expect("a reason link")..]
        .split('>')
        .next()
        .unwrap();
    assert!(
        link.contains("status=resolved"),
        "the reason link keeps the status: {link}"
    );
    // The API reads the same statuses.
    for (query, expected) in [
        ("status=resolved", vec![resolved.as_str()]),
        ("status=all", vec![resolved.as_str(), open.as_str()]),
        ("", vec![open.as_str()]),
    ] {
        let api = p.app.get(&format!("/api/cases?{query}")).await;
        let ids: Vec<&str> = api.json["cases"]
            .as_array()
            .expect("cases")
            .iter()
            .map(|c| c["case_id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, expected, "{query}");
    }
}

#[tokio::test]
async fn an_address_with_no_page_gets_a_page_with_the_way_back_and_programs_get_json() {
    // Given a server, and a signed-in support agent
    let app = crate::support::app::spawn_app().await;
    let mut anonymous = FormClient::new(&app);
    let mut support = signed_in(&app, "sam", Role::Support).await;

    // When people ask for addresses nothing is at, signed in or not
    for (who, browser) in [("anonymous", &mut anonymous), ("support", &mut support)] {
        for path in ["/nowhere", "/cases/x/y", "/static/", "/deliveries%2Fx"] {
            let page = browser.get(path).await;
            // Then they get a 404 page saying so, with where to go instead
            // and the skip link every page has
            assert_eq!(page.status, StatusCode::NOT_FOUND, "{who} {path}");
            assert!(
                page.body.contains("There is no such page."),
                "{who} {path}: {}",
                page.body
            );
            for link in [
                r#"href="/deliveries""#,
                r#"href="/cases""#,
                r##"href="#main""##,
            ] {
                assert!(page.body.contains(link), "{who} {path} links {link}");
            }
        }
    }

    // And programs get the API's JSON error, under /api and /hooks alike
    for path in ["/api/nowhere", "/api/deliveries/x/y", "/hooks"] {
        let reply = app.get(path).await;
        assert_eq!(reply.status, 404, "{path}");
        assert_eq!(reply.json["code"], "not_found", "{path}: {}", reply.json);
    }
    let posted = reqwest::Client::new()
        .post(format!("{}/hooks/shop/extra", app.address))
        .body("{}")
        .send()
        .await
        .expect("answered");
    assert_eq!(posted.status(), StatusCode::NOT_FOUND);
    let json: serde_json::Value = posted.json().await.expect("JSON");
    assert_eq!(json["code"], "not_found");
}

#[tokio::test]
async fn an_engineer_resolves_ticked_non_money_cases_at_once_and_money_cases_stay_one_at_a_time() {
    // Given three collisions on notices and one money case
    let p = Pages::new().await;
    let mut notices = Vec::new();
    for n in 0..3 {
        notices.push(p.notice_case_about(&format!("n-bulk-{n}")).await);
    }
    let money = p.money_case("pay_bulk").await;
    let resolved_before = p.app.journal_count("CaseResolved").await;

    // The queue offers an engineer boxes for the notices only; finance none
    let mut eve = signed_in(&p.app, "eve", Role::Engineer).await;
    let queue = eve.get("/cases").await.body;
    for case in &notices {
        assert!(
            queue.contains(&format!(r#"name="case" value="{case}""#)),
            "{case}"
        );
    }
    assert!(!queue.contains(&format!(r#"name="case" value="{money}""#)));
    let mut fin = signed_in(&p.app, "fin", Role::Finance).await;
    assert!(
        !fin.get("/cases")
            .await
            .body
            .contains(r#"action="/cases/resolve-many""#)
    );

    // When the engineer resolves all four the same way
    let csrf = csrf_in(&queue);
    let mut form = vec![
        ("csrf", csrf.as_str()),
        ("resolution", "reject"),
        ("note", "test notices from a misconfigured sender"),
    ];
    for case in notices.iter().chain([&money]) {
        form.push(("case", case.as_str()));
    }
    let done = eve.post("/cases/resolve-many", &form).await;

    // Then the three notices are resolved, once each, and the money case is left open
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body);
    let page = eve.get(&done.location).await.body;
    assert!(
        page.contains(
            "3 cases resolved. 1 money case left open: money cases are resolved one at a time."
        ),
        "{page}"
    );
    assert_eq!(
        p.app.journal_count("CaseResolved").await,
        resolved_before + 3
    );
    let shown = p.app.get(&format!("/api/cases/{money}")).await;
    assert_eq!(shown.json["status"], "open", "{}", shown.json);

    // And again, nothing more happens: each case resolves once
    let again = eve.post("/cases/resolve-many", &form).await;
    let page = eve.get(&again.location).await.body;
    assert!(
        page.contains("0 cases resolved.") && page.contains("3 had been resolved already."),
        "{page}"
    );
    assert_eq!(
        p.app.journal_count("CaseResolved").await,
        resolved_before + 3
    );

    // A bulk resolution without a note resolves nothing
    let fresh = p.notice_case_about("n-bulk-late").await;
    let csrf = eve.csrf("/cases").await;
    let refused = eve
        .post(
            "/cases/resolve-many",
            &[
                ("csrf", &csrf),
                ("resolution", "reject"),
                ("note", " "),
                ("case", &fresh),
            ],
        )
        .await;
    assert!(
        eve.get(&refused.location)
            .await
            .body
            .contains("needs a note")
    );
    assert_eq!(
        p.app.journal_count("CaseResolved").await,
        resolved_before + 3
    );
}

#[tokio::test]
async fn a_bulk_resolution_over_the_limit_resolves_nothing_and_says_so_and_a_case_ticked_twice_counts_once()
 {
    let p = Pages::new().await;
    let case = p.notice_case_about("n-bulk-many").await;
    let resolved_before = p.app.journal_count("CaseResolved").await;
    let mut eve = signed_in(&p.app, "eve", Role::Engineer).await;
    let csrf = eve.csrf("/cases").await;
    let base = [
        ("csrf", csrf.as_str()),
        ("resolution", "reject"),
        ("note", "test notices from a misconfigured sender"),
    ];
    // Given more cases ticked than a bulk resolution takes, the real one last,
    let others: Vec<String> = (0..unicity::services::cases::BULK_MOST)
        .map(|_| uuid::Uuid::now_v7().to_string())
        .collect();
    let mut form = base.to_vec();
    form.extend(others.iter().map(|id| ("case", id.as_str())));
    form.push(("case", case.as_str()));
    let refused = eve.post("/cases/resolve-many", &form).await;
    // then nothing is resolved, and the queue says why,
    assert_eq!(refused.status, StatusCode::SEE_OTHER, "{}", refused.body);
    let page = eve.get(&refused.location).await.body;
    assert!(
        page.contains("More than 200 cases were ticked"),
        "{}: {page}",
        refused.location
    );
    assert_eq!(p.app.journal_count("CaseResolved").await, resolved_before);
    // and one case ticked twice resolves once, counted once, said even
    // though the queue it leaves is empty.
    let mut form = base.to_vec();
    form.extend([("case", case.as_str()), ("case", case.as_str())]);
    let done = eve.post("/cases/resolve-many", &form).await;
    let page = eve.get(&done.location).await.body;
    assert!(
        page.contains("1 case resolved."),
        "{} {}: {page}",
        done.status,
        done.location
    );
    assert!(!page.contains("resolved already"), "{page}");
    assert_eq!(
        p.app.journal_count("CaseResolved").await,
        resolved_before + 1
    );
}

#[tokio::test]
async fn a_resolved_case_cannot_be_given_to_anyone_and_nothing_is_journaled() {
    let p = Pages::new().await;
    let case = p.notice_case_about("n-assign-late").await;
    let path = format!("/cases/{case}");
    let mut eve = signed_in(&p.app, "eve", Role::Engineer).await;
    let csrf = eve.csrf(&path).await;
    // Given a case resolved after its page was shown,
    let resolved = p
        .app
        .resolve(
            &case,
            serde_json::json!({"resolution": "reject", "note": "a test notice"}),
        )
        .await;
    assert_eq!(resolved.status, 200, "{}", resolved.json);
    // when someone gives it to an operator from that page,
    let refused = eve
        .post(
            &format!("{path}/assign"),
            &[("csrf", &csrf), ("assignee", "eve")],
        )
        .await;
    // then it is refused and the case's record holds no assignment.
    assert_eq!(refused.location, format!("{path}?done=assign_resolved"));
    assert_eq!(p.app.journal_count("CaseAssigned").await, 0);
}

#[tokio::test]
async fn a_case_is_given_to_an_operator_who_finds_it_under_my_cases_and_a_rebuild_keeps_it() {
    let p = Pages::new().await;
    let case = p.money_case("pay_assign").await;
    let path = format!("/cases/{case}");
    let mut fin = signed_in(&p.app, "fin", Role::Finance).await;
    let _eve = signed_in(&p.app, "eve", Role::Engineer).await;

    // Nobody has it yet; finance takes it
    let page = fin.get(&path).await.body;
    assert!(page.contains("Nobody yet."), "{page}");
    let csrf = csrf_in(&page);
    let taken = fin
        .post(
            &format!("{path}/assign"),
            &[("csrf", &csrf), ("assignee", "fin")],
        )
        .await;
    assert_eq!(taken.location, format!("{path}?done=assigned"));
    let page = fin.get(&path).await.body;
    assert!(
        page.contains(r#"<p id="assignee"><strong>fin</strong></p>"#),
        "{page}"
    );
    assert_eq!(p.app.journal_count("CaseAssigned").await, 1);

    // "My cases" lists it for fin, not for eve
    let mine = fin.get("/cases?assignee=fin").await.body;
    assert!(mine.contains(&format!(r#"href="/cases/{case}""#)), "{mine}");
    assert!(mine.contains("· fin"), "{mine}");
    let eves = fin.get("/cases?assignee=eve").await.body;
    assert!(!eves.contains(&format!(r#"href="/cases/{case}""#)));

    // A name that is no enabled operator (or markup) assigns nothing
    for ghost in ["ghost", "<script>alert(1)</script>"] {
        let refused = fin
            .post(
                &format!("{path}/assign"),
                &[("csrf", &csrf), ("assignee", ghost)],
            )
            .await;
        assert_eq!(refused.location, format!("{path}?done=no_such_operator"));
    }
    assert_eq!(p.app.journal_count("CaseAssigned").await, 1);

    // The cases table rebuilt from the journal gives it to fin again
    unicity::services::projections::rebuild(&p.app.db)
        .await
        .expect("rebuilt");
    assert!(
        fin.get("/cases?assignee=fin")
            .await
            .body
            .contains(&format!(r#"href="/cases/{case}""#))
    );
}

#[tokio::test]
async fn the_queue_header_counts_the_cases_its_filters_let_through() {
    // Given a money case and a notice collision
    let p = Pages::new().await;
    p.money_case("pay_counted").await;
    p.notice_case_about("n-counted").await;
    let mut sam = signed_in(&p.app, "sam", Role::Support).await;

    // Unfiltered, both are counted
    let all = sam.get("/cases").await.body;
    assert_eq!(reason_count(&all, "weak_match_critical"), 1);
    assert_eq!(reason_count(&all, "discriminants_differ"), 1);
    assert!(all.contains(r#"<span class="count">2</span>"#), "{all}");

    // Only what is not money: the header counts the notice alone
    let calm = sam.get("/cases?critical=no").await.body;
    assert_eq!(reason_count(&calm, "weak_match_critical"), 0);
    assert_eq!(reason_count(&calm, "discriminants_differ"), 1);
    assert!(calm.contains(r#"<span class="count">1</span>"#), "{calm}");
}

#[tokio::test]
async fn the_effect_type_filter_finds_its_cases_in_a_database_that_sorts_text_by_language() {
    // On PostgreSQL, a database sorting text the way English does (ICU
    // en-US), where punctuation weighs less than letters: `refund@1:ab`
    // sorts after `refund@1;`, so a key range read nothing there.
    let (url, dir) = fresh_database_with(
        "TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'",
    )
    .await;
    let p = Pages::on(&url, dir, "").await;
    let money = p.money_case("pay_icu").await;
    let notice = p.notice_case().await;
    let mut support = signed_in(&p.app, "sue", Role::Support).await;
    for (query, money_listed, notice_listed) in [
        ("effect_type=refund.create", true, false),
        ("effect_type=notice.send", false, true),
        ("critical=yes", true, false),
        ("critical=no", false, true),
    ] {
        let page = support.get(&format!("/cases?{query}")).await;
        assert_eq!(page.status, StatusCode::OK, "{query}: {}", page.body);
        assert_eq!(lists(&page.body, &money), money_listed, "{query}");
        assert_eq!(lists(&page.body, &notice), notice_listed, "{query}");
    }
}
