//! Standard Webhooks, rest of the vector file (timestamps, missing headers, header case,
//! empty payload, spec example) plus tolerance edges, rotation and tampering.

use super::standard_webhooks::{SW, headers_for, sign_vector, tolerance, vectors};
use super::{hdrs, i, s, secrets};
use crate::providers::signature::{SignatureError, sign, verify};
#[test]
fn invalid_timestamps() {
    let v = vectors();
    let vec = sign_vector(&v, "reference_sign_vector");
    let sig = s(&vec, "expected_signature");
    let sec = secrets(&[s(&vec, "secret")]);
    let mut raw: Vec<String> = Vec::new();
    for case in v["invalid_timestamp_for_signing"]
        .as_array()
        .expect("ts cases")
    {
        assert_eq!(s(case, "expect"), "reject");
        let text = s(case, "timestamp");
        if let Ok(n) = text.parse::<i64>() {
            assert_eq!(
                sign(&SW, s(&vec, "secret"), "msg", n, b"x"),
                Err(SignatureError::InvalidTimestamp)
            );
        }
        raw.push(text.to_owned());
    }
    for case in v["invalid_timestamp_header_for_verify"]
        .as_array()
        .expect("verify ts")
    {
        raw.push(s(case, "webhook-timestamp").to_owned());
    }
    raw.extend([
        "99999999999999999999".into(),
        "+1614265330".into(),
        "1614265330 1".into(),
    ]);
    for text in &raw {
        let h = hdrs(&[
            ("webhook-id", s(&vec, "msg_id")),
            ("webhook-timestamp", text),
            ("webhook-signature", sig),
        ]);
        let got = verify(
            &SW,
            &sec,
            &h,
            s(&vec, "payload").as_bytes(),
            1_614_265_330,
            300,
        );
        assert_eq!(
            got,
            Err(SignatureError::MalformedHeader),
            "timestamp {text:?}"
        );
    }
}

#[test]
fn missing_headers_case_and_empty_payload() {
    let v = vectors();
    let vec = sign_vector(&v, "reference_sign_vector");
    let ts = i(&vec, "timestamp");
    let full = headers_for(s(&vec, "msg_id"), ts, s(&vec, "expected_signature"));
    let sec = secrets(&[s(&vec, "secret")]);
    let body = s(&vec, "payload").as_bytes();
    let expected = [
        ("webhook-id", SignatureError::MissingMessageId),
        ("webhook-timestamp", SignatureError::MissingTimestamp),
        ("webhook-signature", SignatureError::MissingSignature),
    ];
    for (drop, err) in expected {
        let h: Vec<_> = full.iter().filter(|(n, _)| n != drop).cloned().collect();
        assert_eq!(verify(&SW, &sec, &h, body, ts, 300), Err(err));
    }
    // Mixed-case names (java TestScenario) are accepted.
    let mixed: Vec<_> = full
        .iter()
        .map(|(n, x)| (n.to_uppercase(), x.clone()))
        .collect();
    assert!(verify(&SW, &sec, &mixed, body, ts, 300).is_ok());
    // Empty body with a valid signature verifies.
    let out = sign(&SW, s(&vec, "secret"), "msg_empty", ts, b"").expect("sign");
    assert!(verify(&SW, &sec, &out, b"", ts, 300).is_ok());
    assert_eq!(
        verify(&SW, &sec, &out, b" ", ts, 300),
        Err(SignatureError::InvalidSignature)
    );
}

#[test]
fn spec_example_header_parses() {
    let v = vectors();
    let ex = &v["spec_examples"]["example_headers"];
    let h: Vec<(String, String)> = ex
        .as_object()
        .expect("headers")
        .iter()
        .map(|(n, x)| (n.clone(), x.as_str().expect("str").to_owned()))
        .collect();
    let sec = secrets(&[s(&sign_vector(&v, "reference_sign_vector"), "secret")]);
    let ts = i(&v["spec_examples"], "signed_content_example_timestamp");
    // v1 and v1a entries parse; the v1 one cannot match our key.
    assert_eq!(
        verify(&SW, &sec, &h, b"{}", ts, 300),
        Err(SignatureError::InvalidSignature)
    );
    // Only the asymmetric entry: no v1 signature at all.
    let v1a = s(ex, "webhook-signature")
        .split(' ')
        .nth(1)
        .expect("v1a entry");
    let h2 = headers_for("msg", ts, v1a);
    assert_eq!(
        verify(&SW, &sec, &h2, b"{}", ts, 300),
        Err(SignatureError::MissingSignature)
    );
    let h3 = headers_for("msg", ts, "v1 no-comma");
    assert_eq!(
        verify(&SW, &sec, &h3, b"{}", ts, 300),
        Err(SignatureError::MalformedHeader)
    );
}

#[test]
fn tolerance_edges_rotation_tampering() {
    let v = vectors();
    let vec = sign_vector(&v, "reference_sign_vector");
    let (ts, tol) = (i(&vec, "timestamp"), tolerance(&v));
    let sig = s(&vec, "expected_signature");
    let h = headers_for(s(&vec, "msg_id"), ts, sig);
    let sec = secrets(&[s(&vec, "secret")]);
    let body = s(&vec, "payload").as_bytes();
    let t = tol as i64;
    for (now, ok) in [
        (ts + t, true),
        (ts - t, true),
        (ts + t + 1, false),
        (ts - t - 1, false),
    ] {
        let got = verify(&SW, &sec, &h, body, now, tol);
        if ok {
            assert!(got.is_ok(), "now {now}");
        } else {
            assert_eq!(
                got,
                Err(SignatureError::TimestampOutOfTolerance),
                "now {now}"
            );
        }
    }
    // Extreme clocks: no overflow, no panic.
    assert_eq!(
        verify(&SW, &sec, &h, body, i64::MIN, tol),
        Err(SignatureError::TimestampOutOfTolerance)
    );
    assert!(verify(&SW, &sec, &h, body, i64::MAX, u64::MAX).is_ok());
    // Rotation: the second secret matches.
    let other = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
    let rotated = secrets(&[other, s(&vec, "secret")]);
    assert_eq!(
        verify(&SW, &rotated, &h, body, ts, tol).map(|x| x.secret_index),
        Ok(Some(1))
    );
    assert_eq!(
        verify(&SW, &secrets(&[other]), &h, body, ts, tol),
        Err(SignatureError::InvalidSignature)
    );
    assert_eq!(
        verify(&SW, &sec, &h, b"{\"test\": 2432232315}", ts, tol),
        Err(SignatureError::InvalidSignature)
    );
    assert_eq!(
        verify(&SW, &[], &h, body, ts, tol),
        Err(SignatureError::NoSecretConfigured)
    );
    // A stale message with a forged signature reports the forgery, not the staleness.
    let forged = headers_for(s(&vec, "msg_id"), ts, "v1,AAAA");
    assert_eq!(
        verify(&SW, &sec, &forged, body, ts + 10_000, tol),
        Err(SignatureError::InvalidSignature)
    );
}
