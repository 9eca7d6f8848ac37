//! The dashboard over real HTTP: its SVG charts are well-formed and label
//! the counts of a known set of deliveries; a breaker reset needs a reason,
//! is journaled with who did it, and is offered only to those allowed.

use std::collections::BTreeMap;

use reqwest::StatusCode;
use unicity::auth::Role;

use crate::support::app::{refund, spawn_app_with};
use crate::support::counts::Counts;
use crate::support::downstream::{Behaviour, Downstream};
use crate::support::forms::{csrf_in, signed_in};

/// The `<figure id="{id}">` of a page.
fn figure<'a>(html: &'a str, id: &str) -> &'a str {
    let start = html
        .find(&format!(r#"<figure class="chart" id="{id}">"#))
        .unwrap_or_else(|| panic!("chart {id}"));
    let end = html[start..].find("</figure>").expect("figure closes") + start;
    &html[start..end]
}

/// Every `<title>` inside `svg`'s elements but its own first one.
fn titles(svg: &str) -> Vec<String> {
    svg.split("<title>")
        .skip(2)
        .map(|t| t.split("</title>").next().unwrap_or_default().to_owned())
        .collect()
}

/// `label: count` of a bar's title.
fn count(title: &str) -> (String, i64) {
    let (label, n) = title.rsplit_once(": ").expect("label: count");
    (label.to_owned(), n.parse().expect("a count"))
}

/// Checks that `svg` is well-formed XML as far as elements go: every tag
/// closes in order, every attribute value is quoted, no stray `<` or `&`.
fn assert_well_formed(svg: &str) {
    let mut open: Vec<String> = Vec::new();
    let mut rest = svg;
    while let Some(at) = rest.find('<') {
        let text = &rest[..at];
        assert!(!text.contains('>'), "stray > in {text:?}");
        for entity in text.split('&').skip(1) {
            assert!(entity.contains(';'), "unterminated entity in {text:?}");
        }
        let end = rest[at..].find('>').expect("tag closes") + at;
        let tag = &rest[at + 1..end];
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(open.pop().as_deref(), Some(name.trim()), "in {svg}");
        } else {
            let self_closing = tag.ends_with('/');
            let mut parts = tag.trim_end_matches('/').splitn(2, char::is_whitespace);
            let name = parts.next().unwrap_or_default().to_owned();
            let attributes = parts.next().unwrap_or_default();
            assert_eq!(
                attributes.matches('"').count() % 2,
                0,
                "unbalanced quotes in <{tag}>"
            );
            for pair in attributes
                .split('"')
                .step_by(2)
                .filter(|s| !s.trim().is_empty())
            {
                assert!(pair.trim().ends_with('='), "unquoted attribute in <{tag}>");
            }
            if !self_closing {
                open.push(name);
            }
        }
        rest = &rest[end + 1..];
    }
    assert!(open.is_empty(), "unclosed {open:?}");
}

#[tokio::test]
async fn the_dashboard_draws_well_formed_svg_labelled_with_the_counts_of_known_deliveries() {
    let downstream = Downstream::start(Behaviour::Apply { delay_ms: 0 }).await;
    let app = spawn_app_with(&downstream.sink_toml(2000)).await;
    let mut decided: BTreeMap<String, i64> = BTreeMap::new();
    let mut post = async |body: Vec<u8>| {
        let reply = app.post_signed("hmac", &body).await;
        let decision = reply.json["decision"].as_str().expect("decided").to_owned();
        *decided.entry(decision).or_default() += 1;
    };
    for payment in ["pay_1", "pay_2", "pay_3"] {
        post(refund(payment, 300, Some(&format!("rr_{payment}")))).await;
    }
    app.wait_applied(3).await;
    post(refund("pay_1", 300, Some("rr_pay_1"))).await;
    post(refund("pay_w", 700, None)).await;
    app.wait_applied(4).await;
    post(refund("pay_w", 700, None)).await;
    assert_eq!(
        decided,
        BTreeMap::from([
            ("ignore".to_owned(), 1),
            ("process".to_owned(), 4),
            ("reconcile".to_owned(), 1),
        ])
    );

    let mut support = signed_in(&app, "sid", Role::Support).await;
    let page = support.get("/dashboard").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    for id in [
        "per-hour",
        "reasons",
        "strengths",
        "open-cases",
        "collisions",
    ] {
        let chart = figure(&page.body, id);
        let svg = &chart[chart.find("<svg").unwrap_or_else(|| panic!("{id} draws"))..];
        assert_well_formed(&svg[..svg.find("</svg>").unwrap() + "</svg>".len()]);
    }

    // Per hour: the bars of each decision add up to what the hooks answered.
    let mut per_decision: BTreeMap<String, i64> = BTreeMap::new();
    for title in titles(figure(&page.body, "per-hour")) {
        let (label, n) = count(&title);
        let decision = label.split(" at ").next().unwrap().to_owned();
        *per_decision.entry(decision).or_default() += n;
    }
    assert_eq!(per_decision, decided);

    let reasons: Vec<(String, i64)> = titles(figure(&page.body, "reasons"))
        .iter()
        .map(|t| count(t))
        .collect();
    assert!(
        reasons.contains(&("reconcile · weak_match_critical (reconcile)".to_owned(), 1)),
        "{reasons:?}"
    );
    assert_eq!(reasons.iter().map(|(_, n)| n).sum::<i64>(), 6);
    let strengths: Vec<(String, i64)> = titles(figure(&page.body, "strengths"))
        .iter()
        .map(|t| count(t))
        .collect();
    assert!(
        strengths.contains(&("norefid-refund-fingerprint@1 (weak)".to_owned(), 2)),
        "{strengths:?}"
    );
    let ages: Vec<(String, i64)> = titles(figure(&page.body, "open-cases"))
        .iter()
        .map(|t| count(t))
        .collect();
    assert_eq!(ages[0], ("under 1 hour".to_owned(), 1), "{ages:?}");
    assert_eq!(ages.iter().map(|(_, n)| n).sum::<i64>(), 1);
    assert!(
        figure(&page.body, "collisions").contains("breaker threshold: 0.50 %"),
        "the threshold line"
    );
    // The headline figure per strategy: every referenced refund is strong;
    // of the two without a reference, neither rests on a strong key or a
    // result that exists.
    let headline = &page.body[page.body.find(r#"id="headline""#).expect("the headline")..];
    let headline = &headline[..headline.find("</section>").unwrap()];
    assert!(
        headline.contains(r#"<strong class="share">100.0 %</strong> <code>norefid-refund-ref@1</code> <span class="muted">4 of 4</span>"#),
        "{headline}"
    );
    assert!(
        headline.contains(r#"<strong class="share">0.0 %</strong> <code>norefid-refund-fingerprint@1</code> <span class="muted">0 of 2</span>"#),
        "{headline}"
    );
}

#[tokio::test]
async fn a_breaker_reset_needs_a_reason_and_is_journaled_with_who_reset_it() {
    let app = spawn_app_with(
        "[engine]\nbreaker_threshold = 0.1\nbreaker_min_deliveries = 3\nbreaker_check_ms = 300\n",
    )
    .await;
    app.post_signed("hmac", &refund("pay_b", 100, Some("rr_b")))
        .await;
    app.post_signed("hmac", &refund("pay_c", 100, Some("rr_c")))
        .await;
    app.wait_applied(2).await;
    app.post_signed("hmac", &refund("pay_b", 999, Some("rr_b")))
        .await;
    app.wait_tripped_strategies(1).await;

    // Support sees the tripped breaker, no reset form, and cannot post one.
    let mut support = signed_in(&app, "sol", Role::Support).await;
    let page = support.get("/dashboard").await;
    assert!(page.body.contains("<code>norefid-refund-ref@1</code>"));
    assert!(!page.body.contains(r#"action="/dashboard/breakers/reset""#));
    let csrf = csrf_in(&page.body);
    let form = [
        ("csrf", csrf.as_str()),
        ("strategy", "norefid-refund-ref@1"),
        ("reason", "support says so"),
    ];
    let refused = support.post("/dashboard/breakers/reset", &form).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert!(
        titles(figure(&page.body, "collisions"))
            .iter()
            .any(|t| t.starts_with("norefid-refund-ref@1: ") && t.ends_with("breaker tripped")),
        "the collision chart says it"
    );

    let mut engineer = signed_in(&app, "ed", Role::Engineer).await;
    let page = engineer.get("/dashboard").await;
    assert!(page.body.contains(r#"action="/dashboard/breakers/reset""#));
    let csrf = csrf_in(&page.body);
    let no_reason = engineer
        .post(
            "/dashboard/breakers/reset",
            &[
                ("csrf", &csrf),
                ("strategy", "norefid-refund-ref@1"),
                ("reason", " "),
            ],
        )
        .await;
    assert_eq!(no_reason.location, "/dashboard?done=reason_required");
    assert_eq!(app.journal_count("StrategyReset").await, 0);

    let done = engineer
        .post(
            "/dashboard/breakers/reset",
            &[
                ("csrf", &csrf),
                ("strategy", "norefid-refund-ref@1"),
                ("reason", "the colliding refund was a provider test"),
            ],
        )
        .await;
    assert_eq!(done.location, "/dashboard?done=reset");
    assert_eq!(app.journal_count("StrategyReset").await, 1);
    let journaled = app
        .count(
            "SELECT COUNT(*) FROM journal WHERE event_type = 'StrategyReset' AND event_version = 2 \
             AND CAST(data AS TEXT) LIKE '%the colliding refund was a provider test%' \
             AND CAST(data AS TEXT) LIKE '%operator:ed (engineer%'",
        )
        .await;
    assert_eq!(journaled, 1, "who reset it and why");
}

#[tokio::test]
async fn the_strategies_page_tells_an_engineer_what_each_version_keyed_and_why_its_breaker_did_not_trip()
 {
    let app = spawn_app_with("").await;
    for payment in ["pay_st1", "pay_st2"] {
        let reply = app
            .post_signed(
                "hmac",
                &refund(payment, 300, Some(&format!("rr_{payment}"))),
            )
            .await;
        assert_eq!(reply.json["decision"], "process", "{}", reply.json);
    }
    app.wait_applied(2).await;
    let held = app.post_signed("hmac", &refund("pay_st3", 700, None)).await;
    app.wait_applied(3).await;
    let twin = app.post_signed("hmac", &refund("pay_st3", 700, None)).await;
    assert_eq!(
        twin.json["decision"], "reconcile",
        "{} {}",
        held.json, twin.json
    );

    let mut support = signed_in(&app, "sue", Role::Support).await;
    assert_eq!(
        support.get("/strategies").await.status,
        StatusCode::FORBIDDEN
    );
    let mut engineer = signed_in(&app, "eve", Role::Engineer).await;
    let page = engineer.get("/strategies").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let row = |strategy: &str| -> String {
        let start = page
            .body
            .find(&format!(r#"id="{strategy}""#))
            .unwrap_or_else(|| panic!("{strategy} listed: {}", page.body));
        let end = page.body[start..].find("</tr>").unwrap() + start;
        page.body[start..end].to_owned()
    };
    let referenced = row("strategy-norefid-refund-ref@1");
    assert!(
        referenced.contains(r#"<td class="deliveries">2</td>"#),
        "{referenced}"
    );
    assert!(
        referenced.contains(r#"<td class="effects">2</td>"#),
        "{referenced}"
    );
    assert!(
        referenced.contains(r#"<td class="keys-alive">2</td>"#),
        "{referenced}"
    );
    let fingerprint = row("strategy-norefid-refund-fingerprint@1");
    assert!(
        fingerprint.contains(r#"<td class="open-cases">1</td>"#),
        "{fingerprint}"
    );
    let breaker = row("breaker-norefid-refund-fingerprint@1");
    assert!(
        breaker.contains("but a rate is judged from 200 deliveries on"),
        "the minimum is said: {breaker}"
    );
    // A version that keyed nothing is listed apart.
    let unused = &page.body[page.body.find(r#"id="unused""#).unwrap()..];
    assert!(unused.contains("<code>stripe-refund@1</code>"), "{unused}");
}

/// Engineers reset breakers. One demoted while the reset waited for the
/// database resets nothing: the role is read again where the reset commits.
#[tokio::test]
async fn a_reset_that_waited_while_its_author_was_demoted_resets_nothing() {
    use crate::support::held::AdminChange;
    use unicity::auth::{Principal, PrincipalKind};
    use unicity::services::breakers::{self, PersonsReset};
    let app = spawn_app_with(
        "[engine]\nbreaker_threshold = 0.1\nbreaker_min_deliveries = 3\nbreaker_check_ms = 100\n",
    )
    .await;
    // Given a tripped breaker, and eve, an engineer, asking to reset it
    app.post_signed("hmac", &refund("pay_r0", 50, Some("rr_r0")))
        .await;
    app.collide("pay_r1", 2).await;
    app.wait_journal("StrategyTripped", 1).await;
    let probe = crate::support::probe::Probe::of(&app.db);
    let strategy = probe.rows("SELECT strategy FROM strategy_breakers").await[0][0]
        .clone()
        .expect("a strategy");
    let id = crate::support::forms::operator(&app, "eve", Role::Engineer).await;
    let eve = Principal {
        kind: PrincipalKind::Operator,
        id,
        name: "eve".to_owned(),
        role: Role::Engineer,
    };
    // While an admin's transaction demoting her holds her row (and, on
    // SQLite, the database's write lock)
    let demoting = AdminChange::begin(&app.database_url).await;
    demoting
        .execute("UPDATE operators SET role = 'support' WHERE name = 'eve'")
        .await;
    let db = app.db.clone();
    let resetting = tokio::spawn(async move {
        breakers::reset_by(&db, &strategy, &eve, "false alarm".to_owned()).await
    });
    // When the demotion commits once the reset waits on it
    demoting.commit_once_waited_on().await;
    // Then she resets nothing: the breaker stays tripped
    let outcome = resetting.await.expect("no panic").expect("no error");
    assert_eq!(outcome, PersonsReset::Forbidden);
    assert_eq!(app.journal_count("StrategyReset").await, 0);
    assert_eq!(app.count("SELECT COUNT(*) FROM strategy_breakers").await, 1);
}
