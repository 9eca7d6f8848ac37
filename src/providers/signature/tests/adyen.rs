//! Adyen: adyen-hmac-vectors.json (notification items, the python mock files, raw-body
//! vectors), the unverifiable node mocks, batches, rotation and malformed bodies.

use serde_json::{Value, json};

use super::{hdrs, header, read_bytes, read_json, s, secrets};
use crate::providers::signature::adyen::data_to_sign;
use crate::providers::signature::{
    SchemeConfig, SignatureError, Verified, sign, sign_adyen_notification, verify,
};

const AD: SchemeConfig = SchemeConfig::Adyen;

fn vectors() -> Value {
    read_json("adyen/signature/adyen-hmac-vectors.json")
}

/// A classic notification body holding the given items.
fn batch(items: &[Value]) -> Vec<u8> {
    let list: Vec<Value> = items
        .iter()
        .map(|it| json!({ "NotificationRequestItem": it }))
        .collect();
    serde_json::to_vec(&json!({ "live": "false", "notificationItems": list })).expect("json")
}

fn with_sig(item: &Value, sig: &str) -> Value {
    let mut item = item.clone();
    item["additionalData"]["hmacSignature"] = json!(sig);
    item
}

/// Corpus files are referenced relative to the signature/ folder.
fn rel(file: &str) -> String {
    format!("adyen/{}", file.trim_start_matches("../"))
}

#[test]
fn notification_item_vectors() {
    let v = vectors();
    let list = v["notification_item_vectors"].as_array().expect("items");
    let mut seen = 0;
    for vec in list {
        let key = s(vec, "hmac_key");
        if let Some(item) = vec.get("item") {
            let data = vec
                .get("expected_data_to_sign")
                .or(vec.get("expected_data_to_sign_collector_derived"));
            assert_eq!(
                data_to_sign(item),
                data.and_then(Value::as_str).expect("data")
            );
            let body = batch(&[with_sig(item, s(vec, "expected_hmac"))]);
            let ok = verify(&AD, &secrets(&[key]), &[], &body, 0, 0);
            assert_eq!(
                ok,
                Ok(Verified {
                    secret_index: Some(0),
                    signed_at: None
                })
            );
            // Our signer reproduces the expected HMAC.
            let signed: Value = serde_json::from_slice(
                &sign_adyen_notification(key, &batch(std::slice::from_ref(item))).expect("sign"),
            )
            .expect("json");
            let got = &signed["notificationItems"][0]["NotificationRequestItem"]["additionalData"]
                ["hmacSignature"];
            assert_eq!(got.as_str(), Some(s(vec, "expected_hmac")));
            if let Some(neg) = vec.get("negative") {
                let bad = batch(&[with_sig(item, s(neg, "hmacSignature"))]);
                assert_eq!(
                    verify(&AD, &secrets(&[key]), &[], &bad, 0, 0),
                    Err(SignatureError::InvalidSignature)
                );
            }
            seen += 1;
        }
        for file in vec
            .get("files")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            // python mocks are bare items: wrap them in a notification.
            let item = read_json(&rel(file.as_str().expect("file")));
            assert!(
                item["merchantReference"]
                    .as_str()
                    .is_some_and(|r| r.contains(['\\', ':', '/']))
            );
            assert_eq!(
                verify(
                    &AD,
                    &secrets(&[key]),
                    &[],
                    &batch(std::slice::from_ref(&item)),
                    0,
                    0
                )
                .map(|x| x.secret_index),
                Ok(Some(0)),
                "{file}"
            );
            let mut tampered = item.clone();
            tampered["amount"]["value"] = json!(1001);
            assert_eq!(
                verify(&AD, &secrets(&[key]), &[], &batch(&[tampered]), 0, 0),
                Err(SignatureError::InvalidSignature)
            );
            seen += 1;
        }
    }
    assert_eq!(seen, 7);
}

#[test]
fn raw_body_vectors() {
    let v = vectors();
    for vec in v["raw_body_vectors"].as_array().expect("raw") {
        let key = s(vec, "hmac_key");
        let body = match vec.get("body_file").and_then(Value::as_str) {
            Some(file) => read_bytes(&rel(file)),
            None => s(vec, "body_utf8").as_bytes().to_vec(),
        };
        if let Some(n) = vec.get("body_bytes").and_then(Value::as_u64) {
            assert_eq!(body.len() as u64, n);
        }
        let expected = s(vec, "expected_hmac");
        let h = hdrs(&[("hmacsignature", expected)]);
        assert_eq!(
            verify(&AD, &secrets(&[key]), &h, &body, 0, 0).map(|x| x.secret_index),
            Ok(Some(0))
        );
        assert_eq!(
            header(
                &sign(&AD, key, "", 0, &body).expect("sign"),
                "hmacsignature"
            ),
            expected
        );
        if let Some(neg) = vec.get("negative") {
            let h = hdrs(&[("hmacsignature", s(neg, "expected_hmac"))]);
            assert_eq!(
                verify(&AD, &secrets(&[key]), &h, &body, 0, 0),
                Err(SignatureError::InvalidSignature)
            );
        }
    }
}

#[test]
fn unpublished_key_mocks_do_not_verify() {
    let v = vectors();
    let key = s(&v["notification_item_vectors"][0], "hmac_key");
    for file in [
        "node-authorisationTrue.json",
        "java-refund-true.json",
        "node-captureFalse.json",
    ] {
        let body = read_bytes(&format!("adyen/notifications/{file}"));
        assert_eq!(
            verify(&AD, &secrets(&[key]), &[], &body, 0, 0),
            Err(SignatureError::InvalidSignature),
            "{file}"
        );
    }
}

#[test]
fn batches_rotation_and_malformed_bodies() {
    let key_a = "DFB1EB5485895CFA84146406857104ABB4CBCABDC8AAF103A624C8F6A3EAAB00";
    let key_b = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056";
    let item = |psp: &str, ok: &str| json!({"pspReference": psp, "merchantAccountCode": "M", "amount": {"value": 1500, "currency": "EUR"}, "eventCode": "REFUND", "success": ok});
    let body = sign_adyen_notification(key_b, &batch(&[item("P1", "true"), item("P1", "false")]))
        .expect("sign");
    let both = secrets(&[key_a, key_b]);
    assert_eq!(
        verify(&AD, &both, &[], &body, 0, 0).map(|x| x.secret_index),
        Ok(Some(1))
    );
    assert_eq!(
        verify(&AD, &secrets(&[key_a]), &[], &body, 0, 0),
        Err(SignatureError::InvalidSignature)
    );
    // Flip one item's success flag: the whole delivery fails.
    let mut doc: Value = serde_json::from_slice(&body).expect("json");
    doc["notificationItems"][1]["NotificationRequestItem"]["success"] = json!("true");
    let flipped = serde_json::to_vec(&doc).expect("json");
    assert_eq!(
        verify(&AD, &both, &[], &flipped, 0, 0),
        Err(SignatureError::InvalidSignature)
    );
    // An unsigned item among signed ones.
    let mut doc: Value = serde_json::from_slice(&body).expect("json");
    doc["notificationItems"]
        .as_array_mut()
        .expect("list")
        .push(json!({"NotificationRequestItem": item("P2", "true")}));
    let unsigned = serde_json::to_vec(&doc).expect("json");
    assert_eq!(
        verify(&AD, &both, &[], &unsigned, 0, 0),
        Err(SignatureError::MissingSignature)
    );
    let cases: [(&[u8], SignatureError); 6] = [
        (b"not json", SignatureError::MalformedHeader),
        (b"\xff\xfe", SignatureError::MalformedHeader),
        (
            br#"{"type":"balancePlatform.accountHolder.created"}"#,
            SignatureError::MissingSignature,
        ),
        (
            br#"{"notificationItems":[]}"#,
            SignatureError::MissingSignature,
        ),
        (
            br#"{"notificationItems":[{"other":{}}]}"#,
            SignatureError::MalformedHeader,
        ),
        (br#"[1,2]"#, SignatureError::MissingSignature),
    ];
    for (b, err) in cases {
        assert_eq!(
            verify(&AD, &both, &[], b, 0, 0),
            Err(err),
            "{}",
            String::from_utf8_lossy(b)
        );
    }
    assert_eq!(
        sign_adyen_notification(key_a, b"not json"),
        Err(SignatureError::MalformedHeader)
    );
    // Secrets: hex only.
    for bad in ["", "not-hex", "ABC"] {
        assert_eq!(
            verify(&AD, &secrets(&[bad]), &[], &body, 0, 0),
            Err(SignatureError::InvalidSecret)
        );
        assert_eq!(
            sign(&AD, bad, "", 0, b"{}"),
            Err(SignatureError::InvalidSecret)
        );
    }
    assert_eq!(
        verify(&AD, &[], &[], &body, 0, 0),
        Err(SignatureError::NoSecretConfigured)
    );
    // Lower-case hex key is the same key.
    assert!(verify(&AD, &secrets(&[&key_b.to_lowercase()]), &[], &body, 0, 0).is_ok());
}

#[test]
fn a_signed_field_in_another_form_than_adyens_is_refused_though_the_tag_still_matches() {
    let key = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056";
    let item = json!({"pspReference": "8815", "merchantAccountCode": "M",
        "merchantReference": "order:7", "amount": {"value": 1500, "currency": "EUR"},
        "eventCode": "REFUND", "success": "true"});
    let body = sign_adyen_notification(key, &batch(&[item])).expect("sign");
    assert_eq!(
        verify(&AD, &secrets(&[key]), &[], &body, 0, 0).map(|x| x.secret_index),
        Ok(Some(0))
    );
    let signed: Value = serde_json::from_slice(&body).expect("json");
    type Change = fn(&mut Value);
    let changes: [(&str, Change); 5] = [
        ("success as a boolean", |i| i["success"] = json!(true)),
        ("the amount as text", |i| {
            i["amount"]["value"] = json!("1500")
        }),
        ("an empty original reference", |i| {
            i["originalReference"] = json!("")
        }),
        ("a colon moved into the account", |i| {
            i["merchantAccountCode"] = json!("M:order");
            i["merchantReference"] = json!("7");
        }),
        ("the reference as a number", |i| {
            i["merchantReference"] = json!(7);
            i["merchantAccountCode"] = json!("M:order");
        }),
    ];
    for (what, change) in changes {
        refused_though_the_tag_matches(key, &signed, what, change);
    }
}

/// Absent and `""` sign alike, so a signed field present must hold
/// something: a captured item re-sent with `"merchantReference": ""` where
/// it had none would otherwise verify and key apart from its first
/// reception (a discriminant that differs: a collision, a breaker tripped).
#[test]
fn a_signed_field_sent_empty_where_it_was_absent_is_refused() {
    let key = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056";
    // A cancellation as Adyen sends it: no merchant reference, no amount.
    let item = json!({"pspReference": "8815", "originalReference": "8813",
        "merchantAccountCode": "M", "eventCode": "CANCELLATION", "success": "true"});
    let body = sign_adyen_notification(key, &batch(&[item])).expect("sign");
    assert_eq!(
        verify(&AD, &secrets(&[key]), &[], &body, 0, 0).map(|x| x.secret_index),
        Ok(Some(0))
    );
    let signed: Value = serde_json::from_slice(&body).expect("json");
    for (field, empty) in [
        ("merchantReference", json!("")),
        ("amount", json!({"currency": ""})),
    ] {
        refused_though_the_tag_matches(key, &signed, field, |item| item[field] = empty.clone());
    }
}

/// `change` made to the first item of `signed` leaves the tag matching (the
/// signed text is the same) and the delivery refused as ambiguous.
fn refused_though_the_tag_matches(
    key: &str,
    signed: &Value,
    what: &str,
    change: impl Fn(&mut Value),
) {
    let original = &signed["notificationItems"][0]["NotificationRequestItem"];
    let mut doc = signed.clone();
    change(&mut doc["notificationItems"][0]["NotificationRequestItem"]);
    let changed = &doc["notificationItems"][0]["NotificationRequestItem"];
    // The tag cannot tell them apart,
    assert_eq!(data_to_sign(changed), data_to_sign(original), "{what}");
    // so the delivery is refused rather than keyed on what changed.
    let bytes = serde_json::to_vec(&doc).expect("json");
    assert_eq!(
        verify(&AD, &secrets(&[key]), &[], &bytes, 0, 0),
        Err(SignatureError::AmbiguousSignedField),
        "{what}"
    );
}

/// Adyen signs eight fields of each item, nothing else of the body: a
/// captured notification re-sent with a member name twice, a NUL, or
/// nesting past the body limit beside the signed fields still verified, and
/// each variant became a quarantined delivery and a case. A body that
/// cannot be read as strict JSON is refused at the signature instead, which
/// leaves the bounded trace of a refusal.
#[test]
fn a_notification_that_is_not_strict_json_is_refused_though_its_items_verify() {
    let key = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056";
    let item = json!({"pspReference": "8815", "merchantAccountCode": "M",
        "merchantReference": "order-7", "amount": {"value": 1500, "currency": "EUR"},
        "eventCode": "REFUND", "success": "true"});
    let body = sign_adyen_notification(key, &batch(&[item])).expect("sign");
    let text = String::from_utf8(body).expect("utf-8");
    assert!(verify(&AD, &secrets(&[key]), &[], text.as_bytes(), 0, 0).is_ok());
    let deep = format!("{}1{}", "[".repeat(70), "]".repeat(70));
    for (what, altered) in [
        (
            "a member twice",
            text.replacen('{', r#"{"live":"false","#, 1),
        ),
        ("a NUL", text.replacen('{', r#"{"note":"\u0000","#, 1)),
        (
            "nesting past the limit",
            text.replacen('{', &format!(r#"{{"deep":{deep},"#), 1),
        ),
    ] {
        assert_eq!(
            verify(&AD, &secrets(&[key]), &[], altered.as_bytes(), 0, 0),
            Err(SignatureError::AmbiguousSignedField),
            "{what}"
        );
    }
}
