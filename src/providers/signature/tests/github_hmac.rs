//! GitHub docs vector, GoCardless vector (as a generic `Hmac` source) and the generic HMAC
//! scheme's encodings and prefixes.

use super::{hdrs, header, read_bytes, read_json, s, secrets};
use crate::providers::signature::{Encoding, SchemeConfig, SignatureError, Verified, sign, verify};

const GH: SchemeConfig = SchemeConfig::Github;

#[test]
fn github_docs_vector() {
    let v = read_json("github-webhooks/signature/github-signature-vector.json");
    let vec = &v["vector"];
    let (secret, body) = (s(vec, "secret"), s(vec, "payload").as_bytes());
    let expected = s(vec, "X-Hub-Signature-256");
    let out = sign(&GH, secret, "", 0, body).expect("sign");
    assert_eq!(header(&out, "x-hub-signature-256"), expected);
    assert_eq!(expected, format!("sha256={}", s(vec, "signature_hex")));
    let h = hdrs(&[("x-hub-signature-256", expected)]);
    let ok = verify(&GH, &secrets(&[secret]), &h, body, 0, 0);
    assert_eq!(
        ok,
        Ok(Verified {
            secret_index: Some(0),
            signed_at: None
        })
    );
    // No timestamp: any clock, any tolerance.
    assert!(verify(&GH, &secrets(&[secret]), &h, body, i64::MIN, 0).is_ok());
    let rotated = secrets(&["old secret", secret]);
    assert_eq!(
        verify(&GH, &rotated, &h, body, 0, 0).map(|x| x.secret_index),
        Ok(Some(1))
    );
    assert_eq!(
        verify(&GH, &secrets(&["old secret"]), &h, body, 0, 0),
        Err(SignatureError::InvalidSignature)
    );
    assert_eq!(
        verify(&GH, &secrets(&[secret]), &h, b"Hello, World?", 0, 0),
        Err(SignatureError::InvalidSignature)
    );
    let bare = hdrs(&[("x-hub-signature-256", s(vec, "signature_hex"))]);
    assert_eq!(
        verify(&GH, &secrets(&[secret]), &bare, body, 0, 0),
        Err(SignatureError::MalformedHeader)
    );
    assert_eq!(
        verify(&GH, &secrets(&[secret]), &[], body, 0, 0),
        Err(SignatureError::MissingSignature)
    );
    // Upper-case hex and upper-case prefix are the same tag.
    let upper = hdrs(&[("X-Hub-Signature-256", &expected.to_uppercase())]);
    assert!(verify(&GH, &secrets(&[secret]), &upper, body, 0, 0).is_ok());
    // Non-ASCII junk where the prefix would end must not panic.
    let junk = hdrs(&[("x-hub-signature-256", "sha256\u{e9}00")]);
    assert_eq!(
        verify(&GH, &secrets(&[secret]), &junk, body, 0, 0),
        Err(SignatureError::MalformedHeader)
    );
}

fn gocardless() -> SchemeConfig {
    SchemeConfig::Hmac {
        header: "webhook-signature".into(),
        encoding: Encoding::Hex,
        prefix: None,
    }
}

#[test]
fn gocardless_vector_as_generic_hmac() {
    let v = read_json("gocardless/signature/gocardless-signature-vector.json");
    let vec = &v["vector"];
    assert_eq!(s(vec, "body_file"), "../webhook/webhook_body.json");
    let mut body = read_bytes("gocardless/webhook/webhook_body.json");
    if vec["body_is_file_without_trailing_newline"].as_bool() == Some(true) && body.ends_with(b"\n")
    {
        body.pop();
    }
    assert_eq!(
        body.len() as u64,
        vec["body_bytes"].as_u64().expect("body_bytes")
    );
    let secret = s(vec, "secret");
    let sig = s(vec, "expected_signature");
    // GoCardless sends "Webhook-Signature"; headers arrive lower-cased.
    let h = hdrs(&[("webhook-signature", sig)]);
    assert_eq!(
        verify(&gocardless(), &secrets(&[secret]), &h, &body, 0, 0).map(|x| x.secret_index),
        Ok(Some(0))
    );
    let out = sign(&gocardless(), secret, "", 0, &body).expect("sign");
    assert_eq!(out, hdrs(&[("webhook-signature", sig)]));
    for neg in vec["negative"].as_array().expect("negative") {
        let got = verify(
            &gocardless(),
            &secrets(&[s(neg, "secret")]),
            &h,
            &body,
            0,
            0,
        );
        assert_eq!(got, Err(SignatureError::InvalidSignature));
    }
    let mut tampered = body.clone();
    tampered.push(b'\n');
    assert_eq!(
        verify(&gocardless(), &secrets(&[secret]), &h, &tampered, 0, 0),
        Err(SignatureError::InvalidSignature)
    );
}

#[test]
fn generic_hmac_encodings_and_prefix() {
    let schemes = [
        SchemeConfig::Hmac {
            header: "X-Signature".into(),
            encoding: Encoding::Base64,
            prefix: None,
        },
        SchemeConfig::Hmac {
            header: "x-sig".into(),
            encoding: Encoding::Hex,
            prefix: Some("sha256=".into()),
        },
        SchemeConfig::Hmac {
            header: "x-sig".into(),
            encoding: Encoding::Base64,
            prefix: Some("v1=".into()),
        },
    ];
    let body = b"\x00\xffraw bytes, not UTF-8";
    for scheme in &schemes {
        let out = sign(scheme, "k2", "", 0, body).expect("sign");
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].0, out[0].0.to_ascii_lowercase());
        let both = secrets(&["k1", "k2"]);
        assert_eq!(
            verify(scheme, &both, &out, body, 0, 0).map(|x| x.secret_index),
            Ok(Some(1)),
            "{scheme:?}"
        );
        assert_eq!(
            verify(scheme, &secrets(&["k1"]), &out, body, 0, 0),
            Err(SignatureError::InvalidSignature)
        );
        assert_eq!(
            verify(scheme, &both, &out, b"other", 0, 0),
            Err(SignatureError::InvalidSignature)
        );
        assert_eq!(
            verify(scheme, &[], &out, body, 0, 0),
            Err(SignatureError::NoSecretConfigured)
        );
        assert_eq!(
            verify(scheme, &secrets(&[""]), &out, body, 0, 0),
            Err(SignatureError::InvalidSecret)
        );
        // A second, bogus value of the same header does not hide the good one.
        let mut extra = out.clone();
        extra.insert(
            0,
            sign(scheme, "k1", "", 0, b"other body")
                .expect("sign")
                .remove(0),
        );
        assert!(verify(scheme, &both, &extra, body, 0, 0).is_ok());
    }
    let b64 = sign(&schemes[0], "k", "", 0, body).expect("sign");
    let h = hdrs(&[("x-signature", b64[0].1.trim_end_matches('='))]);
    assert_eq!(
        verify(&schemes[0], &secrets(&["k"]), &h, body, 0, 0),
        Err(SignatureError::InvalidSignature)
    );
    let h = hdrs(&[("x-signature", "%%%not base64")]);
    assert_eq!(
        verify(&schemes[0], &secrets(&["k"]), &h, body, 0, 0),
        Err(SignatureError::InvalidSignature)
    );
    let h = hdrs(&[("x-sig", "deadbeef")]);
    assert_eq!(
        verify(&schemes[1], &secrets(&["k"]), &h, body, 0, 0),
        Err(SignatureError::MalformedHeader)
    );
}
