//! Each preset over the real payloads in `tests/vectors/`: which strategy
//! fires, and that distinct events never share a business key unless they
//! are the same fact (the groups below say why they are).

use super::super::{Derivation, SkipReason, Unresolved, jcs};
use super::{CORPUS, Delivery, business_key, chosen, corpus_bytes, corpus_json, presets};
use serde_json::{Value, json};
use std::collections::BTreeMap;

fn files(dir: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![std::path::PathBuf::from(CORPUS).join(dir)];
    while let Some(p) = stack.pop() {
        for e in std::fs::read_dir(&p).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|x| x == "json") {
                out.push(
                    path.strip_prefix(CORPUS)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned(),
                );
            }
        }
    }
    out.sort();
    out
}

fn short(f: &str) -> String {
    f.rsplit('/')
        .next()
        .unwrap()
        .trim_end_matches(".json")
        .to_owned()
}

/// Files grouped by business key; only groups of two or more, as short names.
fn shared_keys(derived: &[(String, Derivation)]) -> Vec<Vec<String>> {
    let mut by_key: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (f, d) in derived {
        by_key.entry(business_key(d)).or_default().push(f.clone());
    }
    let mut groups: Vec<Vec<String>> = by_key.into_values().filter(|g| g.len() > 1).collect();
    groups.sort();
    groups
}

// ---------------------------------------------------------------- Stripe

fn stripe_event(ty: &str, id: &str, object: Value) -> Delivery {
    Delivery::new(
        "stripe",
        json!({"id": id, "object": "event", "type": ty, "created": 1234567890, "pending_webhooks": 1,
               "livemode": false, "data": {"object": object}}),
    )
}

#[test]
fn stripe_corpus_events_are_keyed_by_event_id_and_only_identical_facts_share_a_key() {
    let c = presets();
    let mut event_files: Vec<String> = files("stripe/dj-stripe-fixtures")
        .into_iter()
        .filter(|f| short(f).starts_with("event_"))
        .collect();
    event_files.push("stripe/openapi-fixtures3/event.json".into());
    assert_eq!(event_files.len(), 12);
    let derived: Vec<(String, Derivation)> = event_files
        .iter()
        .map(|f| {
            (
                f.clone(),
                Delivery::raw("stripe", &corpus_bytes(f)).derive(&c),
            )
        })
        .collect();
    for (f, d) in &derived {
        assert_eq!(chosen(d), "stripe-event-id@1", "{f}");
        assert_eq!(d.transport.id_source, "$.id");
    }
    let groups = shared_keys(&derived);
    let names: Vec<Vec<String>> = groups
        .iter()
        .map(|g| g.iter().map(|f| short(f)).collect())
        .collect();
    assert_eq!(
        names,
        vec![
            vec![
                "event_account_application_authorized",
                "event_account_application_deauthorized"
            ],
            vec![
                "event_account_updated_custom",
                "event_account_updated_express"
            ],
        ]
    );
    // same fact: the bodies are equal once canonical
    for g in &groups {
        let bodies: Vec<String> = g.iter().map(|f| jcs::key_string(&corpus_json(f))).collect();
        assert!(bodies.windows(2).all(|w| w[0] == w[1]), "{g:?}");
    }
    // evt_1Itt6e… is reused on another account: the account scope separates it
    let standard = derived
        .iter()
        .find(|(f, _)| f.contains("updated_standard"))
        .unwrap();
    assert_eq!(
        standard.1.business.as_ref().unwrap().scope,
        json!({"account": "acct_1Fg9jUA3kq9o1aTc"})
    );
}

#[test]
fn stripe_business_references_key_one_time_transitions() {
    let c = presets();
    let o = |name: &str| corpus_json(&format!("stripe/openapi-fixtures3/{name}.json"));

    let refund = stripe_event("refund.created", "evt_1", o("refund")).derive(&c);
    assert_eq!(chosen(&refund), "stripe-refund@1");
    assert_eq!(
        refund.business.as_ref().unwrap().material,
        json!({"refund": "re_1Pgc72B7WZ01zgkWqPvrRrPE"})
    );
    assert_eq!(
        refund.business.as_ref().unwrap().discriminants["charge"],
        json!("ch_1PgafuB7WZ01zgkWXYmPNZs8")
    );
    // the same refund announced by another event id is the same effect
    let again = stripe_event("refund.created", "evt_2", o("refund")).derive(&c);
    assert_eq!(business_key(&refund), business_key(&again));

    let charge = stripe_event("charge.succeeded", "evt_3", o("charge")).derive(&c);
    assert_eq!(chosen(&charge), "stripe-charge@1");
    let captured = stripe_event("charge.captured", "evt_4", o("charge")).derive(&c);
    assert_ne!(
        business_key(&charge),
        business_key(&captured),
        "charge id + event type"
    );

    let updated = stripe_event("charge.updated", "evt_5", o("charge")).derive(&c);
    assert_eq!(chosen(&updated), "stripe-event-id@1");
    assert_eq!(
        updated
            .skipped
            .iter()
            .map(|s| (s.strategy.to_string(), s.reason.clone()))
            .collect::<Vec<_>>(),
        vec![
            (
                "stripe-charge@1".into(),
                SkipReason::NotApplicable {
                    event_type: "charge.updated".into()
                }
            ),
            (
                "stripe-dispute@1".into(),
                SkipReason::NotApplicable {
                    event_type: "charge.updated".into()
                }
            ),
        ]
    );

    let paid = stripe_event("invoice.paid", "evt_6", o("invoice")).derive(&c);
    let succeeded = stripe_event("invoice.payment_succeeded", "evt_7", o("invoice")).derive(&c);
    assert_eq!(chosen(&paid), "stripe-invoice-paid@1");
    assert_eq!(
        business_key(&paid),
        business_key(&succeeded),
        "two event types, one fact"
    );

    assert_eq!(
        chosen(&stripe_event("payout.paid", "evt_8", o("payout")).derive(&c)),
        "stripe-payout@1"
    );
    assert_eq!(
        chosen(&stripe_event("payment_intent.succeeded", "evt_9", o("payment_intent")).derive(&c)),
        "stripe-payment-intent@1"
    );
    assert_eq!(
        chosen(&stripe_event("charge.dispute.created", "evt_10", o("dispute")).derive(&c)),
        "stripe-dispute@1"
    );
}

#[test]
fn stripe_same_dispute_id_with_another_charge_is_a_visible_collision() {
    let c = presets();
    let dj = |name: &str| corpus_json(&format!("stripe/dj-stripe-fixtures/{name}.json"));
    let a = stripe_event(
        "charge.dispute.created",
        "evt_a",
        dj("dispute_dp_fakefakefakefake01"),
    )
    .derive(&c);
    let b = stripe_event(
        "charge.dispute.created",
        "evt_b",
        dj("dispute_dp_fakefakefakefake02"),
    )
    .derive(&c);
    assert_eq!(business_key(&a), business_key(&b));
    let (da, db) = (
        &a.business.as_ref().unwrap().discriminants,
        &b.business.as_ref().unwrap().discriminants,
    );
    assert_ne!(
        da["charge"], db["charge"],
        "discriminants disagree: the decision engine quarantines"
    );
}

#[test]
fn stripe_retry_with_other_pending_webhooks_keeps_key_and_body_fingerprint() {
    let c = presets();
    let mut body = corpus_json("stripe/openapi-fixtures3/event.json");
    let first = Delivery::new("stripe", body.clone()).derive(&c);
    body["pending_webhooks"] = json!(7);
    let retry = Delivery::new("stripe", body).derive(&c);
    assert_eq!(business_key(&first), business_key(&retry));
    assert_eq!(
        first.transport.body_fingerprint,
        retry.transport.body_fingerprint
    );
    assert_ne!(
        first.transport.raw_body_sha256,
        retry.transport.raw_body_sha256
    );
}

// ---------------------------------------------------------------- GitHub

fn github(f: &str, guid: Option<&str>) -> Delivery {
    let event = f.split('/').nth(2).unwrap().to_owned();
    let d = Delivery::raw("github", &corpus_bytes(f)).header("x-github-event", &event);
    match guid {
        Some(g) => d.header("x-github-delivery", g),
        None => d,
    }
}

#[test]
fn github_corpus_without_delivery_header_falls_back_and_never_merges_distinct_events() {
    let c = presets();
    let all = files("github-webhooks/octokit-payload-examples");
    assert_eq!(all.len(), 37);
    let derived: Vec<(String, Derivation)> = all
        .iter()
        .map(|f| (f.clone(), github(f, None).derive(&c)))
        .collect();
    for (f, d) in &derived {
        let expected = match d.event_type.as_deref() {
            Some("issues.opened") => "github-issue-opened@1",
            Some("push") => "github-push@1",
            _ => "github-fingerprint@1",
        };
        assert_eq!(chosen(d), expected, "{f}");
    }
    let groups = shared_keys(&derived);
    // push/1 and push/payload are the same push (same repository, ref, before,
    // after and head commit; one carries the organization block)
    assert_eq!(
        groups,
        vec![vec![
            "github-webhooks/octokit-payload-examples/push/1.payload.json".to_owned(),
            "github-webhooks/octokit-payload-examples/push/payload.json".to_owned(),
        ]]
    );
}

#[test]
fn github_issues_opened_and_edited_differ_only_in_action_yet_never_share_a_key() {
    let c = presets();
    let dir = "github-webhooks/octokit-payload-examples/issues";
    let mut opened = corpus_json(&format!("{dir}/opened.payload.json"));
    let mut edited = corpus_json(&format!("{dir}/edited.payload.json"));
    // besides `action`, only the (here absent-or-empty) `changes` block differs
    for body in [&mut opened, &mut edited] {
        let map = body.as_object_mut().unwrap();
        map.remove("action");
        map.remove("changes");
    }
    assert!(opened == edited, "the corpus fact this test relies on");
    let d = |f: &str| github(&format!("{dir}/{f}"), None).derive(&c);
    let (o, e) = (d("opened.payload.json"), d("edited.payload.json"));
    assert_eq!(o.event_type.as_deref(), Some("issues.opened"));
    assert_eq!(e.event_type.as_deref(), Some("issues.edited"));
    assert_ne!(business_key(&o), business_key(&e));
    // even two fingerprints of the same body differ by event type
    let labeled = d("labeled.payload.json");
    assert_ne!(business_key(&e), business_key(&labeled));
}

#[test]
fn github_delivery_guid_keys_everything_except_issue_openings() {
    let c = presets();
    for (i, f) in files("github-webhooks/octokit-payload-examples")
        .iter()
        .enumerate()
    {
        let d = github(f, Some(&format!("72d3162e-cc78-11e3-81ab-{i:012}"))).derive(&c);
        assert_eq!(d.transport.id_source, "header:x-github-delivery");
        let expected = if d.event_type.as_deref() == Some("issues.opened") {
            "github-issue-opened@1"
        } else {
            "github-delivery@1"
        };
        assert_eq!(chosen(&d), expected, "{f}");
    }
    let ping = "github-webhooks/octokit-payload-examples/ping/payload.json";
    let a = github(ping, Some("guid-1")).derive(&c);
    let b = github(ping, Some("guid-1")).derive(&c);
    let other = github(ping, Some("guid-2")).derive(&c);
    assert_eq!(business_key(&a), business_key(&b));
    assert_ne!(business_key(&a), business_key(&other));
}

// ---------------------------------------------------------------- Standard Webhooks

#[test]
fn standard_webhooks_key_on_webhook_id_and_ignore_attempt_headers() {
    let c = presets();
    let vectors = corpus_json("standard-webhooks/standard-webhooks-vectors.json");
    let v = &vectors["sign_vectors"][0];
    let msg_id = v["msg_id"].as_str().unwrap();
    // the reference vector's payload has no `type`: reported, not guessed
    let untyped = Delivery::raw(
        "standard-webhooks",
        v["payload"].as_str().unwrap().as_bytes(),
    )
    .header("webhook-id", msg_id)
    .derive(&c);
    assert_eq!(untyped.transport.id, "msg_p5jXN8AQM9LWM0D4loKWxJek");
    assert_eq!(
        untyped.unresolved.as_ref().map(Unresolved::code),
        Some("unknown_event_type")
    );
    // the spec's example payload, delivered twice with new attempt headers
    let body = br#"{"type":"contact.created","timestamp":"2022-11-03T20:26:10.344522Z","data":{"id":"1f81eb52-5198-4599-803e-771906343485","type":"contact"}}"#;
    let attempt = |ts: &str, sig: &str| {
        Delivery::raw("standard-webhooks", body)
            .header("webhook-id", msg_id)
            .header("webhook-timestamp", ts)
            .header("webhook-signature", sig)
            .derive(&c)
    };
    let (a, b) = (
        attempt("1614265330", "v1,aaa"),
        attempt("1614265630", "v1,bbb"),
    );
    assert_eq!(chosen(&a), "standard-webhooks-id@1");
    assert_eq!(business_key(&a), business_key(&b));
    assert_eq!(a.transport.key, b.transport.key);
    assert_eq!(
        a.business.as_ref().unwrap().discriminants["event_time"],
        json!("2022-11-03T20:26:10.344522Z")
    );
    let no_id = Delivery::raw("standard-webhooks", body).derive(&c);
    assert_eq!(chosen(&no_id), "standard-webhooks-fingerprint@1");
}

#[test]
fn standard_webhooks_read_the_svix_id_as_the_webhook_id() {
    let c = presets();
    let vectors = corpus_json("standard-webhooks/standard-webhooks-vectors.json");
    let msg_id = vectors["sign_vectors"][0]["msg_id"].as_str().unwrap();
    let body = br#"{"type":"contact.created","timestamp":"2022-11-03T20:26:10.344522Z","data":{"id":"1f81eb52-5198-4599-803e-771906343485","type":"contact"}}"#;
    let sent = |headers: &[(&str, &str)]| {
        headers
            .iter()
            .fold(Delivery::raw("standard-webhooks", body), |d, (n, v)| {
                d.header(n, v)
            })
            .derive(&c)
    };
    let standard = sent(&[("webhook-id", msg_id), ("webhook-timestamp", "1614265330")]);
    let svix = sent(&[("svix-id", msg_id), ("svix-timestamp", "1614265630")]);
    assert_eq!(svix.transport.id, msg_id);
    assert_eq!(chosen(&svix), "standard-webhooks-id@1");
    // one message, one key, whichever name carried its id
    assert_eq!(svix.transport.key, standard.transport.key);
    assert_eq!(business_key(&svix), business_key(&standard));
    // both sent: webhook-id is read, as the signature check reads webhook-*
    let both = sent(&[("svix-id", "msg_other"), ("webhook-id", msg_id)]);
    assert_eq!(both.transport.id, msg_id);
    assert_eq!(business_key(&both), business_key(&standard));
    let other = sent(&[("svix-id", "msg_other")]);
    assert_ne!(business_key(&other), business_key(&standard));
}

// ---------------------------------------------------------------- Adyen

#[test]
fn adyen_items_key_on_psp_reference_event_code_and_success() {
    let c = presets();
    let all = files("adyen/notifications");
    assert_eq!(all.len(), 28);
    let derived: Vec<(String, Derivation)> = all
        .iter()
        .map(|f| {
            (
                f.clone(),
                Delivery::raw("adyen", &corpus_bytes(f)).derive(&c),
            )
        })
        .collect();
    for (f, d) in &derived {
        let n = short(f);
        let expected = if n.contains("tokenization") {
            "adyen-event-id@1"
        } else if n.contains("accountHolder") {
            "adyen-account-holder@1"
        } else if n.contains("balancePlatform") || n.contains("management") {
            "adyen-platform-resource@1"
        } else {
            "adyen-item@1"
        };
        assert_eq!(chosen(d), expected, "{f}");
    }
    let names: Vec<Vec<String>> = shared_keys(&derived)
        .iter()
        .map(|g| {
            let mut n: Vec<String> = g.iter().map(|f| short(f)).collect();
            n.sort();
            n
        })
        .collect();
    // Same item (pspReference + eventCode + success + merchant account) sent by
    // the Java and Node samples, at most with extra unknown attributes: one fact.
    // The two payment-method files share the PM id but not `status`: a collision.
    assert_eq!(
        names,
        vec![
            vec![
                "java-authorisation-true",
                "java-authorisation-true-additional-attribute",
                "node-authorisationTrue"
            ],
            vec!["java-capture-false", "node-captureFalse"],
            vec!["java-capture-true", "node-captureTrue"],
            vec![
                "java-management-webhook-payment-method-created",
                "java-management-webhook-payment-method-created-unknown-enum"
            ],
            vec!["java-refund-false", "node-refundFalse"],
            vec!["java-refund-true", "node-refundTrue"],
        ]
    );
    let get = |n: &str| &derived.iter().find(|(f, _)| short(f) == n).unwrap().1;
    assert_ne!(
        business_key(get("java-refund-true")),
        business_key(get("java-refund-false"))
    );
    assert_eq!(
        get("java-refund-true").business.as_ref().unwrap().material,
        json!({"psp_reference": "PSP_REFERENCE", "event_code": "REFUND", "success": "true",
               "merchant_account": "MagentoMerchantTest2", "original_reference": "ORIGINAL_PSP"})
    );
    let pm = |n: &str| get(n).business.as_ref().unwrap().discriminants["status"].clone();
    assert_ne!(
        pm("java-management-webhook-payment-method-created"),
        pm("java-management-webhook-payment-method-created-unknown-enum")
    );
    let holder = get("node-accountHolderCreated").business.as_ref().unwrap();
    assert!(
        !serde_json::to_string(holder)
            .unwrap()
            .contains("test@adyen.com")
    );
    assert_eq!(
        get("java-refund-true").items.len(),
        1,
        "a classic delivery is a one-item batch"
    );
}

// ---------------------------------------------------------------- GoCardless

#[test]
fn gocardless_batches_are_keyed_per_event_never_as_a_whole() {
    let c = presets();
    let raw = corpus_bytes("gocardless/webhook/webhook_body.json");
    let d = Delivery::raw("gocardless", &raw).derive(&c);
    assert_eq!(
        d.event_type.as_deref(),
        Some("mandates.created+subscriptions.created")
    );
    assert_eq!(d.items.len(), 2);
    let items: Vec<(String, Value)> = d
        .items
        .iter()
        .map(|i| {
            (
                i.business.as_ref().unwrap().strategy.to_string(),
                i.business.as_ref().unwrap().material.clone(),
            )
        })
        .collect();
    assert_eq!(
        items,
        vec![
            (
                "gocardless-event-id@1".to_owned(),
                json!({"event_id": "EV00BD05S5VM2T"})
            ),
            (
                "gocardless-event-id@1".to_owned(),
                json!({"event_id": "EV00BD05TB8K63"})
            ),
        ]
    );
    // No key of the delivery as a whole: each item is decided on its own.
    assert!(d.business.is_none() && d.unresolved.is_none());
    assert!(d.items.iter().all(|i| i.event.is_some()));
    // the same events regrouped keep their own keys
    let mut body: Value = serde_json::from_slice(&raw).unwrap();
    body["events"].as_array_mut().unwrap().truncate(1);
    let alone = Delivery::new("gocardless", body).derive(&c);
    assert_eq!(
        business_key(&alone),
        d.items[0].business.as_ref().unwrap().key.full()
    );
    assert!(d.explain().contains("item 1 (mandates.created):"));
}

#[test]
fn gocardless_reused_event_id_with_other_content_is_a_visible_collision() {
    let c = presets();
    // the API fixture repeats id EV123 on two mandates.cancelled events that
    // differ in `source` (gc_team vs app) and their customer notifications
    let events =
        corpus_json("gocardless/api-fixtures/events.json")["list"]["body"]["events"].clone();
    let d = Delivery::new("gocardless", json!({ "events": events })).derive(&c);
    assert_eq!(d.items.len(), 2);
    let (a, b) = (
        d.items[0].business.as_ref().unwrap(),
        d.items[1].business.as_ref().unwrap(),
    );
    assert_eq!(a.material, json!({"event_id": "EV123"}));
    assert_eq!(a.key, b.key, "same id, same type: same key");
    assert_eq!(a.discriminants["links"], b.discriminants["links"]);
    assert_ne!(
        a.discriminants["source"], b.discriminants["source"],
        "the decision engine quarantines"
    );
    // the same id under another event type is another key
    let mut other =
        corpus_json("gocardless/api-fixtures/events.json")["get"]["body"]["events"].clone();
    other["action"] = json!("created");
    let e = Delivery::new("gocardless", json!({ "events": [other] })).derive(&c);
    assert_eq!(e.event_type.as_deref(), Some("mandates.created"));
    assert_ne!(e.business.as_ref().unwrap().key, a.key);
}
