//! The search page and the support page of a delivery, over HTTP with a
//! signed-in operator: a support agent reads why a refund was ignored, and
//! webhook values (body, header names and values, field names, event types)
//! render as text, never as markup.

use reqwest::StatusCode;
use serde_json::json;
use unicity::auth::Role;

use crate::search::found;
use crate::support::app::{id_of, refund, spawn_app};
use crate::support::counts::Counts;
use crate::support::forms::{FormClient, signed_in};

const SCRIPT: &str = "<script>alert(1)</script>";
const IMG: &str = "\"><img src=x onerror=alert(1)>";

/// The text of the element `id="sentence"`.
fn sentence(html: &str) -> &str {
    let start = html.find(r#"id="sentence">"#).expect("a sentence");
    let rest = &html[start..];
    &rest[..rest.find("</p>").expect("its end")]
}

#[tokio::test]
async fn a_support_agent_reads_why_a_refund_was_ignored_and_which_delivery_was_first() {
    let app = spawn_app().await;
    let first = app
        .post_signed("hmac", &refund("pay_support", 1500, Some("rr_s")))
        .await;
    app.wait_applied(1).await;
    let retry = app
        .post_signed("hmac", &refund("pay_support", 1500, Some("rr_s")))
        .await;
    assert_eq!(retry.json["decision"], "ignore", "{}", retry.json);
    let (first, retry) = (id_of(&first), id_of(&retry));
    let mut browser = signed_in(&app, "agent-support", Role::Support).await;

    // Found by the payment id, both of them, each linking to its page.
    let search = browser.get("/deliveries?q=pay_support").await;
    assert_eq!(search.status, StatusCode::OK, "{}", search.body);
    for id in [&first, &retry] {
        assert!(search.body.contains(&format!(r#"href="/deliveries/{id}""#)));
    }
    assert!(search.body.contains("duplicate_of_applied"));

    let page = browser.get(&format!("/deliveries/{retry}")).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let why = sentence(&page.body);
    assert!(why.contains("Ignored"), "{why}");
    assert!(
        why.contains(&format!(r#"href="/deliveries/{first}""#)),
        "the sentence names the first delivery: {why}"
    );
    for shown in [
        "duplicate_of_applied",
        "norefid-refund-ref@1",
        "strong",
        "applied",
        "same business key",
        "DecisionMade",
        "pay_support",
    ] {
        assert!(page.body.contains(shown), "{shown} missing");
    }
    // The timeline holds the first reception, and says which one this is.
    assert!(
        page.body
            .contains(&format!(r#"href="/deliveries/{first}">open"#))
    );
    assert!(page.body.contains("this one"));
    // A key read from named fields shows them; one that hashes the body says
    // so instead of showing a second copy of it.
    assert!(page.body.contains("Key material (sensitive values masked)"));
    assert!(page.body.contains("rr_s"));
    let hashed = app
        .post_signed("hmac", &refund("pay_support", 700, None))
        .await;
    let hashed = browser
        .get(&format!("/deliveries/{}", id_of(&hashed)))
        .await;
    assert!(
        hashed.body.contains("computed from the body itself"),
        "{}",
        hashed.body
    );
    assert!(
        !hashed
            .body
            .contains("Key material (sensitive values masked)")
    );

    let unknown = browser
        .get("/deliveries/0190f0e0-0000-7000-8000-000000000000")
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    let anonymous = FormClient::new(&app)
        .get(&format!("/deliveries/{retry}"))
        .await;
    assert_eq!(
        anonymous.location,
        format!("/login?next=%2Fdeliveries%2F{retry}")
    );
}

/// `raw` as HTML text, with named or numeric character references.
fn as_text(raw: &str) -> [String; 2] {
    let named = [
        ("&", "&amp;"),
        ("<", "&lt;"),
        (">", "&gt;"),
        ("\"", "&quot;"),
        ("'", "&#39;"),
    ];
    let numeric = [
        ("&", "&#38;"),
        ("<", "&#60;"),
        (">", "&#62;"),
        ("\"", "&#34;"),
        ("'", "&#39;"),
    ];
    [named, numeric].map(|table| {
        raw.chars()
            .map(|c| {
                let c = c.to_string();
                table
                    .iter()
                    .find(|(from, _)| *from == c)
                    .map_or(c.clone(), |(_, to)| (*to).to_owned())
            })
            .collect()
    })
}

fn shown_as_text(html: &str, raw: &str) -> bool {
    as_text(raw).iter().any(|text| html.contains(text.as_str()))
}

fn escaped(html: &str) {
    for raw in [SCRIPT, "<img src=x onerror=alert(1)>", "x-it's&amp"] {
        assert!(!html.contains(raw), "{raw} unescaped");
    }
    assert!(shown_as_text(html, SCRIPT), "{html}");
}

#[tokio::test]
async fn webhook_values_render_as_text_on_the_search_and_delivery_pages() {
    let app = spawn_app().await;
    let body = json!({
        "type": "refund.created",
        "payment_id": "pay_xss",
        "amount": 100,
        "currency": "EUR",
        "refund_reference": "r",
        "note": SCRIPT,
        "other": IMG,
        SCRIPT: 1,
        IMG: true,
    });
    let headers = [
        ("x-note".to_owned(), SCRIPT.to_owned()),
        ("x-other".to_owned(), IMG.to_owned()),
        // `'` and `&` are the markup characters a header name may hold.
        ("x-it's&amp".to_owned(), "1".to_owned()),
    ];
    let posted = app
        .post_raw("open", serde_json::to_vec(&body).unwrap(), &headers)
        .await;
    assert_eq!(posted.status, 202, "{}", posted.json);
    // An event type is a webhook value the search results show.
    let typed = json!({"type": SCRIPT, "payment_id": "pay_xss"});
    let typed = app
        .post_raw("open", serde_json::to_vec(&typed).unwrap(), &[])
        .await;
    assert_eq!(typed.status, 202, "{}", typed.json);
    assert_eq!(found(&app, "q=pay_xss").await.len(), 2);

    let mut browser = signed_in(&app, "agent-support", Role::Support).await;
    let search = browser.get("/deliveries?q=pay_xss").await;
    assert_eq!(search.status, StatusCode::OK);
    escaped(&search.body);
    for id in [id_of(&posted), id_of(&typed)] {
        let page = browser.get(&format!("/deliveries/{id}")).await;
        assert_eq!(page.status, StatusCode::OK);
        escaped(&page.body);
    }
    let page = browser
        .get(&format!("/deliveries/{}", id_of(&posted)))
        .await;
    for raw in ["x-it's&amp", IMG] {
        assert!(shown_as_text(&page.body, raw), "{raw} as text");
    }
}

/// A payment id that, rendered raw, reads right to left from the override:
/// `pay_` then `exe.gnp` reversed, so the id seems to be another.
const SPOOFED: &str = "pay_\u{202E}exe.gnp";

#[tokio::test]
async fn a_bidi_override_in_a_received_id_is_shown_written_out_never_raw() {
    let app = spawn_app().await;
    let mut body = json!({
        "type": "refund.created",
        "payment_id": SPOOFED,
        "amount": 100,
        "currency": "EUR",
        "refund_reference": "rr_\u{2066}bidi\u{2069}",
        "note": "\u{200F}\u{061C}\u{200E}",
    });
    body["sent_at"] = json!("t1");
    let headers = [("x-note".to_owned(), "left\u{202D}right".to_owned())];
    let posted = app
        .post_raw("open", serde_json::to_vec(&body).unwrap(), &headers)
        .await;
    assert_eq!(posted.status, 202, "{}", posted.json);
    let id = id_of(&posted);
    let controls = |html: &str| -> Vec<char> {
        html.chars()
            .filter(|c| {
                matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
            })
            .collect()
    };

    let mut browser = signed_in(&app, "agent-support", Role::Support).await;
    let page = browser.get(&format!("/deliveries/{id}")).await;
    assert_eq!(page.status, StatusCode::OK);
    assert_eq!(
        controls(&page.body),
        Vec::<char>::new(),
        "raw controls on the delivery page"
    );
    // The payment id (its resource, its body, its key material), the
    // reference, a header value: each written out, escaped as HTML.
    for shown in [
        "pay_&#60;U+202E&#62;exe.gnp",
        "rr_&#60;U+2066&#62;bidi&#60;U+2069&#62;",
        "&#60;U+200F&#62;&#60;U+061C&#62;&#60;U+200E&#62;",
        "left&#60;U+202D&#62;right",
    ] {
        assert!(page.body.contains(shown), "{shown} not on the page");
    }
    assert!(
        page.body
            .contains("<code>pay_&#60;U+202E&#62;exe.gnp</code>"),
        "the resource"
    );

    // Searched for by the id as received, or as written out on the page.
    let asked = serde_urlencoded::to_string([("q", SPOOFED)]).unwrap();
    let copied = serde_urlencoded::to_string([("q", "pay_<U+202E>exe.gnp")]).unwrap();
    for query in [asked, copied] {
        let search = browser.get(&format!("/deliveries?{query}")).await;
        assert_eq!(search.status, StatusCode::OK);
        assert!(
            search.body.contains(&format!(r#"href="/deliveries/{id}""#)),
            "{query} finds it"
        );
        assert_eq!(
            controls(&search.body),
            Vec::<char>::new(),
            "raw controls in the results"
        );
        assert!(
            search
                .body
                .contains(r#"value="pay_&#60;U+202E&#62;exe.gnp""#),
            "the query shown written out"
        );
    }
}
