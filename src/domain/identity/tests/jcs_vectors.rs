//! RFC 8785 vectors in `tests/vectors/jcs-rfc8785`, byte for byte.

use super::super::jcs::{Integers, JcsError, format_double, to_canonical_string};
use super::{corpus_bytes, corpus_json};
use serde_json::Value;

const DIR: &str = "jcs-rfc8785";
const FILES: [&str; 6] = [
    "arrays",
    "french",
    "structures",
    "unicode",
    "values",
    "weird",
];

fn canonical(input: &[u8]) -> String {
    let v: Value = serde_json::from_slice(input).unwrap();
    to_canonical_string(&v, Integers::AsDoubles).unwrap()
}

#[test]
fn cyberphone_inputs_canonicalise_to_the_expected_outputs() {
    for name in FILES {
        let input = corpus_bytes(&format!(
            "{DIR}/cyberphone-json-canonicalization/input/{name}.json"
        ));
        let output = corpus_bytes(&format!(
            "{DIR}/cyberphone-json-canonicalization/output/{name}.json"
        ));
        assert_eq!(canonical(&input).as_bytes(), output.as_slice(), "{name}");
    }
}

#[test]
fn cyberphone_outhex_matches_the_canonical_bytes() {
    for name in FILES {
        let input = corpus_bytes(&format!(
            "{DIR}/cyberphone-json-canonicalization/input/{name}.json"
        ));
        let hex_text = String::from_utf8(corpus_bytes(&format!(
            "{DIR}/cyberphone-json-canonicalization/outhex/{name}.txt"
        )))
        .unwrap();
        let expected: String = hex_text.split_whitespace().collect();
        assert_eq!(hex::encode(canonical(&input)), expected, "{name}");
    }
}

fn number_rows(file: &str) -> Vec<(String, String)> {
    let text = String::from_utf8(corpus_bytes(&format!("{DIR}/number-samples/{file}"))).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("ieee754_hex") && !l.trim().is_empty())
        .map(|l| {
            let mut cols = l.split(',');
            (
                cols.next().unwrap().to_owned(),
                cols.next().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

fn check_number_rows(file: &str, expected_rows: usize, invalid_marker: &str) {
    let rows = number_rows(file);
    assert_eq!(rows.len(), expected_rows);
    for (hex_bits, expected) in rows {
        let d = f64::from_bits(u64::from_str_radix(&hex_bits, 16).unwrap());
        let got = format_double(d);
        if expected == invalid_marker {
            assert!(
                matches!(got, Err(JcsError::NotFinite(_))),
                "{hex_bits} must be rejected"
            );
        } else {
            assert_eq!(got.unwrap(), expected, "{hex_bits}");
            // and through a Value parsed from the expected text
            let v: Value = serde_json::from_str(&expected).unwrap();
            assert_eq!(
                to_canonical_string(&v, Integers::AsDoubles).unwrap(),
                expected
            );
        }
    }
}

#[test]
fn appendix_b_number_table() {
    check_number_rows("rfc8785-appendix-b.csv", 26, "");
}

#[test]
fn es6_sample_lines() {
    check_number_rows("es6testfile-sample-lines.csv", 10, "null");
}

#[test]
fn spec_primitive_example_bytes() {
    let ex = corpus_json(&format!(
        "{DIR}/spec-examples/rfc8785-primitive-example.json"
    ));
    let input = ex["input_json_text"].as_str().unwrap();
    let hex_expected: String = ex["canonical_utf8_hex"]
        .as_str()
        .unwrap()
        .split(' ')
        .collect();
    assert_eq!(hex::encode(canonical(input.as_bytes())), hex_expected);
}

#[test]
fn spec_sorting_example_value_order() {
    let ex = corpus_json(&format!("{DIR}/spec-examples/rfc8785-sorting-example.json"));
    let input = ex["input_json_text"].as_str().unwrap();
    // serde_json's Map re-sorts by Rust string order, so read the text positionally
    let text = canonical(input.as_bytes());
    let expected: Vec<&str> = ex["expected_value_order_after_sorting"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let mut positions: Vec<usize> = expected
        .iter()
        .map(|v| text.find(&format!("\"{v}\"")).unwrap())
        .collect();
    let sorted = {
        let mut p = positions.clone();
        p.sort();
        p
    };
    assert_eq!(positions, sorted, "{text}");
    positions.dedup();
    assert_eq!(positions.len(), 7);
}

#[test]
fn exact_integers_keep_digits_beyond_two_to_the_53() {
    let v: Value =
        serde_json::from_str(r#"{"id":9007199254740993,"n":-9007199254740993}"#).unwrap();
    assert_eq!(
        to_canonical_string(&v, Integers::AsDoubles).unwrap(),
        r#"{"id":9007199254740992,"n":-9007199254740992}"#
    );
    assert_eq!(
        to_canonical_string(&v, Integers::Exact).unwrap(),
        r#"{"id":9007199254740993,"n":-9007199254740993}"#
    );
    let small: Value = serde_json::from_str("[1,10.0,1e1,-0.0,4.50]").unwrap();
    assert_eq!(
        to_canonical_string(&small, Integers::Exact).unwrap(),
        "[1,10,10,0,4.5]"
    );
}

#[test]
fn non_finite_numbers_are_rejected() {
    for d in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        assert!(format_double(d).is_err());
    }
}

#[test]
fn a_body_whose_numbers_are_canonical_is_read_without_a_copy() {
    use super::super::jcs::canonical_numbers;
    use std::borrow::Cow;
    let plain: Value =
        serde_json::from_str(r#"{"amount":1050,"rate":4.5,"items":[{"n":-3}],"s":"10.0"}"#)
            .unwrap();
    assert!(matches!(canonical_numbers(&plain), Cow::Borrowed(v) if std::ptr::eq(v, &plain)));
    // One whole double, deep inside: the copy rewrites it and nothing else.
    let whole: Value =
        serde_json::from_str(r#"{"amount":1050,"items":[{"n":-3},{"n":-0.0,"m":1e1}]}"#).unwrap();
    let canonical = canonical_numbers(&whole);
    assert!(matches!(canonical, Cow::Owned(_)));
    assert_eq!(
        *canonical,
        serde_json::json!({"amount":1050,"items":[{"n":-3},{"n":0,"m":10}]})
    );
}

#[test]
fn strings_escape_as_json_stringify_does_around_every_ascii_character() {
    use super::super::jcs::key_string;
    // serde_json escapes exactly the characters ES6's JSON.stringify does
    // (RFC 8785 §3.2.2.2), lowercase hex included.
    for byte in 0u8..0x80 {
        let c = char::from(byte);
        for s in [
            format!("{c}"),
            format!("a{c}b"),
            format!("é{c}{c}€"),
            format!("{c}😀{c}"),
        ] {
            assert_eq!(
                key_string(&Value::String(s.clone())),
                serde_json::to_string(&s).unwrap(),
                "{s:?}"
            );
        }
    }
}

#[test]
fn a_whole_double_past_2_pow_53_keeps_the_key_text_of_the_integer_it_reads_as() {
    use super::super::jcs::{canonical_numbers, holds_rounded_integer, key_string};
    // Until 2026-12-07 (evening) such a double was made that integer before
    // keying; it now stays a double (a field never keys on it), and the key
    // text of a body holding one — a fingerprint — is what it was.
    let body: Value = serde_json::from_str(r#"{"n":1152921504606846976.0,"m":-1e18}"#).unwrap();
    let canonical = canonical_numbers(&body);
    assert!(holds_rounded_integer(&canonical["n"]));
    assert_eq!(
        key_string(&canonical),
        r#"{"m":-1000000000000000000,"n":1152921504606846976}"#
    );
}
