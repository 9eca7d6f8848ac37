//! A fixture is committed to a repository: what it holds leaves the system.
//! No value a strategy declares sensitive is in it — not a number nor any
//! leaf of an object at a sensitive path, not a value sent with JSON escapes,
//! not the same value in the resolution's note or in what the provider's API
//! was asked — nor a header the source masks; and it still replays as it was
//! decided and resolved.

use serde_json::{Value, json};
use unicity::domain::fixture::{Delivery, Fixture};
use unicity::services::fixtures;

use crate::support::app::{TestApp, fresh_database, spawn_app};
use crate::support::counts::Counts;

/// The case `case_id`, resolved, as the case page exports it: the file's
/// text and the fixture.
async fn exported(app: &TestApp, case_id: &str) -> (String, Fixture) {
    let response = app
        .client
        .get(format!("{}/cases/{case_id}/fixture", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    let fixture = serde_json::from_str(&text).expect("a fixture");
    (text, fixture)
}

/// The differences a replay of `fixture` on a fresh database finds, its
/// strategies configured as `base` (a configuration file's text).
async fn differences(fixture: &Fixture, base: &str) -> Vec<String> {
    let (url, _dir) = fresh_database().await;
    fixtures::replay(fixture, base, &url)
        .await
        .expect("the replay runs")
        .differences()
}

/// A delivery's body as the replay reads it.
fn document(delivery: &Delivery) -> Value {
    serde_json::from_slice(&delivery.bytes().unwrap()).expect("a JSON body")
}

/// Posts `first` then `second` (signed, on `slug`) and returns the case the
/// second opened as a weak match of the first.
async fn weak_match(app: &TestApp, slug: &str, first: &[u8], second: &[u8]) -> String {
    let one = app.post_signed(slug, first).await;
    assert_eq!(one.json["decision"], "process", "{}", one.json);
    app.wait_applied(1).await;
    let two = app.post_signed(slug, second).await;
    assert_eq!(two.json["reason"], "weak_match_critical", "{}", two.json);
    two.json["case_id"].as_str().expect("a case").to_owned()
}

#[tokio::test]
async fn a_sensitive_value_sent_with_json_escapes_is_masked_and_the_fixture_still_replays() {
    let app = spawn_app().await;
    // The same customer email, once with escapes (`\u00eb`, `\/`), once as
    // plain UTF-8: one value, two encodings.
    let body = |sent: &str, email: &str| {
        format!(
            r#"{{"type":"refund.created","payment_id":"pay_esc","amount":700,"currency":"EUR","sent_at":"{sent}","customer_email":"{email}"}}"#
        )
        .into_bytes()
    };
    let escaped = body("2026-12-02T10:00:00Z", r"zo\u00eb.privata\/x@example.org");
    let plain = body("2026-12-02T10:00:05Z", "zoë.privata/x@example.org");
    let case_id = weak_match(&app, "hmac", &escaped, &plain).await;
    let resolved = app
        .resolve(
            &case_id,
            json!({"resolution": "confirm_duplicate", "note": "one refund: a retry"}),
        )
        .await;
    assert_eq!(resolved.status, 200);
    let (text, fixture) = exported(&app, &case_id).await;
    // Neither encoding is in the file nor in the bytes a replay sends,
    assert!(!text.contains("privata"), "{text}");
    let emails: Vec<Value> = fixture
        .deliveries
        .iter()
        .map(|d| {
            let bytes = d.bytes().unwrap();
            assert!(
                !String::from_utf8_lossy(&bytes).contains("privata"),
                "{}",
                String::from_utf8_lossy(&bytes)
            );
            document(d)["customer_email"].clone()
        })
        .collect();
    // both read as one masked value,
    assert!(
        emails[0].as_str().unwrap().starts_with("masked-"),
        "{emails:?}"
    );
    assert_eq!(emails[0], emails[1]);
    // and the fixture replays as it was decided and resolved.
    let base = unicity::config::FileConfig::read(None).unwrap();
    assert_eq!(differences(&fixture, &base).await, Vec::<String>::new());
}
