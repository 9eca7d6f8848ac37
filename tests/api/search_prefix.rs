//! Finding deliveries by the beginning of an id, how many match, pages back
//! as well as forward, and "did you mean" when nothing matches:
//! `GET /api/deliveries` and the search page, on each backend.

use chrono::{Duration, Utc};
use reqwest::StatusCode;
use sea_orm::EntityTrait;
use serde_json::{Value, json};
use unicity::auth::Role;
use unicity::store::entities::delivery;

use crate::search::{PRIVATE_SOURCE, found};
use crate::support::app::{TestApp, id_of, refund, spawn_app, spawn_app_with};
use crate::support::forms::signed_in;

fn q(value: &str) -> String {
    serde_urlencoded::to_string([("q", value)]).expect("query")
}

/// A refund of `payment` on the unsigned source: its delivery id.
async fn refund_of(app: &TestApp, payment: &str) -> String {
    let reply = app
        .post_raw("open", refund(payment, 100, Some("rr_prefix")), &[])
        .await;
    assert_eq!(reply.status, 202, "{}", reply.json);
    id_of(&reply)
}

async fn answer(app: &TestApp, query: &str) -> Value {
    let reply = app.get(&format!("/api/deliveries?{query}")).await;
    assert_eq!(reply.status, 200, "{query}: {}", reply.json);
    reply.json
}

#[tokio::test]
async fn a_trailing_star_finds_every_id_that_starts_with_what_was_typed() {
    // Given three refunds, two of payments that share a beginning
    let app = spawn_app_with(PRIVATE_SOURCE).await;
    let alpha_1 = refund_of(&app, "pay_pfx_alpha_1").await;
    let alpha_2 = refund_of(&app, "pay_pfx_alpha_2").await;
    let beta = refund_of(&app, "pay_pfx_beta_1").await;

    // the payment ids' beginnings find them, in any case, newest first
    assert_eq!(
        found(&app, &q("pay_pfx_alpha*")).await,
        [alpha_2.clone(), alpha_1.clone()]
    );
    assert_eq!(
        found(&app, &q(" PAY_PFX_* ")).await,
        [beta.clone(), alpha_2.clone(), alpha_1.clone()]
    );
    // while without the star the text is still matched whole
    assert!(found(&app, &q("pay_pfx_alpha")).await.is_empty());
    // a delivery id by its beginning
    let head = &alpha_1[..alpha_1.len() - 4];
    assert_eq!(
        found(&app, &q(&format!("{head}*"))).await,
        std::slice::from_ref(&alpha_1)
    );
    // every key of a strategy by its name and version
    let key = app.delivery(&beta).await.json["identity"]["business"]["key"]
        .as_str()
        .expect("a business key")
        .to_owned();
    let strategy = &key[..=key.find(':').expect("name@version:…")];
    assert_eq!(found(&app, &q(&format!("{strategy}*"))).await.len(), 3);

    // Too short a beginning is refused with a reason, on the API and the page
    let short = app.get(&format!("/api/deliveries?{}", q("pay_p*"))).await;
    assert_eq!(short.status, 400, "{}", short.json);
    assert_eq!(short.json["code"], "invalid_search");
    assert!(
        short.json["message"]
            .as_str()
            .is_some_and(|m| m.contains("at least 6 characters")),
        "{}",
        short.json
    );
    let mut browser = signed_in(&app, "sam", Role::Support).await;
    let page = browser.get(&format!("/deliveries?{}", q("pay_p*"))).await;
    assert_eq!(page.status, StatusCode::BAD_REQUEST);
    assert!(page.body.contains("at least 6 characters before the *"));
    // and the page says which searches take a beginning, and which do not
    let page = browser.get("/deliveries").await;
    assert!(
        page.body.contains("End with <code>*</code>"),
        "{}",
        page.body
    );
    assert!(page.body.contains("found whole and exactly as stored"));

    // A payment id kept as its keyed hash is found whole, never by its beginning
    let mut body: Value = serde_json::from_slice(&refund("pay_private_1", 100, Some("r"))).unwrap();
    body["customer_email"] = json!("ann.prefix@example.com");
    let sealed = app
        .post_raw("private", serde_json::to_vec(&body).unwrap(), &[])
        .await;
    assert_eq!(sealed.status, 202, "{}", sealed.json);
    assert_eq!(
        found(&app, &q("ann.prefix@example.com")).await,
        [id_of(&sealed)]
    );
    assert!(found(&app, &q("ann.prefix*")).await.is_empty());
}

/// `n` deliveries of payments `pay_bulk_00000`…, a second apart, written
/// straight into the search's table (the count is what is tested).
async fn bulk(app: &TestApp, n: usize) {
    let now = Utc::now();
    let rows: Vec<delivery::ActiveModel> = (0..n)
        .map(|i| {
            let row = delivery::Model {
                delivery_id: uuid::Uuid::now_v7().to_string(),
                source: "open".into(),
                tenant: "acme".into(),
                provider: "norefid".into(),
                environment: "test".into(),
                received_at: now - Duration::seconds(i as i64 + 60),
                status: "decided".into(),
                event_type: Some("refund.created".into()),
                provider_event_id: None,
                transport_key: None,
                business_key: None,
                strategy: None,
                strength: None,
                decision: Some("process".into()),
                reason: Some("new_key".into()),
                layer: None,
                reference_delivery_id: None,
                effect_id: None,
                case_id: None,
                decided_at: None,
                resource: Some(format!("pay_bulk_{i:05}")),
                received_position: None,
            };
            sea_orm::IntoActiveModel::into_active_model(row)
        })
        .collect();
    for chunk in rows.chunks(200) {
        delivery::Entity::insert_many(chunk.to_vec())
            .exec_without_returning(&app.db)
            .await
            .expect("rows written");
    }
}

#[tokio::test]
async fn a_search_says_how_many_deliveries_match_up_to_a_thousand() {
    let app = spawn_app().await;
    for payment in ["pay_count_1", "pay_count_2", "pay_count_3"] {
        refund_of(&app, payment).await;
    }
    // the count covers every page, not only the one shown
    let three = answer(&app, &format!("{}&limit=2", q("pay_count*"))).await;
    assert_eq!(three["deliveries"].as_array().map(Vec::len), Some(2));
    assert_eq!(three["total"], json!({"count": 3, "more": false}));
    let one = answer(&app, &q("pay_count_2")).await;
    assert_eq!(one["total"], json!({"count": 1, "more": false}));

    // past a thousand, counting stops and says so
    bulk(&app, 1001).await;
    let many = answer(&app, &q("pay_bulk_*")).await;
    assert_eq!(many["total"], json!({"count": 1000, "more": true}));
    assert_eq!(many["deliveries"].as_array().map(Vec::len), Some(50));
    let exactly = answer(&app, &q("pay_bulk_0099*")).await;
    assert_eq!(exactly["total"], json!({"count": 10, "more": false}));

    let mut browser = signed_in(&app, "sam", Role::Support).await;
    for (query, says) in [
        (q("pay_count*"), "3 deliveries match."),
        (q("pay_count_2"), "1 delivery matches."),
        (q("pay_bulk_*"), "More than 1,000 deliveries match."),
    ] {
        let page = browser.get(&format!("/deliveries?{query}")).await;
        assert_eq!(page.status, StatusCode::OK);
        assert!(page.body.contains(says), "{query}: {says}");
    }
}

/// The ids of a page and its two cursors.
fn page_of(json: &Value) -> (Vec<String>, Option<String>, Option<String>) {
    let ids = json["deliveries"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|d| d["delivery_id"].as_str().expect("id").to_owned())
        .collect();
    let cursor = |name: &str| json[name].as_str().map(str::to_owned);
    (ids, cursor("next_cursor"), cursor("previous_cursor"))
}

#[tokio::test]
async fn pages_go_back_the_way_they_came_forward() {
    let app = spawn_app().await;
    for i in 0..7 {
        refund_of(&app, &format!("pay_back_{i}")).await;
    }
    let search = format!("{}&limit=3", q("pay_back*"));
    // forward: 3, 3, 1
    let first = page_of(&answer(&app, &search).await);
    assert_eq!(first.2, None, "nothing before the first page");
    let second = page_of(
        &answer(
            &app,
            &format!("{search}&cursor={}", first.1.clone().unwrap()),
        )
        .await,
    );
    let third = page_of(
        &answer(
            &app,
            &format!("{search}&cursor={}", second.1.clone().unwrap()),
        )
        .await,
    );
    assert_eq!((first.0.len(), second.0.len(), third.0.len()), (3, 3, 1));
    assert_eq!(third.1, None, "nothing after the last page");
    // back: the same pages, the same rows
    let back = page_of(
        &answer(
            &app,
            &format!("{search}&before={}", third.2.clone().unwrap()),
        )
        .await,
    );
    assert_eq!(back.0, second.0);
    assert_eq!(back.1, second.1, "and forward again from there");
    let back = page_of(
        &answer(
            &app,
            &format!("{search}&before={}", back.2.clone().unwrap()),
        )
        .await,
    );
    assert_eq!(back.0, first.0);
    assert_eq!(back.2, None, "back at the first page");

    let cursor = first.1.clone().unwrap();
    let both = app
        .get(&format!(
            "/api/deliveries?{search}&cursor={cursor}&before={cursor}"
        ))
        .await;
    assert_eq!(both.status, 400, "{}", both.json);
    assert_eq!(both.json["code"], "invalid_search");

    // The page links to the pages on either side, keeping the search
    let mut browser = signed_in(&app, "sam", Role::Support).await;
    let html = browser
        .get(&format!("/deliveries?{search}&cursor={cursor}"))
        .await;
    assert_eq!(html.status, StatusCode::OK);
    assert!(html.body.contains(r#"rel="prev""#), "{}", html.body);
    assert!(html.body.contains(r#"rel="next""#));
    assert!(html.body.contains("before="), "a previous page link");
    assert!(html.body.contains("q=pay_back*") || html.body.contains("q=pay_back%2A"));
    let html = browser.get(&format!("/deliveries?{search}")).await;
    assert!(
        !html.body.contains(r#"rel="prev""#),
        "none before the first page"
    );
}

#[tokio::test]
async fn nothing_found_proposes_the_ids_stored_next_to_what_was_typed() {
    let app = spawn_app_with(PRIVATE_SOURCE).await;
    let near = refund_of(&app, "pay_near_123456").await;

    // a wrong last character, a swap, a missing end
    for typed in ["pay_near_123457", "pay_naer_123456", "PAY_NEAR_1234567"] {
        let answer = answer(&app, &q(typed)).await;
        assert_eq!(answer["total"]["count"], 0, "{typed}");
        assert_eq!(
            answer["suggestions"],
            json!([{"text": "pay_near_123456", "field": "resource"}]),
            "{typed}"
        );
    }
    // a delivery id with one character wrong
    let typo = format!("{}0", &near[..near.len() - 1]);
    let typo = if typo == near {
        format!("{}1", &near[..near.len() - 1])
    } else {
        typo
    };
    let wrong = answer(&app, &q(&typo)).await;
    assert_eq!(
        wrong["suggestions"],
        json!([{"text": near, "field": "delivery_id"}])
    );
    // nothing near: nothing proposed; something found: nothing proposed
    assert_eq!(
        answer(&app, &q("zzz_nothing_here")).await["suggestions"],
        json!([])
    );
    assert_eq!(
        answer(&app, &q("pay_near_123456")).await["suggestions"],
        json!([])
    );
    // A keyed hash is never proposed, even to someone typing one
    let mut body: Value = serde_json::from_slice(&refund("pay_private_2", 100, Some("r"))).unwrap();
    body["customer_email"] = json!("bob.near@example.com");
    let sealed = app
        .post_raw("private", serde_json::to_vec(&body).unwrap(), &[])
        .await;
    assert_eq!(sealed.status, 202, "{}", sealed.json);
    let hash = answer(&app, &q("bob.near@example.com")).await["deliveries"][0]["resource"]
        .as_str()
        .expect("the stored hash")
        .to_owned();
    assert!(hash.starts_with("hmac:"), "{hash}");
    let almost = format!("{}x", &hash[..hash.len() - 1]);
    assert_eq!(answer(&app, &q(&almost)).await["suggestions"], json!([]));

    // On the page: what was typed, escaped, and links to the proposals
    let hostile = r#"pay_<i>"q"&'1"#;
    refund_of(&app, hostile).await;
    let mut browser = signed_in(&app, "sam", Role::Support).await;
    let typed = r#"pay_<i>"q"&'2"#;
    let page = browser.get(&format!("/deliveries?{}", q(typed))).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(!page.body.contains("<i>"), "raw markup on the page");
    assert!(
        page.body.contains(
            "No match for <code>pay_&#60;i&#62;&#34;q&#34;&#38;&#39;2</code>; did you mean:"
        ),
        "{}",
        page.body
    );
    let link = format!("/deliveries?{}", q(hostile)).replace('&', "&#38;");
    assert!(
        page.body.contains(&format!(r#"href="{link}""#)),
        "{link} in {}",
        page.body
    );
    assert!(
        page.body
            .contains("<code>pay_&#60;i&#62;&#34;q&#34;&#38;&#39;1</code>")
    );
    // and the proposal's link finds it
    let proposed = browser.get(&format!("/deliveries?{}", q(hostile))).await;
    assert!(proposed.body.contains("1 delivery matches."));
}

#[tokio::test]
async fn an_event_type_ending_in_a_star_finds_every_type_that_begins_so() {
    let app = spawn_app().await;
    let post = |kind: &'static str, payment: &'static str| {
        let app = &app;
        async move {
            let mut body: Value = serde_json::from_slice(&refund(payment, 100, None)).unwrap();
            body["type"] = json!(kind);
            let reply = app
                .post_raw("open", serde_json::to_vec(&body).unwrap(), &[])
                .await;
            assert!((200..300).contains(&reply.status), "{}", reply.json);
            id_of(&reply)
        }
    };
    let created = post("refund.created", "pay_evt_1").await;
    let updated = post("refund.updated", "pay_evt_2").await;
    let other = post("charge.succeeded", "pay_evt_3").await;

    let by_type = |t: &'static str| {
        let app = &app;
        async move {
            found(
                app,
                &serde_urlencoded::to_string([("event_type", t)]).unwrap(),
            )
            .await
        }
    };
    assert_eq!(
        by_type("refund.*").await,
        [updated.clone(), created.clone()]
    );
    assert_eq!(
        by_type("refund.created").await,
        std::slice::from_ref(&created)
    );
    assert!(
        by_type("refund").await.is_empty(),
        "without the star, the type whole"
    );
    assert_eq!(by_type("*").await, [other, updated, created]);
}
