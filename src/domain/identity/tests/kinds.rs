//! Given/when/then: each strategy kind, the hierarchy fallback, scope binding,
//! sensitive values and the unresolved cases.

use super::super::{Catalog, CatalogConfig, Kind, SkipReason, Unresolved};
use super::{Delivery, business_key, chosen, presets};
use crate::domain::confidence::{Criticality, Strength};
use serde_json::{Value, json};

fn refund(reference: Option<&str>, sent_at: &str) -> Value {
    let mut v = json!({
        "type": "refund.created",
        "payment_id": "pay_123",
        "amount": 1500,
        "currency": "EUR",
        "customer_email": "jane@example.com",
        "sent_at": sent_at,
    });
    if let Some(r) = reference {
        v["refund_reference"] = json!(r);
    }
    v
}

#[test]
fn given_a_refund_reference_when_derived_then_the_strong_business_reference_keys_it() {
    let d =
        Delivery::new("norefid", refund(Some("rr_1"), "2024-05-01T10:00:00Z")).derive(&presets());
    let b = d.business.as_ref().unwrap();
    assert_eq!(chosen(&d), "norefid-refund-ref@1");
    assert_eq!(b.kind, Kind::BusinessReference);
    assert_eq!(b.strength, Strength::Strong);
    assert_eq!(b.effect_type, "refund.create");
    assert_eq!(b.criticality, Criticality::Critical);
    assert_eq!(b.horizon_secs, 90 * 86_400);
    assert_eq!(
        b.material,
        json!({"payment": "pay_123", "refund_reference": "rr_1"})
    );
    assert_eq!(b.discriminants["amount"], json!(1500));
    assert!(d.skipped.is_empty());
    assert_eq!(d.event_type.as_deref(), Some("refund.created"));
    assert!(b.key.printable().starts_with("norefid-refund-ref@1:"));
}

#[test]
fn given_no_reference_when_derived_then_it_falls_back_to_a_weak_fingerprint_and_says_why() {
    let d = Delivery::new("norefid", refund(None, "2024-05-01T10:00:00Z")).derive(&presets());
    let b = d.business.as_ref().unwrap();
    assert_eq!(chosen(&d), "norefid-refund-fingerprint@1");
    assert_eq!(b.kind, Kind::CanonicalFingerprint);
    assert_eq!(b.strength, Strength::Weak);
    assert_eq!(d.skipped.len(), 1);
    assert_eq!(d.skipped[0].strategy.to_string(), "norefid-refund-ref@1");
    assert_eq!(
        d.skipped[0].reason,
        SkipReason::MissingField {
            field: "refund_reference".into(),
            path: "$.refund_reference".into()
        }
    );
    // the volatile send time is gone from the material, the email is sealed
    let body = &b.material["body"];
    assert!(body.get("sent_at").is_none());
    let email = body["customer_email"].as_str().unwrap();
    assert!(
        email.starts_with("hmac:") && email.ends_with('…') && email.len() < 20,
        "{email}"
    );
    let explained = d.explain();
    assert!(explained.contains(
        "skipped norefid-refund-ref@1: field `refund_reference` ($.refund_reference) missing"
    ));
    assert!(
        explained
            .contains("chosen: norefid-refund-fingerprint@1 (canonical_fingerprint, weak key)")
    );
    assert!(!explained.contains("jane@example.com"));
}

#[test]
fn given_two_legitimate_equal_refunds_without_reference_then_they_share_one_weak_key() {
    let catalog = presets();
    let first = Delivery::new("norefid", refund(None, "2024-05-01T10:00:00Z")).derive(&catalog);
    let second = Delivery::new("norefid", refund(None, "2024-05-01T10:04:00Z")).derive(&catalog);
    assert_eq!(business_key(&first), business_key(&second));
    assert_eq!(first.business.as_ref().unwrap().strength, Strength::Weak);
    // and the raw bodies differ, so the transport layer sees two packets
    assert_ne!(first.transport.key, second.transport.key);
}

#[test]
fn given_two_references_on_the_same_payment_then_two_strong_keys() {
    let catalog = presets();
    let a = Delivery::new("norefid", refund(Some("rr_1"), "x")).derive(&catalog);
    let b = Delivery::new("norefid", refund(Some("rr_2"), "x")).derive(&catalog);
    assert_ne!(business_key(&a), business_key(&b));
}

#[test]
fn given_a_sensitive_field_then_the_key_depends_on_the_secret_not_the_clear_value() {
    let catalog = presets();
    let d = Delivery::new("norefid", refund(None, "x"));
    let k1 = catalog
        .derive(&d.facts(), &super::secret())
        .business
        .unwrap()
        .key;
    let other = super::super::KeySecret::from_bytes(b"another-secret-another-secret!!").unwrap();
    let k2 = catalog.derive(&d.facts(), &other).business.unwrap().key;
    assert_ne!(k1, k2);
    let journaled = serde_json::to_string(&catalog.derive(&d.facts(), &super::secret())).unwrap();
    assert!(!journaled.contains("jane@example.com"));
}

const CUSTOM: &str = r#"
[[providers]]
name = "shop"
transport = ["header:x-delivery"]
event_type = [{ parts = [{ field = "$.kind" }] }]

[[strategies]]
name = "shop-event"
version = 1
provider = "shop"
event_types = ["order.*"]
kind = "provider_event_id"
strength = "strong"
horizon = "3d"
effect_type = "order.ship"
criticality = "critical"
fields = [{ name = "event_id", path = "$.event_id" }]

[[strategies]]
name = "shop-semantic"
version = 1
provider = "shop"
event_types = ["order.*"]
kind = "semantic"
strength = "medium"
horizon = "3d"
effect_type = "order.ship"
criticality = "critical"
fields = [
  { name = "order", path = "$.order" },
  { name = "lines", path = "$.lines" },
  { name = "tags", path = "$.tags" },
]
scope = [{ name = "resource_type", value = "order" }]
discriminants = [{ name = "warehouse", path = "$.warehouse" }]

[strategies.normalize]
unordered = ["$.tags"]
dates = ["$.at"]

[[strategies]]
name = "shop-raw"
version = 1
provider = "shop"
event_types = ["order.*"]
kind = "raw_hash"
strength = "weak"
horizon = "1d"
effect_type = "order.ship"
criticality = "critical"

[[hierarchies]]
provider = "shop"
event_type = "order.*"
strategies = ["shop-event", "shop-semantic", "shop-raw"]
"#;

pub(super) fn custom() -> Catalog {
    let cfg: CatalogConfig = toml::from_str(CUSTOM).unwrap();
    Catalog::build(cfg).unwrap()
}

#[test]
fn given_an_event_id_then_provider_event_id_fires_first() {
    let d = Delivery::new(
        "shop",
        json!({"kind": "order.shipped", "event_id": "e1", "order": "o1"}),
    )
    .derive(&custom());
    assert_eq!(chosen(&d), "shop-event@1");
    assert_eq!(d.business.as_ref().unwrap().kind, Kind::ProviderEventId);
    assert_eq!(
        d.business.as_ref().unwrap().material,
        json!({"event_id": "e1"})
    );
}

#[test]
fn given_no_event_id_then_the_semantic_strategy_fires_with_unordered_tags_sorted() {
    let body =
        json!({"kind": "order.shipped", "order": "o1", "lines": ["b", "a"], "tags": ["y", "x"]});
    let d = Delivery::new("shop", body).derive(&custom());
    let b = d.business.as_ref().unwrap();
    assert_eq!(chosen(&d), "shop-semantic@1");
    assert_eq!((b.kind, b.strength), (Kind::Semantic, Strength::Medium));
    assert_eq!(
        b.material,
        json!({"order": "o1", "lines": ["b", "a"], "tags": ["x", "y"]})
    );
    assert_eq!(b.scope, json!({"resource_type": "order"}));
    assert_eq!(b.missing_discriminants, vec!["warehouse".to_owned()]);
    assert_eq!(
        d.skipped[0].reason,
        SkipReason::MissingField {
            field: "event_id".into(),
            path: "$.event_id".into()
        }
    );
}

#[test]
fn given_nothing_usable_then_the_raw_hash_fires_and_keys_the_exact_bytes() {
    let d = Delivery::raw("shop", br#"{"kind":"order.shipped"}"#).derive(&custom());
    let b = d.business.as_ref().unwrap();
    assert_eq!(chosen(&d), "shop-raw@1");
    assert_eq!(b.kind, Kind::RawHash);
    assert_eq!(d.skipped.len(), 2);
    assert_eq!(
        b.material["raw_body_sha256"],
        json!(d.transport.raw_body_sha256)
    );
    let spaced = Delivery::raw("shop", br#"{ "kind": "order.shipped" }"#).derive(&custom());
    assert_ne!(business_key(&d), business_key(&spaced));
}

#[test]
fn transport_uses_the_delivery_header_else_the_raw_hash() {
    let with = Delivery::new("shop", json!({"kind": "order.shipped"}))
        .header("x-delivery", "d-1")
        .derive(&custom());
    assert_eq!(
        (
            with.transport.id_source.as_str(),
            with.transport.id.as_str()
        ),
        ("header:x-delivery", "d-1")
    );
    let without = Delivery::raw("shop", b"{}").derive(&custom());
    assert_eq!(without.transport.id_source, "raw_body_sha256");
    assert_eq!(
        without.transport.id,
        "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
    );
}

#[test]
fn unresolved_cases_have_stable_codes() {
    let catalog = custom();
    let bad = Delivery::raw("shop", b"{not json").derive(&catalog);
    assert_eq!(
        bad.unresolved.as_ref().map(Unresolved::code),
        Some("unparseable")
    );
    assert!(bad.business.is_none());
    assert_eq!(bad.transport.id_source, "raw_body_sha256");

    let no_type = Delivery::new("shop", json!({"order": "o1"})).derive(&catalog);
    assert_eq!(
        no_type.unresolved,
        Some(Unresolved::UnknownEventType {
            event_type: None,
            missing: vec!["$.kind".into()]
        })
    );
    let unknown = Delivery::new("shop", json!({"kind": "invoice.sent"})).derive(&catalog);
    assert_eq!(
        unknown.unresolved.as_ref().map(Unresolved::code),
        Some("unknown_event_type")
    );
    assert_eq!(unknown.event_type.as_deref(), Some("invoice.sent"));

    let who = Delivery::new("nobody", json!({})).derive(&catalog);
    assert_eq!(
        who.unresolved.as_ref().map(Unresolved::code),
        Some("unknown_provider")
    );

    let json = serde_json::to_value(&unknown).unwrap();
    assert_eq!(json["unresolved"]["code"], json!("unknown_event_type"));
}

#[test]
fn no_strategy_applies_when_every_field_is_missing() {
    // a catalog where every strategy needs a field (no raw-hash fallback)
    let cfg: CatalogConfig = toml::from_str(&CUSTOM.replace(r#", "shop-raw"]"#, "]")).unwrap();
    let catalog = Catalog::build(cfg).unwrap();
    let shop = Delivery::new("shop", json!({"kind": "order.shipped"})).derive(&catalog);
    assert_eq!(
        shop.unresolved,
        Some(Unresolved::NoStrategyApplies {
            event_type: "order.shipped".into()
        })
    );
    assert_eq!(shop.skipped.len(), 2);
    assert!(shop.explain().contains("unresolved: no_strategy_applies"));
}

#[test]
fn the_bound_scope_separates_tenants_sources_environments_and_providers() {
    let catalog = presets();
    let base = Delivery::new("norefid", refund(Some("rr_1"), "x"));
    let k = business_key(&base.derive(&catalog));
    for change in [
        |d: &mut Delivery| d.tenant = "t2".into(),
        |d: &mut Delivery| d.source = "src2".into(),
        |d: &mut Delivery| d.environment = "sandbox".into(),
    ] {
        let mut other = Delivery::new("norefid", refund(Some("rr_1"), "x"));
        change(&mut other);
        assert_ne!(business_key(&other.derive(&catalog)), k);
    }
}

#[test]
fn explain_names_every_step() {
    let d = Delivery::new("norefid", refund(None, "2024-05-01T10:00:00Z")).derive(&presets());
    let text = d.explain();
    assert_eq!(text.lines().count(), 7, "{text}");
    assert!(text.starts_with(
        "provider norefid / event type refund.created\ntransport: raw_body_sha256 = "
    ));
    assert!(text.contains("key: norefid-refund-fingerprint@1:"));
    assert!(text.contains("(strength weak)"));
}

#[test]
fn a_fingerprint_without_normalisation_keys_the_canonical_numbers() {
    // No normalisation and no sensitive field: the strategy reads the
    // body's canonical form as it is, without a copy of its own.
    let catalog = Catalog::build(
        toml::from_str(
            r#"
[[providers]]
name = "meter"
event_type = [{ parts = [{ field = "$.kind" }] }]

[[strategies]]
name = "meter-fingerprint"
version = 1
provider = "meter"
event_types = ["usage.*"]
kind = "canonical_fingerprint"
strength = "weak"
horizon = "1d"
effect_type = "usage.record"
criticality = "reversible"

[[hierarchies]]
provider = "meter"
event_type = "usage.*"
strategies = ["meter-fingerprint"]
"#,
        )
        .unwrap(),
    )
    .unwrap();
    let derive = |quantity: &str| {
        let raw = format!(r#"{{"kind":"usage.reported","meter":"m1","quantity":{quantity}}}"#);
        Delivery::raw("meter", raw.as_bytes()).derive(&catalog)
    };
    let exact = derive("10");
    let b = exact.business.as_ref().expect("keyed");
    assert_eq!(b.material["body"]["quantity"], json!(10));
    assert!(b.material["body"]["quantity"].is_u64());
    for spelled in ["10.0", "1e1", "100e-1"] {
        // The same key and the same material shown for it.
        assert_eq!(derive(spelled).business, exact.business, "{spelled}");
    }
    assert_ne!(business_key(&derive("10.5")), business_key(&exact));
}

/// A refund whose reference and amount are JSON number texts as the
/// provider sent them.
fn refund_with_numbers(reference: &str, amount: &str) -> Value {
    let text = format!(
        r#"{{"type":"refund.created","payment_id":"pay_123","amount":{amount},"currency":"EUR","refund_reference":{reference}}}"#
    );
    serde_json::from_str(&text).unwrap()
}

#[test]
fn given_references_too_large_to_read_exactly_then_they_never_key_and_the_fingerprint_says_weak() {
    let catalog = presets();
    let derive =
        |digits| Delivery::new("norefid", refund_with_numbers(digits, "1500")).derive(&catalog);
    // Both read as 1e20: as a strong reference they would be one refund.
    let (a, b) = (
        derive("100000000000000000001"),
        derive("100000000000000000002"),
    );
    for d in [&a, &b] {
        assert_eq!(chosen(d), "norefid-refund-fingerprint@1");
        assert_eq!(d.business.as_ref().unwrap().strength, Strength::Weak);
        assert_eq!(
            d.skipped[0].reason,
            SkipReason::InexactNumber {
                field: "refund_reference".into(),
                path: "$.refund_reference".into()
            }
        );
        assert!(
            d.explain()
                .contains("holds a number too large to read exactly")
        );
    }
    // A reference inside u64 is exact and keys strongly, each its own.
    let (c, e) = (
        derive("18446744073709551615"),
        derive("18446744073709551614"),
    );
    assert_eq!(chosen(&c), "norefid-refund-ref@1");
    assert_ne!(business_key(&c), business_key(&e));
}

#[test]
fn given_whole_doubles_past_2_pow_53_then_they_never_key_and_below_it_they_are_integers() {
    let catalog = presets();
    let derive =
        |digits| Delivery::new("norefid", refund_with_numbers(digits, "1500")).derive(&catalog);
    // Both read as 2^53: made integers they were one refund's strong key;
    // past i64, -2^63 - 1 read as i64::MIN itself.
    for digits in [
        "9007199254740993.0",
        "9007199254740992.0",
        "-9223372036854775809",
        "1e20",
    ] {
        let d = derive(digits);
        assert_eq!(chosen(&d), "norefid-refund-fingerprint@1", "{digits}");
        assert!(
            matches!(d.skipped[0].reason, SkipReason::InexactNumber { .. }),
            "{digits}"
        );
    }
    assert_eq!(
        chosen(&derive("-9223372036854775808")),
        "norefid-refund-ref@1"
    );
    // Below 2^53 a double is the integer it reads as, whatever its spelling.
    let exact = derive("4503599627370497");
    for spelled in ["4503599627370497.0", "4.503599627370497e15"] {
        assert_eq!(
            business_key(&derive(spelled)),
            business_key(&exact),
            "{spelled}"
        );
    }
}

#[test]
fn given_a_blank_reference_then_it_never_keys_strongly_and_its_old_key_is_judged_weak() {
    let catalog = presets();
    for reference in [r#""""#, r#""  ""#, "[]", "{}", r#"["", " "]"#] {
        let body = refund_with_numbers(reference, "1500");
        let d = Delivery::new("norefid", body).derive(&catalog);
        // Two refunds both without a reference would share a strong key:
        // the second ignored as the first's duplicate.
        assert_eq!(chosen(&d), "norefid-refund-fingerprint@1", "{reference}");
        assert_eq!(
            d.skipped[0].reason,
            SkipReason::BlankField {
                field: "refund_reference".into(),
                path: "$.refund_reference".into()
            }
        );
        assert!(d.explain().contains("holds only blank text"), "{reference}");
        // The key such a refund had before still finds it, judged weak.
        let old: Vec<_> = (d.also_keyed.iter())
            .filter(|o| o.strategy.to_string() == "norefid-refund-ref@1")
            .collect();
        assert_eq!(old.len(), 1, "{reference}");
        assert_eq!(old[0].strength, Strength::Weak);
        assert_eq!(
            old[0].material["refund_reference"],
            serde_json::from_str::<Value>(reference).unwrap()
        );
    }
    // A reference with text keys strongly; its only extra key is the one
    // it would have without a reference (below).
    let d = Delivery::new("norefid", refund_with_numbers(r#""rr_1""#, "1500")).derive(&catalog);
    assert_eq!(chosen(&d), "norefid-refund-ref@1");
    assert!(
        (d.also_keyed.iter()).all(|o| o.strategy.to_string() == "norefid-refund-fingerprint@1"),
        "{:?}",
        d.also_keyed
    );
}

#[test]
fn given_a_reference_then_the_key_a_retry_lacking_it_would_take_is_looked_under_and_judged_weak() {
    let catalog = presets();
    let with = refund_with_numbers(r#""rr_1""#, "1500");
    let mut without = with.clone();
    without.as_object_mut().unwrap().remove("refund_reference");
    let d = Delivery::new("norefid", with).derive(&catalog);
    let lacking = Delivery::new("norefid", without.clone()).derive(&catalog);
    assert_eq!(chosen(&lacking), "norefid-refund-fingerprint@1");
    // The fingerprint the refund has without its reference is a key in
    // force of the refund with it, judged weak: a retry that lost its
    // reference, had it come first, took that key.
    let also: Vec<_> = (d.also_keyed.iter())
        .filter(|o| o.key == lacking.business.as_ref().unwrap().key)
        .collect();
    assert_eq!(also.len(), 1, "{:?}", d.also_keyed);
    assert_eq!(also[0].strength, Strength::Weak);
    assert!(also[0].missing_discriminants.is_empty());
    // Not for the payment: the fingerprint discriminates on it, so a
    // retry without it is held, never applied under that key (the other
    // two: the reference `null` and empty, below).
    assert_eq!(d.also_keyed.len(), 3, "{:?}", d.also_keyed);
    // Nothing extra for a delivery already keyed by the fingerprint.
    assert!(lacking.also_keyed.is_empty(), "{:?}", lacking.also_keyed);
}

#[test]
fn given_a_blank_discriminant_then_it_is_missing_not_equal() {
    let catalog = presets();
    let mut body = refund_with_numbers(r#""rr_1""#, "1500");
    body["currency"] = Value::String(" ".into());
    let d = Delivery::new("norefid", body).derive(&catalog);
    let business = d.business.as_ref().unwrap();
    assert_eq!(business.missing_discriminants, vec!["currency".to_owned()]);
}

#[test]
fn given_a_discriminant_too_large_to_read_exactly_then_it_is_missing_not_equal() {
    let amount = "100000000000000000000001";
    let d = Delivery::new("norefid", refund_with_numbers(r#""rr_1""#, amount)).derive(&presets());
    let b = d.business.as_ref().unwrap();
    assert_eq!(chosen(&d), "norefid-refund-ref@1");
    assert_eq!(b.missing_discriminants, vec!["amount".to_owned()]);
}

#[test]
fn a_provider_delivering_batches_refuses_a_strategy_reading_the_whole_delivery() {
    let batched = CUSTOM.replace(
        "name = \"shop\"\ntransport",
        "name = \"shop\"\nitems = \"$.orders[*]\"\ntransport",
    );
    assert_ne!(batched, CUSTOM);
    let refused = |text: &str| {
        let cfg: CatalogConfig = toml::from_str(text).unwrap();
        Catalog::build(cfg).unwrap().batch_conflicts().join("; ")
    };
    let raw = refused(&batched);
    assert!(
        raw.contains("shop-raw@1") && raw.contains("hashes the raw body"),
        "{raw}"
    );
    let header = batched.replace(
        "kind = \"raw_hash\"",
        "kind = \"provider_event_id\"\nfields = [{ name = \"d\", path = \"header:x-delivery\" }]",
    );
    let read = refused(&header);
    assert!(read.contains("reads header:x-delivery"), "{read}");
    // Retired, it keys nothing: its keys were migrated to a version that
    // reads the items.
    let retired = header
        .replace(
            "name = \"shop-raw\"\nversion = 1",
            "name = \"shop-raw\"\nversion = 1\nretired = true",
        )
        .replace(", \"shop-raw\"]", "]");
    assert_ne!(retired, header);
    assert!(
        !refused(&retired).contains("shop-raw"),
        "{}",
        refused(&retired)
    );
    // The same strategies serve a provider of single deliveries.
    assert!(custom().batch_conflicts().is_empty());
}

#[test]
fn given_a_sensitive_field_too_large_to_read_exactly_then_sealing_it_does_not_key_it() {
    let catalog = bank(
        "bank-transfer",
        r#"[{ name = "account", path = "$.account" }]"#,
        "$.account",
        "",
    );
    let derive = |digits: &str| {
        let text = format!(r#"{{"type":"transfer","account":{digits}}}"#);
        Delivery::new("bank", serde_json::from_str(&text).unwrap()).derive(&catalog)
    };
    for d in [
        derive("100000000000000000001"),
        derive("100000000000000000002"),
    ] {
        assert!(d.business.is_none(), "{:?}", d.business);
        assert_eq!(
            d.skipped[0].reason,
            SkipReason::InexactNumber {
                field: "account".into(),
                path: "$.account".into()
            }
        );
    }
    // An exact one is sealed and keys as before, whatever text it holds.
    assert!(derive("12345678901234").business.is_some());
    assert!(derive(r#""inexact-number""#).business.is_some());
}

#[test]
fn given_sealed_values_sorted_as_unordered_then_both_orders_read_alike_and_rounded_ones_are_refused()
 {
    let catalog = bank(
        "bank-first-ref",
        r#"[{ name = "first", path = "$.refs[0]" }]"#,
        "$.refs[*]",
        "[strategies.normalize]\nunordered = [\"$.refs\"]\n",
    );
    let derive = |refs: &str| {
        let text = format!(r#"{{"type":"transfer","refs":{refs}}}"#);
        Delivery::new("bank", serde_json::from_str(&text).unwrap()).derive(&catalog)
    };
    let big = "123456789012345678901234";
    // Both orders sort to one array: read by its first element, they are
    // one outcome, whichever seal sorts first (the rounded one refused).
    let (a, b) = (derive(&format!("[5,{big}]")), derive(&format!("[{big},5]")));
    assert_eq!(
        a.business.as_ref().map(|k| k.key.full()),
        b.business.as_ref().map(|k| k.key.full())
    );
    assert_eq!(a.skipped, b.skipped);
    // Both rounded: refused wherever they land.
    let both = derive(&format!("[{big},{big}1]"));
    assert!(both.business.is_none(), "{:?}", both.business);
    assert!(matches!(
        both.skipped[0].reason,
        SkipReason::InexactNumber { .. }
    ));
    // Exact values, in either order, key alike.
    assert_eq!(
        business_key(&derive("[5,7]")),
        business_key(&derive("[7,5]"))
    );
}

/// A provider `bank` whose one strategy `name` reads `fields`, seals
/// `sensitive` and normalises as `normalize` says.
fn bank(name: &str, fields: &str, sensitive: &str, normalize: &str) -> Catalog {
    let text = format!(
        r#"
[[providers]]
name = "bank"
event_type = [{{ parts = [{{ field = "$.type" }}] }}]

[[strategies]]
name = "{name}"
version = 1
provider = "bank"
event_types = ["*"]
kind = "business_reference"
strength = "strong"
horizon = "1d"
effect_type = "transfer.book"
criticality = "critical"
fields = {fields}
sensitive = ["{sensitive}"]
{normalize}
[[hierarchies]]
provider = "bank"
event_type = "*"
strategies = ["{name}"]
"#
    );
    let cfg: CatalogConfig = toml::from_str(&text).unwrap();
    Catalog::build(cfg).unwrap()
}

#[test]
fn given_a_reference_then_the_keys_a_retry_with_it_null_or_empty_would_take_are_looked_under() {
    let catalog = presets();
    let d = Delivery::new("norefid", refund_with_numbers(r#""rr_1""#, "1500")).derive(&catalog);
    for stand_in in ["null", r#""""#] {
        let first =
            Delivery::new("norefid", refund_with_numbers(stand_in, "1500")).derive(&catalog);
        assert_eq!(chosen(&first), "norefid-refund-fingerprint@1", "{stand_in}");
        let key = &first.business.as_ref().unwrap().key;
        assert!(
            d.also_keyed
                .iter()
                .any(|o| &o.key == key && o.strength == Strength::Weak),
            "{stand_in}: {:?}",
            d.also_keyed
        );
    }
    assert_eq!(d.also_keyed.len(), 3, "{:?}", d.also_keyed);
}
