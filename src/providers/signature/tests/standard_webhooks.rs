//! Standard Webhooks: the sign vectors, negative signatures, multi-signature headers and
//! secret encodings of standard-webhooks-vectors.json.

use serde_json::Value;

use super::{hdrs, header, i, read_json, s, secrets};
use crate::providers::signature::{SchemeConfig, SignatureError, Verified, sign, verify};

pub(super) const SW: SchemeConfig = SchemeConfig::StandardWebhooks;

pub(super) fn vectors() -> Value {
    read_json("standard-webhooks/standard-webhooks-vectors.json")
}

pub(super) fn tolerance(v: &Value) -> u64 {
    v["timestamp_tolerance_seconds"]
        .as_u64()
        .expect("tolerance")
}

pub(super) fn sign_vector(v: &Value, name: &str) -> Value {
    v["sign_vectors"]
        .as_array()
        .expect("sign_vectors")
        .iter()
        .find(|x| s(x, "name") == name)
        .cloned()
        .unwrap_or_else(|| panic!("no sign vector {name}"))
}

pub(super) fn headers_for(id: &str, ts: i64, sig: &str) -> Vec<(String, String)> {
    let ts = ts.to_string();
    hdrs(&[
        ("webhook-id", id),
        ("webhook-timestamp", &ts),
        ("webhook-signature", sig),
    ])
}

/// verify with the vector's secret/id/payload at `ts`, `now = ts`.
fn check(vec: &Value, ts: i64, sig: &str, tol: u64) -> Result<Verified, SignatureError> {
    let h = headers_for(s(vec, "msg_id"), ts, sig);
    verify(
        &SW,
        &secrets(&[s(vec, "secret")]),
        &h,
        s(vec, "payload").as_bytes(),
        ts,
        tol,
    )
}

#[test]
pub(super) fn sign_vectors_match_and_verify() {
    let v = vectors();
    let list = v["sign_vectors"].as_array().expect("sign_vectors");
    assert_eq!(list.len(), 2);
    for vec in list {
        let ts = i(vec, "timestamp");
        let out = sign(
            &SW,
            s(vec, "secret"),
            s(vec, "msg_id"),
            ts,
            s(vec, "payload").as_bytes(),
        )
        .expect("sign");
        assert_eq!(
            header(&out, "webhook-signature"),
            s(vec, "expected_signature")
        );
        assert_eq!(header(&out, "webhook-id"), s(vec, "msg_id"));
        assert_eq!(header(&out, "webhook-timestamp"), ts.to_string());
        let ok = check(vec, ts, s(vec, "expected_signature"), tolerance(&v));
        assert_eq!(
            ok,
            Ok(Verified {
                secret_index: Some(0),
                signed_at: Some(ts)
            })
        );
    }
}

#[test]
fn negative_signature_values_are_rejected() {
    let v = vectors();
    let reference = sign_vector(&v, "reference_sign_vector");
    let list = v["negative_signature_values"]
        .as_array()
        .expect("negatives");
    assert_eq!(list.len(), 6);
    for case in list {
        assert_eq!(s(case, "expect"), "reject");
        // Cases without their own secret/id/payload use the reference vector's.
        let mut vec = reference.clone();
        for field in ["secret", "msg_id", "payload"] {
            if let Some(x) = case.get(field) {
                vec[field] = x.clone();
            }
        }
        let ts = i(&reference, "timestamp");
        let sig = match case.get("signature_header").and_then(Value::as_str) {
            Some(sig) => sig.to_owned(),
            None => {
                assert_eq!(s(case, "name"), "partial_first_8_chars");
                s(&reference, "expected_signature")[..8].to_owned()
            }
        };
        let got = check(&vec, ts, &sig, tolerance(&v));
        assert_eq!(
            got,
            Err(SignatureError::InvalidSignature),
            "case {}",
            s(case, "name")
        );
    }
}

#[test]
fn multi_signature_headers() {
    let v = vectors();
    let now = 1_700_000_000;
    for case in v["multi_signature_header_cases"].as_array().expect("multi") {
        let name = s(case, "name");
        let vec_name = if name.starts_with("rust_") {
            "rust_sign_vector"
        } else {
            "reference_sign_vector"
        };
        let vec = sign_vector(&v, vec_name);
        let signed = sign(
            &SW,
            s(&vec, "secret"),
            s(&vec, "msg_id"),
            now,
            s(&vec, "payload").as_bytes(),
        )
        .expect("sign");
        let valid = header(&signed, "webhook-signature");
        let sig = match case.get("header_template").and_then(Value::as_str) {
            Some(t) => t.replace("{VALID}", valid),
            None => s(case, "header").to_owned(),
        };
        let got = check(&vec, now, &sig, tolerance(&v));
        match s(case, "expect") {
            "accept" => assert_eq!(got.map(|x| x.secret_index), Ok(Some(0)), "{name}"),
            "reject" => assert_eq!(got, Err(SignatureError::InvalidSignature), "{name}"),
            other => panic!("unknown expectation {other}"),
        }
    }
}

#[test]
fn secret_encodings() {
    let v = vectors();
    let (id, ts, body) = ("msg_x", 1_614_265_330, b"{\"a\":1}".as_slice());
    for case in v["secret_encoding_cases"].as_array().expect("secret cases") {
        let given = s(case, "secret_as_given");
        if case.get("expect").is_some() {
            assert_eq!(
                sign(&SW, given, id, ts, body),
                Err(SignatureError::InvalidSecret)
            );
            let h = headers_for(id, ts, "v1,AAAA");
            assert_eq!(
                verify(&SW, &secrets(&[given]), &h, body, ts, 300),
                Err(SignatureError::InvalidSecret)
            );
            continue;
        }
        let bare = given.trim_start_matches("whsec_");
        let padded = case
            .get("equivalent_padded")
            .and_then(Value::as_str)
            .unwrap_or(bare);
        let forms = [
            bare.to_owned(),
            format!("whsec_{bare}"),
            padded.to_owned(),
            format!("whsec_{padded}"),
        ];
        for signer in &forms {
            let out = sign(&SW, signer, id, ts, body).expect("sign");
            let h = headers_for(id, ts, header(&out, "webhook-signature"));
            for verifier in &forms {
                let got = verify(&SW, &secrets(&[verifier]), &h, body, ts, 300);
                assert_eq!(
                    got.map(|x| x.secret_index),
                    Ok(Some(0)),
                    "{signer} -> {verifier}"
                );
            }
        }
    }
}
