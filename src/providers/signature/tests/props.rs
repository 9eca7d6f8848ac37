//! Properties of every scheme over arbitrary input: verifying never panics and never passes
//! made-up headers, and what `sign` writes verifies (for Standard Webhooks under the Svix
//! names too) until one byte of the body changes.

use proptest::prelude::*;
use secrecy::SecretString;

use super::api::all_schemes;
use crate::providers::signature::{Encoding, SchemeConfig, SignatureError, sign, verify};

/// Every scheme with a valid secret, plus an HMAC variant with a hex prefix to parse.
fn schemes() -> Vec<(SchemeConfig, &'static str)> {
    let mut all = all_schemes();
    all.push((
        SchemeConfig::Hmac {
            header: "x-sig".into(),
            encoding: Encoding::Hex,
            prefix: Some("sha256=".into()),
        },
        "k2",
    ));
    all
}

/// The headers a scheme reads.
fn names_read(scheme: &SchemeConfig) -> &'static [&'static str] {
    match scheme {
        SchemeConfig::StandardWebhooks => &["webhook-id", "webhook-timestamp", "webhook-signature"],
        SchemeConfig::Stripe => &["stripe-signature"],
        SchemeConfig::Github => &["x-hub-signature-256"],
        SchemeConfig::Hmac { .. } => &["x-sig"],
        SchemeConfig::Adyen => &["hmacsignature"],
        SchemeConfig::None => &[],
    }
}

/// The names the schemes read, in any case, or anything printable.
fn header_name() -> impl Strategy<Value = String> {
    let known = prop::sample::select(vec![
        "webhook-id",
        "webhook-timestamp",
        "webhook-signature",
        "svix-id",
        "svix-timestamp",
        "svix-signature",
        "stripe-signature",
        "x-hub-signature-256",
        "x-sig",
        "hmacsignature",
    ]);
    prop_oneof![
        3 => (known, any::<bool>()).prop_map(|(n, upper)| if upper { n.to_ascii_uppercase() } else { n.to_owned() }),
        1 => "[ -~]{0,12}",
    ]
}

/// Lists shaped like the signature headers: `t=…,v1=…`, `v1,… v1,…`, `sha256=…`, with
/// empty, odd or non-ASCII parts.
fn entries() -> impl Strategy<Value = String> {
    let key = prop::sample::select(vec!["t", "v1", "v0", "v1a", "sha256", "", " v1 "]);
    let sep = prop::sample::select(vec!["=", ",", ""]);
    let value = prop_oneof![
        Just(String::new()),
        "[A-Za-z0-9+/=]{1,8}",
        "[0-9]{1,12}",
        "\\PC{1,3}"
    ];
    let entry = (key, sep, value).prop_map(|(k, s, v)| format!("{k}{s}{v}"));
    let joiner = prop::sample::select(vec![",", " ", ", "]);
    (prop::collection::vec(entry, 0..5), joiner).prop_map(|(e, j)| e.join(j))
}

/// Values near what the parsers expect, numbers of any size, and any printable text.
fn header_value() -> impl Strategy<Value = String> {
    prop_oneof![
        entries(),
        "[A-Za-z0-9+/=,. ]{0,60}",
        "[0-9]{0,25}",
        any::<i64>().prop_map(|n| n.to_string()),
        "\\PC{0,40}",
    ]
}

/// Raw bytes, or an Adyen-shaped notification with a made-up signature in it.
fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..200),
        ("[ -~]{0,20}", "[A-Za-z0-9+/=]{0,48}").prop_map(|(psp, sig)| {
            serde_json::json!({"notificationItems": [{"NotificationRequestItem": {
                "pspReference": psp, "eventCode": "AUTHORISATION", "success": "true",
                "amount": {"value": 100, "currency": "EUR"},
                "additionalData": {"hmacSignature": sig}}}]})
            .to_string()
            .into_bytes()
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn made_up_headers_never_verify_and_never_panic(
        own in prop::collection::vec(header_value(), 1..4),
        svix in any::<bool>(),
        others in prop::collection::vec((header_name(), header_value()), 0..6),
        body in body(),
        now in any::<i64>(),
        tolerance in any::<u64>(),
    ) {
        for (scheme, secret) in schemes() {
            // The scheme's own headers, each with a made-up value, then anything else.
            let mut headers: Vec<(String, String)> = names_read(&scheme)
                .iter()
                .zip(own.iter().cycle())
                .map(|(n, v)| (if svix { n.replace("webhook-", "svix-") } else { (*n).to_owned() }, v.clone()))
                .collect();
            headers.extend(others.iter().cloned());
            let got = verify(&scheme, &[SecretString::from(secret)], &headers, &body, now, tolerance);
            prop_assert!(got.is_err(), "{scheme:?} accepted {headers:?}");
        }
    }

    #[test]
    fn what_sign_writes_verifies_until_the_body_changes(
        body in prop::collection::vec(any::<u8>(), 1..200),
        msg_id in "[!-~]{1,40}",
        ts in 0i64..=i64::MAX,
        flip in any::<prop::sample::Index>(),
    ) {
        for (scheme, secret) in schemes() {
            let secrets = [SecretString::from(secret)];
            let headers = sign(&scheme, secret, &msg_id, ts, &body).unwrap();
            let got = verify(&scheme, &secrets, &headers, &body, ts, 0);
            prop_assert_eq!(got.map(|v| v.secret_index), Ok(Some(0)), "{:?}", scheme);
            let mut tampered = body.clone();
            tampered[flip.index(body.len())] ^= 1;
            prop_assert_eq!(
                verify(&scheme, &secrets, &headers, &tampered, ts, 0),
                Err(SignatureError::InvalidSignature),
                "{:?}", scheme
            );
            if scheme == SchemeConfig::StandardWebhooks {
                let svix: Vec<(String, String)> = headers
                    .iter()
                    .map(|(n, v)| (n.replace("webhook-", "svix-"), v.clone()))
                    .collect();
                let got = verify(&scheme, &secrets, &svix, &body, ts, 0);
                prop_assert_eq!(got.map(|v| v.signed_at), Ok(Some(ts)));
            }
        }
    }
}
