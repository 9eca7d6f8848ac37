//! Standard Webhooks as Svix sends them: the vectors of standard-webhooks-vectors.json with
//! the headers named `svix-id`, `svix-timestamp` and `svix-signature`, and which family is
//! read when both are sent.

use super::standard_webhooks::{SW, sign_vector, tolerance, vectors};
use super::{hdrs, i, s, secrets};
use crate::providers::signature::{SignatureError, Verified, verify};

fn svix_headers(id: &str, ts: i64, sig: &str) -> Vec<(String, String)> {
    let ts = ts.to_string();
    hdrs(&[
        ("svix-id", id),
        ("svix-timestamp", &ts),
        ("svix-signature", sig),
    ])
}

fn reference() -> (serde_json::Value, u64) {
    let v = vectors();
    (sign_vector(&v, "reference_sign_vector"), tolerance(&v))
}

fn check(
    vec: &serde_json::Value,
    headers: &[(String, String)],
    tol: u64,
) -> Result<Verified, SignatureError> {
    verify(
        &SW,
        &secrets(&[s(vec, "secret")]),
        headers,
        s(vec, "payload").as_bytes(),
        i(vec, "timestamp"),
        tol,
    )
}

#[test]
fn every_sign_vector_verifies_under_the_svix_names() {
    let v = vectors();
    let list = v["sign_vectors"].as_array().expect("sign_vectors");
    assert_eq!(list.len(), 2);
    for vec in list {
        let ts = i(vec, "timestamp");
        let h = svix_headers(s(vec, "msg_id"), ts, s(vec, "expected_signature"));
        assert_eq!(
            check(vec, &h, tolerance(&v)),
            Ok(Verified {
                secret_index: Some(0),
                signed_at: Some(ts)
            }),
            "{}",
            s(vec, "name")
        );
    }
}

#[test]
fn svix_names_are_held_to_the_same_checks() {
    let (vec, tol) = reference();
    let (id, ts, sig) = (
        s(&vec, "msg_id"),
        i(&vec, "timestamp"),
        s(&vec, "expected_signature"),
    );
    let full = svix_headers(id, ts, sig);
    let without = |name: &str| -> Vec<(String, String)> {
        full.iter().filter(|(n, _)| n != name).cloned().collect()
    };
    assert_eq!(
        check(&vec, &without("svix-id"), tol),
        Err(SignatureError::MissingMessageId)
    );
    assert_eq!(
        check(&vec, &without("svix-timestamp"), tol),
        Err(SignatureError::MissingTimestamp)
    );
    assert_eq!(
        check(&vec, &without("svix-signature"), tol),
        Err(SignatureError::MissingSignature)
    );
    // Another id, timestamp or signature than the signed ones does not verify.
    for h in [
        svix_headers("msg_other", ts, sig),
        svix_headers(id, ts + 1, sig),
        svix_headers(id, ts, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE"),
    ] {
        assert_eq!(
            check(&vec, &h, tol),
            Err(SignatureError::InvalidSignature),
            "{h:?}"
        );
    }
    // Names are matched case-insensitively, as for `webhook-*`.
    let shouting: Vec<(String, String)> = full
        .iter()
        .map(|(n, v)| (n.to_ascii_uppercase(), v.clone()))
        .collect();
    assert!(check(&vec, &shouting, tol).is_ok());
}

#[test]
fn with_both_families_sent_the_webhook_headers_are_the_ones_read() {
    let (vec, tol) = reference();
    let (id, ts, sig) = (
        s(&vec, "msg_id"),
        i(&vec, "timestamp"),
        s(&vec, "expected_signature"),
    );
    let bad = "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    let std = |id: &str, sig: &str| -> Vec<(String, String)> {
        let ts = ts.to_string();
        hdrs(&[
            ("webhook-id", id),
            ("webhook-timestamp", &ts),
            ("webhook-signature", sig),
        ])
    };
    let both = |a: Vec<(String, String)>, b: Vec<(String, String)>| [a, b].concat();
    // valid webhook-*, broken svix-*: passes on webhook-*
    assert!(
        check(
            &vec,
            &both(std(id, sig), svix_headers("msg_x", ts, bad)),
            tol
        )
        .is_ok()
    );
    // broken webhook-*, valid svix-*: no fallback to svix-*
    assert_eq!(
        check(&vec, &both(std(id, bad), svix_headers(id, ts, sig)), tol),
        Err(SignatureError::InvalidSignature)
    );
    // never a mix: a lone webhook-id makes the svix timestamp and signature unread
    let mixed = [
        hdrs(&[("webhook-id", id)]),
        svix_headers(id, ts, sig)[1..].to_vec(),
    ]
    .concat();
    assert_eq!(
        check(&vec, &mixed, tol),
        Err(SignatureError::MissingTimestamp)
    );
}
