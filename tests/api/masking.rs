//! Secrets and sensitive values: secret headers never reach the journal or a
//! view, and `sensitive` body values are masked in every view.

use serde_json::Value;
use unicity::providers::signature;

use crate::helpers::{TestApp, refund, spawn_app, spawn_app_with};

/// A signed source that masks one header of its own on top of the defaults.
const PARTNER: &str = r#"
[[sources]]
slug = "partner"
tenant = "acme"
provider = "norefid"
demo_secret = "partner-test-secret"
masked_headers = ["X-Partner-Pin"]
signature = { scheme = "hmac", header = "x-signature", encoding = "hex" }
"#;

const API_KEY: &str = "sk_live_secret123";
const PIN: &str = "pin-5550-8732-secret";
const EMAIL: &str = "ann.customer@example.com";

/// Posts `body` to the partner source with the secret headers, signed with
/// `secret`.
async fn post_partner(app: &TestApp, secret: &str, body: &[u8]) -> crate::helpers::Reply {
    let scheme = &app.source("partner").scheme;
    let mut headers = signature::sign(scheme, secret, "m", 0, body).expect("signable");
    headers.push(("x-api-key".to_owned(), API_KEY.to_owned()));
    headers.push(("x-partner-pin".to_owned(), PIN.to_owned()));
    app.post_raw("partner", body.to_vec(), &headers).await
}

/// How many journal rows hold `text` anywhere in their payload.
async fn journal_rows_containing(app: &TestApp, text: &str) -> i64 {
    app.count(&format!(
        "SELECT COUNT(*) FROM journal WHERE CAST(data AS TEXT) LIKE '%{text}%'"
    ))
    .await
}

fn header<'a>(view: &'a Value, name: &str) -> Option<&'a str> {
    view["headers"]
        .as_array()?
        .iter()
        .find(|h| h[0] == name)
        .and_then(|h| h[1].as_str())
}

#[tokio::test]
async fn default_and_configured_secret_headers_are_masked_in_the_view_and_the_journal() {
    let app = spawn_app_with(PARTNER).await;
    let accepted = post_partner(
        &app,
        "partner-test-secret",
        &refund("pay_1", 100, Some("rr_1")),
    )
    .await;
    assert_eq!(accepted.status, 202, "{}", accepted.json);
    let rejected = post_partner(&app, "not-the-secret", &refund("pay_2", 100, Some("rr_2"))).await;
    assert_eq!(rejected.status, 401, "{}", rejected.json);

    for reply in [&accepted, &rejected] {
        let id = reply.json["delivery_id"].as_str().expect("journaled");
        let view = app.delivery(id).await;
        assert_eq!(view.status, 200);
        let text = view.json.to_string();
        assert!(!text.contains(API_KEY), "{text}");
        assert!(!text.contains(PIN), "{text}");
        // The headers are kept, their values masked.
        assert_eq!(header(&view.json, "x-api-key"), Some("[redacted]"));
        assert_eq!(header(&view.json, "x-partner-pin"), Some("[redacted]"));
    }
    assert_eq!(journal_rows_containing(&app, "x-partner-pin").await, 2);
    assert_eq!(journal_rows_containing(&app, API_KEY).await, 0);
    assert_eq!(journal_rows_containing(&app, PIN).await, 0);
}

fn with_email(body: &[u8]) -> Vec<u8> {
    let mut value: Value = serde_json::from_slice(body).expect("json");
    value["customer_email"] = Value::String(EMAIL.to_owned());
    serde_json::to_vec(&value).expect("json")
}

#[tokio::test]
async fn a_sensitive_field_is_masked_everywhere_in_the_view_and_decisions_are_unchanged() {
    let app = spawn_app().await;
    // Without a refund reference the key is the canonical body, email sealed in.
    let body = with_email(&refund("pay_1", 1500, None));
    let first = app.post_raw("open", body.clone(), &[]).await;
    assert_eq!(first.status, 202, "{}", first.json);
    assert_eq!(first.json["strategy"], "norefid-refund-fingerprint@1");
    // Keys still see the clear value: the same refund matches, another
    // customer's otherwise equal refund does not.
    let retry = app.post_raw("open", body, &[]).await;
    assert_eq!(retry.json["key"], first.json["key"]);
    assert_eq!(
        retry.json["reason"], "weak_match_critical",
        "{}",
        retry.json
    );
    let mut other: Value =
        serde_json::from_slice(&with_email(&refund("pay_1", 1500, None))).unwrap();
    other["customer_email"] = Value::String("bob@example.com".to_owned());
    let other = app
        .post_raw("open", serde_json::to_vec(&other).unwrap(), &[])
        .await;
    assert_ne!(other.json["key"], first.json["key"]);
    assert_eq!(other.json["decision"], "process", "{}", other.json);

    let id = first.json["delivery_id"].as_str().expect("id");
    let view = app.delivery(id).await;
    assert_eq!(view.status, 200);
    let text = view.json.to_string();
    assert!(!text.contains(EMAIL), "{text}");
    assert!(!text.contains("ann.customer"), "{text}");
    // The body keeps every other value, and shows the email as the same
    // keyed tag the identity's material shows.
    let tag = view.json["body"]["customer_email"].as_str().expect("tag");
    assert!(tag.starts_with("hmac:") && tag.ends_with('…'), "{tag}");
    assert_eq!(view.json["body"]["payment_id"], "pay_1");
    assert!(text.matches(tag).count() >= 2, "{text}");
    assert_eq!(view.json["decision"]["action"], first.json["decision"]);
}
