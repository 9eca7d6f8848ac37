//! The resolved cases in the queue show the provider's reference each
//! resolution recorded, as text, copyable; the API lists it too.

use reqwest::StatusCode;
use unicity::auth::Role;

use crate::support::forms::signed_in;
use crate::support::pages::{Pages, resolve_as_distinct};

/// A reference as a person might paste it, markup and quotes included.
const HOSTILE: &str = r#"re_<b>"x"&'1"#;

#[tokio::test]
async fn a_resolved_case_in_the_queue_shows_the_reference_it_was_resolved_with() {
    // Given two money cases resolved as distinct, one citing the provider's
    // refund, and a third still open
    let p = Pages::new().await;
    let cited = p.money_case("pay_ref_cited").await;
    let hostile = p.money_case("pay_ref_hostile").await;
    let open = p.money_case("pay_ref_open").await;
    let mut finance = signed_in(&p.app, "fin", Role::Finance).await;
    resolve_as_distinct(&mut finance, &cited, "re_cited_2").await;
    resolve_as_distinct(&mut finance, &hostile, HOSTILE).await;

    // When finance lists the resolved cases
    let listing = finance.get("/cases?status=resolved").await;
    assert_eq!(listing.status, StatusCode::OK);

    // Then each shows its reference beside how it was resolved, copyable
    let shown = |reference: &str| {
        format!(
            r#"provider's reference <span class="id"><code title="{reference}">{reference}</code><button type="button" class="copy" data-copy="{reference}""#
        )
    };
    assert!(
        listing.body.contains(&shown("re_cited_2")),
        "{}",
        listing.body
    );
    // escaped, never markup
    assert!(!listing.body.contains("<b>"), "raw markup in the queue");
    assert!(
        listing
            .body
            .contains(&shown("re_&#60;b&#62;&#34;x&#34;&#38;&#39;1")),
        "{}",
        listing.body
    );
    // and an open case has none
    let all = finance.get("/cases?status=all").await;
    assert_eq!(all.body.matches("provider's reference").count(), 2);
    assert!(all.body.contains(&open[..8]));

    // The API lists the same reference with each resolved case
    let api = p.app.get("/api/cases?status=all").await;
    assert_eq!(api.status, 200, "{}", api.json);
    for case in api.json["cases"].as_array().expect("cases") {
        let expected = match case["case_id"].as_str() {
            Some(id) if id == cited => serde_json::json!("re_cited_2"),
            Some(id) if id == hostile => serde_json::json!(HOSTILE),
            _ => serde_json::Value::Null,
        };
        assert_eq!(case["resolution_reference"], expected, "{case}");
    }
}
