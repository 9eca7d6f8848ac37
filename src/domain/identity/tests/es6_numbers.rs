//! The ES6 number form over `tests/vectors/es6-numbers/numbers.txt`: 84,357
//! doubles with the string V8 writes for each, every power of two included
//! (where the shortest round-tripping string is not the correctly rounded one).

use super::super::jcs::{Integers, format_double, key_string, to_canonical_string};
use super::corpus_bytes;
use serde_json::Value;

const LINES: usize = 84_357;

#[test]
fn every_double_in_the_es6_file_prints_as_v8_prints_it() {
    let text = String::from_utf8(corpus_bytes("es6-numbers/numbers.txt")).unwrap();
    let mut wrong = Vec::new();
    let mut checked = 0;
    for line in text.lines() {
        let (bits, expected) = line
            .split_once(' ')
            .unwrap_or_else(|| panic!("bad line {line:?}"));
        let d = f64::from_bits(u64::from_str_radix(bits, 16).unwrap());
        let printed = format_double(d).unwrap();
        // Through a Value too, and as key material: ES6 text is a fixed point of
        // the canonical form, the exact-integer extension included.
        let through_value =
            to_canonical_string(&serde_json::json!(d), Integers::AsDoubles).unwrap();
        let parsed: Value = serde_json::from_str(expected).unwrap();
        let as_key = key_string(&parsed);
        if [&printed, &through_value, &as_key] != [expected; 3] {
            wrong.push(format!(
                "{bits}: {printed} / {through_value} / {as_key} (ES6: {expected})"
            ));
        }
        checked += 1;
    }
    assert_eq!(checked, LINES);
    assert!(
        wrong.is_empty(),
        "{} of {LINES} differ, first: {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
}

#[test]
fn two_to_the_minus_24_and_the_double_below_it_get_different_forms() {
    let p = power_of_two(-24);
    let below = f64::from_bits(p.to_bits() - 1);
    assert_eq!(format_double(p).unwrap(), "5.960464477539063e-8");
    assert_eq!(format_double(below).unwrap(), "5.960464477539062e-8");
    assert_ne!(format_double(p).unwrap(), format_double(below).unwrap());
    let key = |d: f64| key_string(&serde_json::json!({ "amount": d }));
    assert_ne!(key(p), key(below));
}

/// 2^e for -1074 ≤ e ≤ 1023, subnormals included.
fn power_of_two(e: i32) -> f64 {
    if e < -1022 {
        f64::from_bits(1 << (e + 1074))
    } else {
        f64::from_bits(((e + 1023) as u64) << 52)
    }
}

#[test]
fn every_power_of_two_reads_back_to_itself() {
    for e in -1074..=1023 {
        let d = power_of_two(e);
        assert_eq!(d.log2(), f64::from(e));
        for x in [d, -d] {
            let text = format_double(x).unwrap();
            assert_eq!(text.parse::<f64>().unwrap(), x, "2^{e}: {text}");
        }
    }
}
