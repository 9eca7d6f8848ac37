//! A Standard Webhooks source receiving deliveries as Svix sends them: the same
//! signature under `svix-id`, `svix-timestamp` and `svix-signature`.

use unicity::providers::signature;

use crate::support::app::{Reply, TestApp, secret_of, spawn_app};
use crate::support::counts::Counts;

const BODY: &[u8] = br#"{"type":"contact.created","timestamp":"2022-11-03T20:26:10.344522Z","data":{"id":"1f81eb52-5198-4599-803e-771906343485","type":"contact"}}"#;

/// Signs as the `std` source's scheme does, then renames the headers as Svix names them.
async fn post_as_svix(app: &TestApp, secret: &str, msg_id: &str, ts: i64) -> Reply {
    let scheme = &app.source("std").scheme;
    let headers: Vec<(String, String)> = signature::sign(scheme, secret, msg_id, ts, BODY)
        .expect("signable")
        .into_iter()
        .map(|(name, value)| (name.replace("webhook-", "svix-"), value))
        .collect();
    assert!(headers.iter().all(|(name, _)| name.starts_with("svix-")));
    app.post_raw("std", BODY.to_vec(), &headers).await
}

#[tokio::test]
async fn a_svix_delivery_is_accepted_and_its_retries_are_duplicates_of_it() {
    let app = spawn_app().await;
    let secret = secret_of(app.source("std"));
    let now = chrono::Utc::now().timestamp();

    let first = post_as_svix(&app, &secret, "msg_svix_1", now).await;
    assert_eq!(first.status, 202, "{}", first.json);
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    assert_eq!(first.json["strategy"], "standard-webhooks-id@1");
    app.wait_applied(1).await;

    // Svix's retry: same id, a new timestamp and signature.
    let retry = post_as_svix(&app, &secret, "msg_svix_1", now + 30).await;
    assert_eq!(retry.status, 200, "{}", retry.json);
    assert_eq!(retry.json["decision"], "ignore", "{}", retry.json);
    assert_eq!(retry.json["key"], first.json["key"]);
    assert_eq!(retry.json["transport_key"], first.json["transport_key"]);
    // The same message under the webhook-* names keys alike.
    let renamed = app
        .post_signed_with("std", &secret, "msg_svix_1", now + 60, BODY)
        .await;
    assert_eq!(renamed.json["decision"], "ignore", "{}", renamed.json);
    assert_eq!(renamed.json["transport_key"], first.json["transport_key"]);
    // Another svix-id with the same body is another message's transport identity.
    let other = post_as_svix(&app, &secret, "msg_svix_2", now).await;
    assert_ne!(other.json["transport_key"], first.json["transport_key"]);
    assert_ne!(other.json["key"], first.json["key"]);

    // The id is kept, the signature masked.
    let shown = app
        .delivery(first.json["delivery_id"].as_str().unwrap())
        .await;
    let headers = shown.json["headers"].as_array().unwrap();
    let value = |name: &str| {
        headers
            .iter()
            .find(|h| h[0] == name)
            .unwrap_or_else(|| panic!("{name} kept: {headers:?}"))[1]
            .clone()
    };
    assert_eq!(value("svix-id"), "msg_svix_1");
    assert_eq!(value("svix-signature"), "[redacted]");
    assert!(
        !shown.json.to_string().contains("v1,"),
        "a signature leaked"
    );
}

#[tokio::test]
async fn a_svix_delivery_with_a_wrong_signature_is_refused_as_such() {
    let app = spawn_app().await;
    let now = chrono::Utc::now().timestamp();
    let reply = post_as_svix(&app, "whsec_dGhlIHdyb25nIHNlY3JldA==", "msg_svix_3", now).await;
    assert_eq!(reply.status, 401, "{}", reply.json);
    assert_eq!(reply.json["code"], "invalid_signature");
}

#[tokio::test]
async fn an_empty_id_header_beside_the_signed_one_keys_as_the_signed_one() {
    // Given a message processed once
    let app = spawn_app().await;
    let secret = secret_of(app.source("std"));
    let now = chrono::Utc::now().timestamp();
    let first = post_as_svix(&app, &secret, "msg_svix_e", now).await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    app.wait_applied(1).await;
    let scheme = &app.source("std").scheme;
    let signed = |ts: i64| signature::sign(scheme, &secret, "msg_svix_e", ts, BODY).unwrap();
    let svix = |ts: i64| -> Vec<(String, String)> {
        signed(ts)
            .into_iter()
            .map(|(name, value)| (name.replace("webhook-", "svix-"), value))
            .collect()
    };
    // When it is sent again, its signature valid, with an empty id header
    // before the one it was signed with, in either family of names
    let empty = |name: &str| vec![(name.to_owned(), String::new())];
    for (n, headers) in [
        [empty("webhook-id"), svix(now + 10)].concat(),
        [empty("webhook-id"), signed(now + 20)].concat(),
        [empty("svix-id"), svix(now + 30)].concat(),
    ]
    .into_iter()
    .enumerate()
    {
        let again = app.post_raw("std", BODY.to_vec(), &headers).await;
        // Then it is keyed by the id that was signed: a duplicate, ignored
        assert_eq!(again.status, 200, "{n}: {}", again.json);
        assert_eq!(again.json["decision"], "ignore", "{n}: {}", again.json);
        assert_eq!(again.json["key"], first.json["key"], "{n}");
        assert_eq!(
            again.json["transport_key"], first.json["transport_key"],
            "{n}"
        );
    }
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(app.live_effects().await, 1);
}
