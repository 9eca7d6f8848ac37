//! Tests for the signature module, one file per scheme, reading the public vectors in
//! `tests/vectors/` at run time.

mod adyen;
mod api;
mod github_hmac;
mod props;
mod standard_webhooks;
mod standard_webhooks_edges;
mod stripe;
mod svix;

use std::path::PathBuf;

use secrecy::SecretString;
use serde_json::Value;

pub(super) const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors");

pub(super) fn corpus_path(rel: &str) -> PathBuf {
    PathBuf::from(CORPUS).join(rel)
}

pub(super) fn read_bytes(rel: &str) -> Vec<u8> {
    let path = corpus_path(rel);
    std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

pub(super) fn read_json(rel: &str) -> Value {
    serde_json::from_slice(&read_bytes(rel)).expect("corpus file is JSON")
}

/// A string field of a JSON object, or panic naming it.
pub(super) fn s<'a>(v: &'a Value, field: &str) -> &'a str {
    v.get(field)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("missing string field {field} in {v}"))
}

pub(super) fn i(v: &Value, field: &str) -> i64 {
    v.get(field)
        .and_then(Value::as_i64)
        .unwrap_or_else(|| panic!("missing integer field {field} in {v}"))
}

pub(super) fn secrets(list: &[&str]) -> Vec<SecretString> {
    list.iter().map(|x| SecretString::from(*x)).collect()
}

pub(super) fn hdrs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
        .collect()
}

/// Value of the named header in a `sign` result.
pub(super) fn header<'a>(headers: &'a [(String, String)], name: &str) -> &'a str {
    headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
        .unwrap_or_else(|| panic!("no header {name} in {headers:?}"))
}
