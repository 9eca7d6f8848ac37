//! The stored shape of every journal event, frozen: `frozen/<Name>.v<N>.json`
//! holds one payload per stored name and version, as it sits in the journal.
//! Each must read back and be written again to the same JSON, so that
//! renaming a field, changing a type or dropping one shows up here (and in
//! review, as a changed file) instead of silently changing what is stored.
//! A shape that has to change gets a new version, an upcaster in
//! `JournalEvent::from_stored`, and a new file beside the old one, which must
//! keep reading.

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde_json::Value;

use super::JournalEvent;

fn directory() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/domain/journal/frozen")
}

/// `(name, version, payload)` of every frozen file.
fn samples() -> Vec<(String, i32, Value)> {
    let mut samples = Vec::new();
    for entry in std::fs::read_dir(directory()).expect("frozen samples") {
        let path = entry.expect("directory entry").path();
        let file = path
            .file_name()
            .and_then(|f| f.to_str())
            .unwrap_or_default();
        let Some((name, version)) = file
            .strip_suffix(".json")
            .and_then(|stem| stem.rsplit_once(".v"))
        else {
            panic!("{file}: expected <Name>.v<N>.json");
        };
        let version: i32 = version.parse().expect("a version number");
        let text = std::fs::read_to_string(&path).expect("sample readable");
        let payload = serde_json::from_str(&text).expect("sample is JSON");
        samples.push((name.to_owned(), version, payload));
    }
    samples
}

#[test]
fn every_event_this_code_writes_has_a_frozen_sample() {
    let frozen: BTreeSet<(String, i32)> = samples().into_iter().map(|(n, v, _)| (n, v)).collect();
    let missing: Vec<_> = JournalEvent::WRITTEN
        .iter()
        .filter(|(name, version)| !frozen.contains(&((*name).to_owned(), *version)))
        .collect();
    assert!(
        missing.is_empty(),
        "add a stored payload to src/domain/journal/frozen/ for {missing:?}"
    );
}

#[test]
fn every_frozen_payload_reads_back_and_is_stored_again_unchanged() {
    for (name, version, stored) in samples() {
        let event = JournalEvent::from_stored(&name, version, stored.clone())
            .unwrap_or_else(|e| panic!("{name} v{version} no longer reads: {e}"));
        if event.version() == version {
            assert_eq!(
                event.data(),
                stored,
                "{name} v{version} is now stored differently: give the new shape a new version"
            );
        }
    }
}

#[test]
fn the_audit_trail_lists_exactly_the_events_it_can_say_as_who_did_what() {
    for (name, version, stored) in samples() {
        let event = JournalEvent::from_stored(&name, version, stored).expect("reads");
        let listed = super::audit::AUDITED.contains(&event.event_type());
        let said = super::audit::audited(&event).is_some();
        // A look-up is an operator's action only when a person asked.
        let server_asked = matches!(
            &event,
            JournalEvent::LookupPerformed(e) if e.asked_by.is_none()
        ) || matches!(
            &event,
            JournalEvent::StatusLookupPerformed(e) if e.asked_by.is_none()
        );
        assert_eq!(
            listed,
            said || server_asked,
            "{name}: listed {listed}, said {said}"
        );
        assert!(!(said && server_asked), "{name}");
    }
}
