//! Catalog building, version fingerprints, the changed-without-bump check,
//! and keying with older versions.

use super::super::{Catalog, CatalogConfig, CatalogError, check_versions};
use super::{Delivery, business_key, chosen, presets};
use serde_json::json;

const V1: &str = r#"
[[providers]]
name = "shop"
event_type = [{ parts = [{ field = "$.kind" }] }]

[[strategies]]
name = "shop-ref"
version = 1
provider = "shop"
event_types = ["refund.*"]
kind = "business_reference"
strength = "strong"
horizon = "30d"
effect_type = "refund.create"
criticality = "critical"
fields = [{ name = "payment", path = "$.payment" }, { name = "ref", path = "$.ref" }]

[[hierarchies]]
provider = "shop"
event_type = "refund.*"
strategies = ["shop-ref"]
"#;

/// V1 plus a version 2 that also reads the currency.
fn with_v2(retire_v1: bool) -> String {
    let retired = if retire_v1 { "retired = true\n" } else { "" };
    V1.replace(
        "fields = [{ name = \"payment\"",
        &format!("{retired}fields = [{{ name = \"payment\""),
    ) + r#"
[[strategies]]
name = "shop-ref"
version = 2
provider = "shop"
event_types = ["refund.*"]
kind = "business_reference"
strength = "strong"
horizon = "30d"
effect_type = "refund.create"
criticality = "critical"
fields = [{ name = "payment", path = "$.payment" }, { name = "ref", path = "$.ref" }, { name = "currency", path = "$.currency" }]
"#
}

fn build(text: &str) -> Result<Catalog, CatalogError> {
    let cfg: CatalogConfig =
        toml::from_str(text).map_err(|e| CatalogError::Invalid(e.to_string()))?;
    Catalog::build(cfg)
}

fn delivery() -> Delivery {
    Delivery::new(
        "shop",
        json!({"kind": "refund.created", "payment": "p1", "ref": "r1", "currency": "EUR"}),
    )
}

#[test]
fn presets_build_and_list_their_providers() {
    let c = presets();
    assert_eq!(
        c.providers(),
        vec![
            "adyen",
            "github",
            "gocardless",
            "norefid",
            "standard-webhooks",
            "stripe"
        ]
    );
    assert!(c.versions().iter().all(|v| v.fingerprint.len() == 64));
    assert!(check_versions(&c.versions(), &c).is_empty());
}

#[test]
fn a_duplicate_name_at_version_is_refused() {
    let twice = V1.to_owned()
        + &V1.replace(
            "[[providers]]\nname = \"shop\"\nevent_type = [{ parts = [{ field = \"$.kind\" }] }]\n",
            "",
        );
    assert!(
        matches!(build(&twice), Err(CatalogError::DuplicateStrategy(r)) if r.to_string() == "shop-ref@1")
    );
    let preset_clash = V1
        .replace("name = \"shop\"", "name = \"stripe\"")
        .replace("provider = \"shop\"", "provider = \"stripe\"");
    assert!(
        matches!(build(&preset_clash), Err(CatalogError::DuplicateProvider(p)) if p == "stripe")
    );
}

#[test]
fn unknown_fields_and_missing_reasons_are_refused() {
    let typo = V1.replace(
        "strength = \"strong\"",
        "strength = \"strong\"\nstrenght = \"weak\"",
    );
    assert!(build(&typo).is_err());
    let no_reason = V1.replace(
        "[[hierarchies]]",
        "[strategies.normalize]\nvolatile = [{ path = \"$.x\", reason = \"\" }]\n\n[[hierarchies]]",
    );
    assert!(matches!(build(&no_reason), Err(CatalogError::Invalid(m)) if m.contains("no reason")));
    let strong_fingerprint = V1
        .replace("kind = \"business_reference\"", "kind = \"canonical_fingerprint\"")
        .replace("fields = [{ name = \"payment\", path = \"$.payment\" }, { name = \"ref\", path = \"$.ref\" }]\n", "");
    assert!(
        matches!(build(&strong_fingerprint), Err(CatalogError::Invalid(m)) if m.contains("weak"))
    );
    let dangling = V1.replace("strategies = [\"shop-ref\"]", "strategies = [\"nope\"]");
    assert!(build(&dangling).is_err());
}

#[test]
fn a_definition_changed_without_a_version_bump_is_reported_with_its_fields() {
    let recorded = build(V1).unwrap().versions();
    let changed = build(
        &V1.replace("horizon = \"30d\"", "horizon = \"60d\"")
            .replace("strength = \"strong\"", "strength = \"medium\""),
    )
    .unwrap();
    let conflicts = check_versions(&recorded, &changed);
    let shop: Vec<_> = conflicts
        .iter()
        .filter(|c| c.strategy.name == "shop-ref")
        .collect();
    assert_eq!(shop.len(), 1);
    assert_eq!(
        shop[0].changed_fields,
        vec!["horizon".to_owned(), "strength".to_owned()]
    );
    let msg = shop[0].to_string();
    assert!(
        msg.contains("shop-ref@1 changed without a version bump"),
        "{msg}"
    );
    assert!(msg.contains("horizon, strength"), "{msg}");
    // a description-only edit and an equivalent horizon spelling change nothing
    let reworded = build(&V1.replace(
        "horizon = \"30d\"",
        "horizon = \"720h\"\ndescription = \"now documented\"",
    ))
    .unwrap();
    assert!(check_versions(&recorded, &reworded).is_empty());
    // a bump is not a conflict
    assert!(check_versions(&recorded, &build(&with_v2(false)).unwrap()).is_empty());
}

#[test]
fn while_an_older_version_is_kept_deliveries_are_keyed_with_it_too() {
    let v1_only = build(V1).unwrap();
    let old_key = business_key(&delivery().derive(&v1_only));
    let both = build(&with_v2(false)).unwrap();
    let d = delivery().derive(&both);
    assert_eq!(chosen(&d), "shop-ref@2");
    assert_ne!(business_key(&d), old_key);
    assert_eq!(d.older_versions.len(), 1);
    assert_eq!(d.older_versions[0].strategy.to_string(), "shop-ref@1");
    assert_eq!(
        d.older_versions[0].key.full(),
        old_key,
        "a late retry finds the v1 key"
    );
    assert!(
        d.explain()
            .contains(&format!("also keyed by older version: {old_key}"))
    );
    let retired = build(&with_v2(true)).unwrap();
    assert!(delivery().derive(&retired).older_versions.is_empty());
    assert_eq!(
        retired
            .versions()
            .iter()
            .filter(|v| v.name == "shop-ref")
            .count(),
        2
    );
}

#[test]
fn exact_hierarchy_patterns_win_over_wildcards_and_users_can_override_presets() {
    let c = presets();
    assert_eq!(
        c.hierarchy("github", "issues.opened").unwrap().event_type,
        "issues.opened"
    );
    assert_eq!(
        c.hierarchy("github", "issues.edited").unwrap().event_type,
        "*"
    );
    assert_eq!(
        c.hierarchy("stripe", "charge.succeeded")
            .unwrap()
            .event_type,
        "charge.*"
    );
    let over = build(
        r#"
[[hierarchies]]
provider = "stripe"
event_type = "refund.*"
strategies = ["stripe-event-id"]
"#,
    )
    .unwrap();
    assert_eq!(
        over.hierarchy("stripe", "refund.created")
            .unwrap()
            .strategies,
        vec!["stripe-event-id"]
    );
}

#[test]
fn the_versions_record_serialises_in_snake_case() {
    let v = &build(V1).unwrap().versions();
    let shop = v.iter().find(|r| r.name == "shop-ref").unwrap();
    let json = serde_json::to_value(shop).unwrap();
    assert_eq!(json["definition"]["effect_type"], json!("refund.create"));
    assert_eq!(json["definition"]["horizon"], json!("30d"));
    assert_eq!(json["version"], json!(1));
}

#[test]
fn the_headers_a_provider_is_keyed_by_are_listed_once_each() {
    let text = V1
        .replace(
            "event_type = [{ parts = [{ field = \"$.kind\" }] }]",
            "transport = [\"header:X-Delivery-Token\"]\nheader_aliases = { \"x-delivery-token\" = \"x-old-token\" }\nevent_type = [{ parts = [{ field = \"$.kind\" }] }]",
        )
        .replace(
            "{ name = \"ref\", path = \"$.ref\" }]",
            "{ name = \"ref\", path = \"header:Idempotency-Key\" }, { name = \"again\", path = \"header:idempotency-key\" }]",
        );
    let catalog = build(&text).expect("builds");
    assert_eq!(
        catalog.keyed_headers("shop"),
        ["idempotency-key", "x-delivery-token", "x-old-token"]
    );
    assert!(
        catalog
            .keyed_headers("github")
            .contains(&"x-github-delivery".to_owned())
    );
    assert!(catalog.keyed_headers("nobody").is_empty());
}

#[test]
fn an_events_sensitive_paths_are_found_under_each_item_of_a_batch_however_its_items_are_written() {
    use crate::domain::identity::KeySecret;
    use crate::domain::masking::SensitiveMask;
    let secret = KeySecret::from_bytes(b"0123456789abcdef").unwrap();
    for items in ["$.events", "$.events[*]"] {
        let text = V1
            .replace(
                "event_type = [{ parts = [{ field = \"$.kind\" }] }]",
                &format!(
                    "items = \"{items}\"\nevent_type = [{{ parts = [{{ field = \"$.kind\" }}] }}]"
                ),
            )
            .replace(
                "fields = [{ name = \"payment\"",
                "sensitive = [\"$.metadata.email\"]\nfields = [{ name = \"payment\"",
            );
        let catalog = build(&text).expect("builds");
        let paths = catalog.sensitive_in_body("shop");
        let paths: Vec<&crate::domain::identity::FieldRef> = paths.iter().collect();
        let mut batch = json!({"events": [
            {"kind": "refund.made", "metadata": {"email": "ann@example.org"}},
            {"kind": "refund.made", "metadata": {"email": "bob@example.org"}}
        ]});
        let mut one = json!({"kind": "refund.made", "metadata": {"email": "cy@example.org"}});
        SensitiveMask::mask_body(&mut batch, &paths, &secret);
        SensitiveMask::mask_body(&mut one, &paths, &secret);
        let shown = format!("{batch}{one}");
        assert!(!shown.contains("@example.org"), "{items}: {shown}");
    }
}

/// Every preset version a release shipped, with its fingerprint, as frozen
/// in `frozen/preset_versions.txt`: a server refuses to start without a
/// version that keyed effects, and on one whose definition changed under
/// its number, so a release keeps each (retired, not removed) unchanged.
#[test]
fn every_preset_version_ever_shipped_is_still_there_unchanged() {
    let shipped = include_str!("frozen/preset_versions.txt");
    let catalog = presets();
    let mut listed = 0;
    for line in shipped
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
    {
        let (version, fingerprint) = line.split_once(' ').expect("name@version fingerprint");
        let (name, number) = version.split_once('@').expect("name@version");
        let def = catalog
            .strategy(name, number.parse().expect("a number"))
            .unwrap_or_else(|| panic!("{version} was shipped and is no longer a preset"));
        assert_eq!(
            def.fingerprint(),
            fingerprint.trim(),
            "{version} changed under its number"
        );
        listed += 1;
    }
    // A new preset version is added to the file when it ships.
    assert_eq!(
        listed,
        catalog.strategies().count(),
        "a preset version is not in the file"
    );
}

#[test]
fn an_older_version_skipped_for_a_blank_field_still_keys_as_it_did_judged_weak() {
    // v1 read the merchant's reference, v2 no longer does.
    let v1 = V1.replace(
        r#"{ name = "ref", path = "$.ref" }]"#,
        r#"{ name = "ref", path = "$.ref" }, { name = "merchant", path = "$.merchant" }]"#,
    );
    let v2 = with_v2(false)
        .split_at(V1.len())
        .1
        .replace(r#", { name = "currency", path = "$.currency" }"#, "");
    let catalog = build(&(v1 + &v2)).unwrap();
    let body = json!({"kind": "refund.created", "payment": "p1", "ref": "r1", "merchant": ""});
    let d = Delivery::new("shop", body).derive(&catalog);
    assert_eq!(chosen(&d), "shop-ref@2");
    // Before 2026-12-07 (evening) v1 keyed it with the blank value: that key
    // is still in force, and only as weak as a blank value proves.
    assert_eq!(d.older_versions.len(), 1);
    let older = &d.older_versions[0];
    assert_eq!(older.strategy.to_string(), "shop-ref@1");
    assert_eq!(older.strength, crate::domain::confidence::Strength::Weak);
    assert_eq!(older.material["merchant"], json!(""));
}
