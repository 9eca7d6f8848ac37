//! Tests of the identity engine: JCS vectors, strategy kinds and hierarchy,
//! keys and versions, properties, and each preset over the public vectors in
//! `tests/vectors/`.

mod catalog_versions;
mod corpus_presets;
mod es6_numbers;
mod frozen_derivation;
mod jcs_vectors;
pub(super) mod kinds;
mod props;
mod stripe_transitions;

use super::{Catalog, DeliveryFacts, Derivation, KeySecret};
use serde_json::Value;
use std::path::PathBuf;

pub(super) const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors");

pub(super) fn corpus_path(rel: &str) -> PathBuf {
    PathBuf::from(CORPUS).join(rel)
}

pub(super) fn corpus_bytes(rel: &str) -> Vec<u8> {
    std::fs::read(corpus_path(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

pub(super) fn corpus_json(rel: &str) -> Value {
    serde_json::from_slice(&corpus_bytes(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

pub(super) fn secret() -> KeySecret {
    KeySecret::from_bytes(b"test-secret-test-secret-32-bytes").unwrap()
}

pub(super) fn presets() -> Catalog {
    Catalog::build(Default::default()).unwrap()
}

/// A delivery of `body` to `provider`, tenant t1 / source src1 / env prod.
pub(super) struct Delivery {
    pub tenant: String,
    pub source: String,
    pub provider: String,
    pub environment: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<Value>,
    pub raw: Vec<u8>,
}

impl Delivery {
    pub fn new(provider: &str, body: Value) -> Self {
        let raw = serde_json::to_vec(&body).unwrap();
        Self {
            tenant: "t1".into(),
            source: "src1".into(),
            provider: provider.into(),
            environment: "prod".into(),
            headers: Vec::new(),
            body: Some(body),
            raw,
        }
    }

    pub fn raw(provider: &str, raw: &[u8]) -> Self {
        let mut d = Self::new(provider, Value::Null);
        d.body = serde_json::from_slice(raw).ok();
        d.raw = raw.to_vec();
        d
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    pub fn facts(&self) -> DeliveryFacts<'_> {
        DeliveryFacts {
            tenant: &self.tenant,
            source: &self.source,
            provider: &self.provider,
            environment: &self.environment,
            headers: &self.headers,
            parse: match self.body {
                Some(_) => crate::domain::delivery::BodyParse::Json,
                None => crate::domain::delivery::BodyParse::NotJson,
            },
            body: self.body.as_ref(),
            raw_body: &self.raw,
        }
    }

    pub fn derive(&self, catalog: &Catalog) -> Derivation {
        catalog.derive(&self.facts(), &secret())
    }
}

/// Full business key, panicking with the explanation when there is none.
pub(super) fn business_key(d: &Derivation) -> String {
    match &d.business {
        Some(b) => b.key.full(),
        None => panic!("no business key:\n{}", d.explain()),
    }
}

pub(super) fn chosen(d: &Derivation) -> String {
    match &d.business {
        Some(b) => b.strategy.to_string(),
        None => panic!("no business key:\n{}", d.explain()),
    }
}
