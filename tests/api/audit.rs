//! The audit trail over real HTTP: what operators did, newest first, who did
//! what, filtered by who and by kind, a page of 100 with a link further back;
//! for engineers and admins; hostile names shown as text.

use reqwest::StatusCode;
use unicity::auth::Role;

use crate::support::counts::Counts;
use crate::support::forms::{Answer, FormClient, csrf_in, signed_in};
use crate::support::pages::Pages;

/// The rows of the audit table, each as its visible text in order.
fn entries(html: &str) -> Vec<String> {
    html.split("<tr data-kind=\"")
        .skip(1)
        .map(|row| row.split("</tr>").next().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn an_engineer_reads_who_did_what_newest_first_and_narrows_it_by_who_and_kind() {
    // Given an admin who adds an operator and changes a role, a refused
    // sign-in under a hostile name, and a finance operator's comment
    let p = Pages::new().await;
    let case = p.money_case("pay_audit").await;
    let mut ada = signed_in(&p.app, "ada", Role::Admin).await;
    let csrf = ada.csrf("/admin").await;
    let added = ada
        .post(
            "/admin/operators",
            &[("csrf", &csrf), ("name", "nina"), ("role", "support")],
        )
        .await;
    assert_eq!(added.status, StatusCode::OK, "{}", added.body);
    let mut fin = signed_in(&p.app, "fin", Role::Finance).await;
    let refused = FormClient::new(&p.app)
        .login("<b>mallory</b>", "not the password at all")
        .await;
    assert_ne!(refused.status, StatusCode::SEE_OTHER);
    let csrf = fin.csrf(&format!("/cases/{case}")).await;
    let commented = comment(&mut fin, &case, &csrf, "asked the provider").await;
    assert_eq!(
        commented.status,
        StatusCode::SEE_OTHER,
        "{}",
        commented.body
    );

    // When an engineer reads the audit trail
    let mut eve = signed_in(&p.app, "eve", Role::Engineer).await;
    let page = eve.get("/audit").await;

    // Then each action is there, newest first, said as who did what
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let rows = entries(&page.body);
    let first = rows.first().expect("entries");
    assert!(
        first.starts_with("signed_in") && first.contains("eve"),
        "{first}"
    );
    let said = |text: &str| rows.iter().position(|r| r.contains(text));
    let comment = said("commented on a case").expect("the comment");
    let added = said("added operator nina as support").expect("the new operator");
    assert!(comment < added, "newest first");
    assert!(rows[comment].contains("fin") && rows[comment].contains(&format!("/cases/{case}")));
    assert!(rows[added].contains("<td>ada</td>"), "{}", rows[added]);
    // and a name no operator has is shown as its tag, never as typed
    assert!(!page.body.contains("mallory"), "{}", page.body);

    // When narrowed to ada, then only ada's actions
    let ada_only = entries(&eve.get("/audit?who=ada").await.body);
    assert!(!ada_only.is_empty());
    assert!(
        ada_only.iter().all(|r| r.contains("<td>ada</td>")),
        "{ada_only:?}"
    );
    // and to fin, their comment, signed in their name
    let fins = entries(&eve.get("/audit?who=fin").await.body);
    assert!(
        fins.iter()
            .any(|r| r.contains("commented on a case") && r.contains("<td>fin</td>")),
        "{fins:?}"
    );
    // and to refused sign-ins, only those
    let refusals = entries(&eve.get("/audit?kind=sign_in_refused").await.body);
    assert_eq!(refusals.len(), 1, "{refusals:?}");
    assert!(
        refusals[0].contains("sign-in refused (unknown name)"),
        "{}",
        refusals[0]
    );

    // and a hostile filter is echoed as text, never markup
    let hostile = eve.get("/audit?who=%3Cb%3Emallory%3C%2Fb%3E").await;
    assert!(!hostile.body.contains("<b>mallory</b>"));
    assert!(hostile.body.contains("&#60;b&#62;mallory&#60;/b&#62;"));

    // And support may not read it
    let mut sam = signed_in(&p.app, "sam", Role::Support).await;
    assert_eq!(sam.get("/audit").await.status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn a_long_trail_reads_a_hundred_at_a_time_with_a_link_further_back() {
    let p = Pages::new().await;
    let case = p.money_case("pay_audit_pages").await;
    let mut fin = signed_in(&p.app, "fin", Role::Finance).await;
    let page = fin.get(&format!("/cases/{case}")).await;
    let csrf = csrf_in(&page.body);
    for n in 0..120 {
        let note = format!("note {n}");
        let posted = fin
            .post(
                &format!("/cases/{case}/comments"),
                &[("csrf", &csrf), ("note", &note)],
            )
            .await;
        assert_eq!(posted.status, StatusCode::SEE_OTHER);
    }
    let mut eve = signed_in(&p.app, "eve", Role::Engineer).await;
    let first = eve.get("/audit?kind=case_commented").await;
    assert_eq!(entries(&first.body).len(), 100);
    let marker = r#"<a rel="next" href=""#;
    let start = first.body.find(marker).expect("a link further back") + marker.len();
    let older = first.body[start..]
        .split('"')
        .next()
        .unwrap()
        .replace("&#38;", "&");
    assert!(older.contains("kind=case_commented"), "{older}");
    let second = eve.get(&older).await;
    assert_eq!(entries(&second.body).len(), 20, "the 20 older comments");
    assert!(!second.body.contains(r#"rel="next""#));
}

/// Comments on `case` through its page's form.
async fn comment(client: &mut FormClient, case: &str, csrf: &str, note: &str) -> Answer {
    client
        .post(
            &format!("/cases/{case}/comments"),
            &[("csrf", csrf), ("note", note)],
        )
        .await
}

#[tokio::test]
async fn a_note_holding_a_nul_character_is_refused_and_journals_nothing() {
    let p = Pages::new().await;
    let case = p.money_case("pay_audit_nul").await;
    let mut fin = signed_in(&p.app, "fin", Role::Finance).await;
    let page = fin.get(&format!("/cases/{case}")).await;
    let csrf = csrf_in(&page.body);
    // From a form (%00) and from JSON (\u0000) alike, refused before
    // anything reads it, on both backends (PostgreSQL refuses any text
    // bound with U+0000).
    let posted = comment(&mut fin, &case, &csrf, "before\u{0}after").await;
    assert_eq!(posted.status, StatusCode::BAD_REQUEST, "{}", posted.body);
    assert!(posted.body.contains("U+0000"), "{}", posted.body);
    let commented = p
        .app
        .client
        .post(format!("{}/api/cases/{case}/comments", p.app.address))
        .json(&serde_json::json!({ "note": "before\u{0}after" }))
        .send()
        .await
        .expect("answered");
    assert_eq!(commented.status(), StatusCode::BAD_REQUEST);
    let mut eve = signed_in(&p.app, "eve", Role::Engineer).await;
    let trail = eve.get("/audit?kind=case_commented").await;
    assert_eq!(entries(&trail.body).len(), 0, "{}", trail.body);
    // The same note without it is journaled.
    let commented = comment(&mut fin, &case, &csrf, "before after").await;
    assert_eq!(
        commented.status,
        StatusCode::SEE_OTHER,
        "{}",
        commented.body
    );
    let trail = eve.get("/audit?kind=case_commented").await;
    assert_eq!(entries(&trail.body).len(), 1, "{}", trail.body);
}

#[tokio::test]
async fn a_password_typed_as_a_name_is_journaled_and_shown_only_as_a_keyed_tag() {
    // Given a password typed into the name field, twice, and another
    // unknown name once
    let p = Pages::new().await;
    let typed = "Correct-Horse-7319";
    for name in [typed, typed, "nobody-at-all"] {
        let refused = FormClient::new(&p.app).login(name, "whatever it was").await;
        assert_ne!(refused.status, StatusCode::SEE_OTHER);
    }

    // Then the append-only journal never holds what was typed
    p.app.wait_journal("LoginFailed", 3).await;
    assert_eq!(p.app.journal_rows_containing(typed).await, 0);
    assert_eq!(p.app.journal_rows_containing("nobody-at-all").await, 0);

    // And the audit trail shows each refusal under a tag: the same for the
    // same name typed again, another for another name
    let mut eve = signed_in(&p.app, "eve", Role::Engineer).await;
    let page = eve.get("/audit?kind=sign_in_refused").await;
    assert!(!page.body.contains(typed), "{}", page.body);
    let tags: Vec<String> = entries(&page.body)
        .iter()
        .map(|row| {
            let start = row.find("hmac:").expect("a tag");
            let tag = &row[start..start + 13];
            assert!(row[start + 13..].starts_with('…'), "{row}");
            tag.to_owned()
        })
        .collect();
    assert_eq!(tags.len(), 3, "{tags:?}");
    assert_eq!(tags[1], tags[2], "the same name typed twice");
    assert_ne!(tags[0], tags[1], "another name");
    assert!(
        tags.iter()
            .all(|t| t[5..].bytes().all(|b| b.is_ascii_hexdigit()))
    );
    // and the name as typed finds its refusals, and only those
    let by_name = eve
        .get("/audit?kind=sign_in_refused&who=Correct-Horse-7319")
        .await;
    assert_eq!(entries(&by_name.body).len(), 2, "{}", by_name.body);
    assert!(
        !by_name.body.contains("<td>Correct-Horse"),
        "{}",
        by_name.body
    );
    // and an operator's own refused sign-in still names them
    let _ = FormClient::new(&p.app)
        .login("eve", "not eve's password")
        .await;
    let page = eve.get("/audit?kind=sign_in_refused&who=eve").await;
    let rows = entries(&page.body);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert!(rows[0].contains("wrong password"), "{}", rows[0]);
}
