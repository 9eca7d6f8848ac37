//! Properties: what must not change a key, and what must.

use super::super::jcs::{Integers, format_double, key_string, to_canonical_string};
use super::super::{Catalog, CatalogConfig};
use super::{Delivery, business_key, presets};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        (-1.0e12f64..1.0e12).prop_map(|f| json!(f)),
        "[a-zA-Z0-9 é€\"\\\\\n]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,4}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// JSON of any shape with leaves of any kind: every finite double, any i64/u64,
/// strings and member names of any characters (controls, quotes, non-BMP).
fn arb_any_json() -> impl Strategy<Value = Value> {
    let text = prop_oneof![
        "\\PC{0,8}",
        "[\\x00-\\x1f\"\\\\/\u{7f}\u{2028}\u{ffff}\u{10000}é]{0,6}"
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<u64>()
            .prop_map(f64::from_bits)
            .prop_filter("finite", |d| d.is_finite())
            .prop_map(|d| json!(d)),
        text.clone().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 5, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(text.clone(), inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// The same value: integers that were parsed exactly compare exactly (the key form's
/// promise), any other number as a double. A whole double beyond 2^53 comes back as
/// its ES6 digits (1.079072960283101e17 as 107907296028310100), which name that
/// double but not its exact binary value.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if !x.is_f64() && !y.is_f64() => x == y,
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// Every number as a double: what RFC 8785 proper keeps of a value.
fn as_doubles(v: &Value) -> Value {
    match v {
        Value::Number(n) => json!(n.as_f64().unwrap()),
        Value::Array(items) => Value::Array(items.iter().map(as_doubles).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), as_doubles(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// JSON text with object members in reverse order and arbitrary whitespace.
fn scrambled(v: &Value, ws: &str) -> String {
    match v {
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(|i| scrambled(i, ws)).collect();
            format!("[{ws}{}{ws}]", parts.join(&format!("{ws},{ws}")))
        }
        Value::Object(map) => {
            let parts: Vec<String> = map
                .iter()
                .rev()
                .map(|(k, v)| format!("{}{ws}:{ws}{}", Value::String(k.clone()), scrambled(v, ws)))
                .collect();
            format!("{{{ws}{}{ws}}}", parts.join(&format!("{ws},{ws}")))
        }
        other => other.to_string(),
    }
}

fn refund(extra: Value, amount_text: &str, reference: Option<&str>, sent_at: &str) -> Vec<u8> {
    let reference = reference.map_or(String::new(), |r| format!(r#""refund_reference":"{r}","#));
    format!(
        r#"{{"type":"refund.created","payment_id":"pay_1",{reference}"amount":{amount_text},"currency":"EUR","sent_at":"{sent_at}","extra":{}}}"#,
        extra
    )
    .into_bytes()
}

fn key_of(catalog: &Catalog, raw: &[u8]) -> String {
    business_key(&Delivery::raw("norefid", raw).derive(catalog))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn keys_ignore_member_order_and_whitespace(extra in arb_json(), ws in "[ \t\n]{0,3}") {
        let c = presets();
        let plain = refund(extra.clone(), "1500", None, "t0");
        let body: Value = serde_json::from_slice(&plain).unwrap();
        let text = scrambled(&body, &ws);
        prop_assert_eq!(key_of(&c, &plain), key_of(&c, text.as_bytes()));
    }

    #[test]
    fn keys_ignore_number_spelling(n in 0u32..1_000_000, reference in prop::option::of("[a-z0-9]{1,6}")) {
        let c = presets();
        let r = reference.as_deref();
        let base = key_of(&c, &refund(json!(null), &n.to_string(), r, "t0"));
        for spelled in [format!("{n}.0"), format!("{n}e0"), format!("{n}0e-1"), format!("{n}.000E0")] {
            prop_assert_eq!(&base, &key_of(&c, &refund(json!(null), &spelled, r, "t0")));
        }
    }

    #[test]
    fn keys_ignore_declared_volatile_fields(a in "[ -~]{0,20}", b in "[ -~]{0,20}") {
        let c = presets();
        let (a, b) = (a.replace(['"', '\\'], ""), b.replace(['"', '\\'], ""));
        prop_assert_eq!(key_of(&c, &refund(json!(1), "5", None, &a)), key_of(&c, &refund(json!(1), "5", None, &b)));
    }

    #[test]
    fn keys_change_with_any_business_field(extra in arb_json(), other in arb_json(), amount in 1u32..100_000) {
        let c = presets();
        let base = key_of(&c, &refund(extra.clone(), &amount.to_string(), None, "t"));
        prop_assert_ne!(&base, &key_of(&c, &refund(extra.clone(), &(amount + 1).to_string(), None, "t")));
        let canon = |v: &Value| super::super::jcs::key_string(&super::super::jcs::canonical_numbers(v));
        if canon(&extra) != canon(&other) {
            prop_assert_ne!(&base, &key_of(&c, &refund(other, &amount.to_string(), None, "t")));
        }
        let with_ref = key_of(&c, &refund(extra.clone(), "1", Some("r1"), "t"));
        prop_assert_ne!(&with_ref, &key_of(&c, &refund(extra, "1", Some("r2"), "t")));
    }

    #[test]
    fn ordered_arrays_are_sequences_unordered_ones_sets(mut lines in prop::collection::btree_set("[a-z]{1,3}", 2..6)) {
        let c = super::kinds::custom();
        let lines: Vec<String> = std::mem::take(&mut lines).into_iter().collect();
        let mut reversed = lines.clone();
        reversed.reverse();
        let body = |l: &[String], t: &[String]| json!({"kind": "order.shipped", "order": "o1", "lines": l, "tags": t});
        let k = |b: Value| business_key(&Delivery::new("shop", b).derive(&c));
        prop_assert_ne!(k(body(&lines, &lines)), k(body(&reversed, &lines)));
        prop_assert_eq!(k(body(&lines, &lines)), k(body(&lines, &reversed)));
    }

    #[test]
    fn scope_changes_change_keys(extra in arb_json()) {
        let c = with_twin_provider_and_v2();
        let raw = refund(extra, "7", Some("r"), "t");
        let base = Delivery::raw("norefid", &raw);
        let k0 = business_key(&base.derive(&c));
        let mut keys = vec![k0.clone()];
        let mut vary = |f: &dyn Fn(&mut Delivery)| {
            let mut d = Delivery::raw("norefid", &raw);
            f(&mut d);
            keys.push(business_key(&d.derive(&c)));
        };
        vary(&|d| d.provider = "norefid-twin".into());
        vary(&|d| d.environment = "sandbox".into());
        vary(&|d| d.source = "src-b".into());
        vary(&|d| d.tenant = "t-b".into());
        vary(&|d| {
            let mut b = d.body.clone().unwrap();
            b["type"] = json!("refund.updated");
            *d = Delivery::new("norefid", b);
        });
        let n = keys.len();
        keys.sort();
        keys.dedup();
        prop_assert_eq!(keys.len(), n);
        // strategy version: v2 keys differently, and v1 is still offered
        let d = base.derive(&c);
        prop_assert_eq!(d.business.as_ref().unwrap().strategy.version, 2);
        prop_assert_eq!(d.older_versions[0].key.full(), business_key(&base.derive(&presets())));
        prop_assert_ne!(business_key(&d), d.older_versions[0].key.full());
    }

    #[test]
    fn doubles_print_in_a_form_that_reads_back_exactly(bits in any::<u64>()) {
        let d = f64::from_bits(bits);
        if d.is_finite() {
            let text = format_double(d).unwrap();
            prop_assert_eq!(text.parse::<f64>().unwrap(), d);
            let v: Value = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(to_canonical_string(&v, Integers::AsDoubles).unwrap(), text);
        } else {
            prop_assert!(format_double(d).is_err());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_canonical_form_parses_back_to_the_same_value(v in arb_any_json()) {
        // Keys: exact integers, so the value comes back whole.
        let key = key_string(&v);
        let back: Value = serde_json::from_str(&key).unwrap();
        prop_assert!(same(&back, &v), "{} -> {}", v, key);
        prop_assert_eq!(key_string(&back), key.clone());
        // RFC 8785 proper: every number through a double.
        let rfc = to_canonical_string(&v, Integers::AsDoubles).unwrap();
        let back: Value = serde_json::from_str(&rfc).unwrap();
        prop_assert_eq!(as_doubles(&back), as_doubles(&v));
        prop_assert_eq!(to_canonical_string(&back, Integers::AsDoubles).unwrap(), rfc);
        // Member order and whitespace never show.
        let reordered: Value = serde_json::from_str(&scrambled(&v, " \n")).unwrap();
        prop_assert_eq!(key_string(&reordered), key);
    }

    #[test]
    fn any_text_that_parses_has_a_canonical_form_that_parses_back(
        bytes in prop_oneof![
            prop::collection::vec(any::<u8>(), 0..64),
            // JSON text with one byte replaced: often still JSON, often just not
            (arb_any_json(), any::<prop::sample::Index>(), any::<u8>()).prop_map(|(v, at, b)| {
                let mut text = v.to_string().into_bytes();
                let i = at.index(text.len());
                text[i] = b;
                text
            }),
        ]
    ) {
        if let Ok(v) = serde_json::from_slice::<Value>(&bytes) {
            let key = key_string(&v);
            let back: Value = serde_json::from_str(&key).unwrap();
            prop_assert!(same(&back, &v), "{} -> {}", v, key);
        }
    }
}

/// Presets plus a provider that is a twin of norefid and a v2 of the
/// reference strategy identical to v1 but for its version.
fn with_twin_provider_and_v2() -> Catalog {
    let norefid = include_str!("../presets/norefid.toml");
    let twin = norefid.replace("\"norefid", "\"norefid-twin");
    let mut cfg: CatalogConfig = toml::from_str(&twin).unwrap();
    let base: CatalogConfig = toml::from_str(norefid).unwrap();
    let mut v2 = base.strategies[0].clone();
    v2.version = 2;
    cfg.strategies.push(v2);
    Catalog::build(cfg).unwrap()
}
