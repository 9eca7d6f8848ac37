//! Cross-scheme API: serde form of the config, error codes, sensitive headers, `None`,
//! round trips for every scheme, and no panics on hostile input.

use super::{hdrs, secrets};
use crate::providers::signature::{
    Encoding, SchemeConfig, SignatureError, Verified, sensitive_headers, sign, validate_secret,
    verify,
};

pub(super) fn all_schemes() -> Vec<(SchemeConfig, &'static str)> {
    vec![
        (
            SchemeConfig::StandardWebhooks,
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        ),
        (SchemeConfig::Stripe, "whsec_test_secret"),
        (SchemeConfig::Github, "It's a Secret to Everybody"),
        (
            SchemeConfig::Hmac {
                header: "x-sig".into(),
                encoding: Encoding::Base64,
                prefix: None,
            },
            "k",
        ),
        (
            SchemeConfig::Adyen,
            "DFB1EB5485895CFA84146406857104ABB4CBCABDC8AAF103A624C8F6A3EAAB00",
        ),
    ]
}

#[test]
fn config_serde_form() {
    let parse = |text: &str| serde_json::from_str::<SchemeConfig>(text);
    assert_eq!(
        parse(r#"{"scheme":"standard_webhooks"}"#).ok(),
        Some(SchemeConfig::StandardWebhooks)
    );
    assert_eq!(parse(r#"{"scheme":"none"}"#).ok(), Some(SchemeConfig::None));
    assert_eq!(
        parse(r#"{"scheme":"hmac","header":"webhook-signature"}"#).ok(),
        Some(SchemeConfig::Hmac {
            header: "webhook-signature".into(),
            encoding: Encoding::Hex,
            prefix: None
        })
    );
    let full = SchemeConfig::Hmac {
        header: "x".into(),
        encoding: Encoding::Base64,
        prefix: Some("sha256=".into()),
    };
    let text = serde_json::to_string(&full).expect("ser");
    assert_eq!(
        text,
        r#"{"scheme":"hmac","header":"x","encoding":"base64","prefix":"sha256="}"#
    );
    assert_eq!(parse(&text).ok(), Some(full));
    assert!(parse(r#"{"scheme":"hmac","header":"x","extra":1}"#).is_err());
    assert!(parse(r#"{"scheme":"hmac","header":"x","encoding":"hex64"}"#).is_err());
    assert!(parse(r#"{"scheme":"sha1"}"#).is_err());
    // serde limitation: deny_unknown_fields does not reach unit variants of an internally
    // tagged enum, so extra keys beside a unit scheme are silently ignored.
    assert_eq!(
        parse(r#"{"scheme":"stripe","secret":"x"}"#).ok(),
        Some(SchemeConfig::Stripe)
    );
}

#[test]
fn error_codes_and_messages() {
    use SignatureError::*;
    let all = [
        (MissingSignature, "missing_signature"),
        (MissingTimestamp, "missing_timestamp"),
        (MissingMessageId, "missing_message_id"),
        (MalformedHeader, "malformed_signature_header"),
        (TimestampOutOfTolerance, "timestamp_out_of_tolerance"),
        (InvalidSignature, "invalid_signature"),
        (AmbiguousSignedField, "ambiguous_signed_field"),
        (NoSecretConfigured, "no_secret_configured"),
        (InvalidSecret, "invalid_secret"),
        (InvalidTimestamp, "invalid_timestamp"),
    ];
    for (err, code) in all {
        assert_eq!(err.code(), code);
        assert!(!err.to_string().is_empty());
    }
}

#[test]
fn sensitive_header_lists() {
    let always = [
        "authorization",
        "proxy-authorization",
        "cookie",
        "set-cookie",
    ];
    let expect = [
        (
            SchemeConfig::StandardWebhooks,
            vec!["webhook-signature", "svix-signature"],
        ),
        (SchemeConfig::Stripe, vec!["stripe-signature"]),
        (
            SchemeConfig::Github,
            vec!["x-hub-signature-256", "x-hub-signature"],
        ),
        (
            SchemeConfig::Hmac {
                header: " X-Sig ".into(),
                encoding: Encoding::Hex,
                prefix: None,
            },
            vec!["x-sig"],
        ),
        (SchemeConfig::Adyen, vec!["hmacsignature"]),
        (SchemeConfig::None, vec![]),
    ];
    for (scheme, own) in expect {
        let mut want: Vec<String> = own.iter().map(|x| x.to_string()).collect();
        want.extend(always.iter().map(|x| x.to_string()));
        assert_eq!(sensitive_headers(&scheme), want, "{scheme:?}");
    }
    let auth = SchemeConfig::Hmac {
        header: "Authorization".into(),
        encoding: Encoding::Hex,
        prefix: None,
    };
    assert_eq!(sensitive_headers(&auth).len(), 4);
}

#[test]
fn none_scheme_always_passes() {
    let v = verify(&SchemeConfig::None, &[], &[], b"\xff anything", i64::MIN, 0);
    assert_eq!(
        v,
        Ok(Verified {
            secret_index: None,
            signed_at: None
        })
    );
    assert_eq!(sign(&SchemeConfig::None, "", "", 0, b""), Ok(vec![]));
    assert_eq!(validate_secret(&SchemeConfig::None, ""), Ok(()));
}

#[test]
fn round_trip_every_scheme() {
    let body = br#"{"id":"evt_1","amount":1500}"#;
    let ts = 1_700_000_000;
    for (scheme, secret) in all_schemes() {
        assert_eq!(validate_secret(&scheme, secret), Ok(()), "{scheme:?}");
        let out = sign(&scheme, secret, "msg_1", ts, body).expect("sign");
        let got = verify(&scheme, &secrets(&[secret]), &out, body, ts, 300).expect("verify");
        assert_eq!(got.secret_index, Some(0), "{scheme:?}");
        let timestamped = matches!(
            scheme,
            SchemeConfig::StandardWebhooks | SchemeConfig::Stripe
        );
        assert_eq!(got.signed_at, timestamped.then_some(ts), "{scheme:?}");
        assert_eq!(
            verify(
                &scheme,
                &secrets(&[secret]),
                &out,
                b"{\"id\":\"evt_2\"}",
                ts,
                300
            ),
            Err(SignatureError::InvalidSignature)
        );
        let late = verify(&scheme, &secrets(&[secret]), &out, body, ts + 301, 300);
        assert_eq!(late.is_ok(), !timestamped, "{scheme:?}");
        assert_eq!(
            verify(&scheme, &[], &out, body, ts, 300),
            Err(SignatureError::NoSecretConfigured)
        );
    }
}

#[test]
fn errors_and_debug_never_show_secrets_or_signatures() {
    let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let scheme = SchemeConfig::StandardWebhooks;
    let out = sign(&scheme, secret, "msg", 5, b"x").expect("sign");
    let sig = out[2].1.clone();
    let err = verify(&scheme, &secrets(&[secret]), &out, b"y", 5, 300).expect_err("tampered");
    let shown = format!("{err} {err:?} {:?}", secrets(&[secret]));
    assert!(
        !shown.contains("MfKQ9r8G") && !shown.contains(&sig[3..]),
        "{shown}"
    );
}

#[test]
fn hostile_input_never_panics() {
    let long = "9".repeat(10_000);
    let values = [
        "",
        " ",
        ",",
        "=",
        "v1,",
        "t=,v1=",
        "\u{0}",
        "é,é é=é",
        "t=1,v1=é",
        long.as_str(),
        "v1,====",
        "sha256=é",
    ];
    let names = [
        "webhook-id",
        "webhook-timestamp",
        "webhook-signature",
        "stripe-signature",
        "x-hub-signature-256",
        "x-sig",
        "hmacsignature",
    ];
    let bodies: [&[u8]; 4] = [b"", b"\xff\xfe\x00", b"{\"notificationItems\":[{\"NotificationRequestItem\":{\"additionalData\":{\"hmacSignature\":\"\xc3\xa9\"}}}]}", b"[[[[[[[[[[[[[[]]]]]]]]]]]]]]"];
    for (scheme, secret) in all_schemes() {
        for value in values {
            let h: Vec<(String, String)> = names
                .iter()
                .map(|n| (n.to_string(), value.to_string()))
                .collect();
            for body in bodies {
                for (now, tol) in [(i64::MIN, 0), (i64::MAX, u64::MAX), (0, 300)] {
                    let got = verify(&scheme, &secrets(&[secret]), &h, body, now, tol);
                    assert!(got.is_err(), "{scheme:?} {value:?}");
                }
            }
        }
        assert!(sign(&scheme, secret, "m", i64::MAX, b"").is_ok());
    }
    let h = hdrs(&[
        ("webhook-id", "m"),
        ("webhook-timestamp", "9223372036854775807"),
        ("webhook-signature", "v1,x"),
    ]);
    assert!(
        verify(
            &SchemeConfig::StandardWebhooks,
            &secrets(&["whsec_AAAA"]),
            &h,
            b"",
            i64::MIN,
            0
        )
        .is_err()
    );
}

#[test]
fn scheme_names_are_the_configured_tags() {
    for text in [
        r#"{"scheme":"standard_webhooks"}"#,
        r#"{"scheme":"stripe"}"#,
        r#"{"scheme":"github"}"#,
        r#"{"scheme":"hmac","header":"x-sig"}"#,
        r#"{"scheme":"adyen"}"#,
        r#"{"scheme":"none"}"#,
    ] {
        let scheme: SchemeConfig = serde_json::from_str(text).unwrap();
        let tag: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(scheme.name(), tag["scheme"], "{text}");
    }
}
