//! Stripe: stripe-signature-cases.json (SDK test inputs, collector vectors, docs header),
//! round trip, rotation and tolerance in both directions.

use serde_json::Value;

use super::{hdrs, header, i, read_json, s, secrets};
use crate::providers::signature::{SchemeConfig, SignatureError, Verified, sign, verify};

const ST: SchemeConfig = SchemeConfig::Stripe;

fn cases() -> Value {
    read_json("stripe/signature/stripe-signature-cases.json")
}

fn payload<'a>(v: &'a Value, payload_ref: &str) -> &'a str {
    match payload_ref {
        "stripe_python_DUMMY_WEBHOOK_PAYLOAD" => {
            s(&v["inputs"]["stripe_python"], "DUMMY_WEBHOOK_PAYLOAD")
        }
        "stripe_node_EVENT_PAYLOAD_STRING" => {
            s(&v["inputs"]["stripe_node"], "EVENT_PAYLOAD_STRING")
        }
        other => panic!("unknown payload_ref {other}"),
    }
}

fn sig_header(value: &str) -> Vec<(String, String)> {
    hdrs(&[("stripe-signature", value)])
}

#[test]
fn collector_vectors_sign_and_verify() {
    let v = cases();
    let list = v["collector_computed_vectors"].as_array().expect("vectors");
    assert_eq!(list.len(), 6);
    for vec in list {
        let (t, body) = (i(vec, "t"), payload(&v, s(vec, "payload_ref")));
        let out = sign(&ST, s(vec, "secret"), "", t, body.as_bytes()).expect("sign");
        assert_eq!(header(&out, "stripe-signature"), s(vec, "header"));
        let got = verify(
            &ST,
            &secrets(&[s(vec, "secret")]),
            &out,
            body.as_bytes(),
            t,
            300,
        );
        assert_eq!(
            got,
            Ok(Verified {
                secret_index: Some(0),
                signed_at: Some(t)
            })
        );
    }
}

#[test]
fn sdk_cases() {
    let v = cases();
    let secret = s(&v["inputs"]["stripe_python"], "DUMMY_WEBHOOK_SECRET");
    let sec = secrets(&[secret]);
    let body = payload(&v, "stripe_python_DUMMY_WEBHOOK_PAYLOAD").as_bytes();
    // stripe-node's clock for the tolerance cases: receivedAt = 20000000 ms.
    let now = 20_000;
    let valid_hex = |t: i64| {
        let out = sign(&ST, secret, "", t, body).expect("sign");
        header(&out, "stripe-signature")
            .split_once(",v1=")
            .expect("v1")
            .1
            .to_owned()
    };
    let fill = |template: &str, t: i64| {
        template
            .replace("{t}", &t.to_string())
            .replace("{valid_hex}", &valid_hex(t))
    };
    let list = v["cases"].as_array().expect("cases");
    assert_eq!(list.len(), 11);
    for case in list {
        let name = s(case, "name");
        let run = |h: &str, now: i64, tol: u64| verify(&ST, &sec, &sig_header(h), body, now, tol);
        match name {
            "malformed_header" | "bad_header" => {
                assert_eq!(
                    run(s(case, "header"), now, 300),
                    Err(SignatureError::MalformedHeader),
                    "{name}"
                )
            }
            "empty_or_missing_header" => {
                assert_eq!(
                    run(s(case, "header"), now, 300),
                    Err(SignatureError::MissingSignature)
                );
                assert_eq!(
                    verify(&ST, &sec, &[], body, now, 300),
                    Err(SignatureError::MissingSignature)
                );
            }
            "only_v0_scheme" => {
                let h = fill(s(case, "header_template"), now);
                assert_eq!(run(&h, now, 300), Err(SignatureError::MissingSignature));
            }
            "wrong_signature" => {
                let h = fill(s(case, "header_template"), now);
                assert_eq!(run(&h, now, 300), Err(SignatureError::InvalidSignature));
            }
            "valid_plus_extra_bad_v1" => {
                let h = fill(s(case, "header_template"), now);
                assert_eq!(run(&h, now, 300).map(|x| x.signed_at), Ok(Some(now)));
            }
            "timestamp_outside_tolerance" => {
                let h = format!("t={},v1={}", now - 15, valid_hex(now - 15));
                assert_eq!(
                    run(&h, now, 10),
                    Err(SignatureError::TimestampOutOfTolerance)
                );
            }
            "timestamp_inside_tolerance" => {
                let h = format!("t={},v1={}", now - 9, valid_hex(now - 9));
                assert!(run(&h, now, 10).is_ok());
            }
            "old_timestamp_no_tolerance" => {
                // Our API has no "no tolerance": u64::MAX disables the window.
                let h = format!("t=12345,v1={}", valid_hex(12345));
                assert!(run(&h, now, u64::MAX).is_ok());
                assert_eq!(
                    run(&h, now, 300),
                    Err(SignatureError::TimestampOutOfTolerance)
                );
            }
            "secret_with_trailing_whitespace" => {
                let bad = s(case, "secret");
                assert_eq!(
                    sign(&ST, bad, "", now, body),
                    Err(SignatureError::InvalidSecret)
                );
                let h = fill("t={t},v1={valid_hex}", now);
                let got = verify(
                    &ST,
                    &secrets(&[secret, bad]),
                    &sig_header(&h),
                    body,
                    now,
                    300,
                );
                assert_eq!(got, Err(SignatureError::InvalidSecret));
            }
            "invalid_json_body_valid_signature" => {
                let junk = s(case, "payload").as_bytes();
                let out = sign(&ST, secret, "", now, junk).expect("sign");
                assert!(verify(&ST, &sec, &out, junk, now, 300).is_ok());
            }
            other => panic!("unhandled Stripe case {other}"),
        }
    }
}

#[test]
fn docs_example_header_parses() {
    let v = cases();
    let h = s(&v["docs_example_not_verifiable"], "header");
    let got = verify(
        &ST,
        &secrets(&["whsec_test_secret"]),
        &sig_header(h),
        b"{}",
        1_492_774_577,
        300,
    );
    assert_eq!(got, Err(SignatureError::InvalidSignature));
}

#[test]
fn header_shapes() {
    let sec = secrets(&["whsec_test_secret"]);
    let out = sign(&ST, "whsec_test_secret", "", 100, b"x").expect("sign");
    let good = header(&out, "stripe-signature").to_owned();
    let v1 = good.split_once(",v1=").expect("v1").1;
    let run = |h: &str| verify(&ST, &sec, &sig_header(h), b"x", 100, 300);
    assert!(run(&format!(" t=100 , v1={} ", v1.to_uppercase())).is_ok());
    assert_eq!(
        run(&format!("v1={v1}")),
        Err(SignatureError::MissingTimestamp)
    );
    assert_eq!(
        run(&format!("t=abc,v1={v1}")),
        Err(SignatureError::MalformedHeader)
    );
    assert_eq!(
        run(&format!("t=-100,v1={v1}")),
        Err(SignatureError::MalformedHeader)
    );
    assert_eq!(
        run(&format!("t=100,t=101,v1={v1}")),
        Err(SignatureError::MalformedHeader)
    );
    assert_eq!(
        run(&format!("t=99999999999999999999,v1={v1}")),
        Err(SignatureError::MalformedHeader)
    );
    assert_eq!(
        run("t=100,v1=zz\u{e9}\u{1F600}"),
        Err(SignatureError::InvalidSignature)
    );
    // The signed timestamp is part of the payload.
    assert_eq!(
        run(&format!("t=101,v1={v1}")),
        Err(SignatureError::InvalidSignature)
    );
    // Two differing stripe-signature headers are ambiguous.
    let two = hdrs(&[
        ("stripe-signature", &good),
        ("stripe-signature", "t=1,v1=00"),
    ]);
    assert_eq!(
        verify(&ST, &sec, &two, b"x", 100, 300),
        Err(SignatureError::MalformedHeader)
    );
}

#[test]
fn round_trip_rotation_tolerance() {
    let body = br#"{"id":"evt_1","object":"event"}"#;
    let out = sign(&ST, "whsec_new", "", 1_000, body).expect("sign");
    let both = secrets(&["whsec_old", "whsec_new"]);
    assert_eq!(
        verify(&ST, &both, &out, body, 1_000, 300).map(|x| x.secret_index),
        Ok(Some(1))
    );
    assert_eq!(
        verify(&ST, &secrets(&["whsec_old"]), &out, body, 1_000, 300),
        Err(SignatureError::InvalidSignature)
    );
    assert_eq!(
        verify(&ST, &both, &out, b"{\"id\":\"evt_2\"}", 1_000, 300),
        Err(SignatureError::InvalidSignature)
    );
    // Unlike Stripe's SDKs, future timestamps are bounded too.
    assert!(verify(&ST, &both, &out, body, 700, 300).is_ok());
    assert_eq!(
        verify(&ST, &both, &out, body, 699, 300),
        Err(SignatureError::TimestampOutOfTolerance)
    );
    assert_eq!(
        verify(&ST, &both, &out, body, 1_301, 300),
        Err(SignatureError::TimestampOutOfTolerance)
    );
    assert_eq!(
        sign(&ST, "whsec_x", "", -1, body),
        Err(SignatureError::InvalidTimestamp)
    );
    assert_eq!(
        sign(&ST, "", "", 1, body),
        Err(SignatureError::InvalidSecret)
    );
}
