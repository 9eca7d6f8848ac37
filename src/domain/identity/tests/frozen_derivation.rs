//! What a derivation produces for fixed deliveries — keys, discriminants,
//! material, skipped strategies — frozen: a key that changes for the same
//! delivery under the same strategy version is an identity changed without a
//! version bump, and the journal (`KeyDerived`, whose proof is built from
//! these types) would record it silently. A change shows up as a failing
//! test and, once accepted, as a changed file under `tests/frozen/` in
//! review. To accept an intended change, run the test with
//! `UNICITY_REFREEZE=1` and review the diff.

use serde_json::{Value, json};
use std::path::PathBuf;

use super::{Delivery, presets};

fn check(name: &str, derived: Value) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("src/domain/identity/tests/frozen")
        .join(format!("{name}.json"));
    if std::env::var_os("UNICITY_REFREEZE").is_some() {
        let text = serde_json::to_string_pretty(&derived).expect("json") + "\n";
        std::fs::write(&path, text).expect("frozen derivation written");
    }
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let frozen: Value = serde_json::from_str(&text).expect("frozen derivation is JSON");
    assert_eq!(
        derived, frozen,
        "the derivation of a frozen delivery changed ({name}): keys already reserved keep the old form"
    );
}

fn refund(reference: Option<&str>) -> Value {
    let mut body = json!({
        "type": "refund.created",
        "payment_id": "pay_123",
        "amount": 1500,
        "currency": "EUR",
        "customer_email": "jane@example.com",
        "sent_at": "2026-12-01T10:00:00Z",
    });
    if let Some(reference) = reference {
        body["refund_reference"] = json!(reference);
    }
    body
}

#[test]
fn a_strong_derivation_is_journaled_in_its_frozen_form() {
    let d = Delivery::new("norefid", refund(Some("rr_1")))
        .header("webhook-id", "msg_1")
        .derive(&presets());
    check(
        "norefid-refund-ref",
        serde_json::to_value(&d).expect("json"),
    );
}

#[test]
fn a_weak_fallback_with_skipped_strategies_is_journaled_in_its_frozen_form() {
    let d = Delivery::new("norefid", refund(None)).derive(&presets());
    check(
        "norefid-refund-fingerprint",
        serde_json::to_value(&d).expect("json"),
    );
}

#[test]
fn an_unresolved_derivation_is_journaled_in_its_frozen_form() {
    let d = Delivery::raw("norefid", b"not json at all").derive(&presets());
    check(
        "norefid-unresolved",
        serde_json::to_value(&d).expect("json"),
    );
}
