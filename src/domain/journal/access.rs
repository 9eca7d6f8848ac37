//! Events about who read what a view masks.

use serde::{Deserialize, Serialize};

use crate::domain::delivery::BodyRef;

/// Someone was given a delivery's raw body, unmasked. Journaled before the
/// bytes are sent, so no read goes unrecorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RawBodyRead {
    /// The body that was read (the delivery is the row's `delivery_id`).
    pub body: BodyRef,
    /// The network peer the bytes went to.
    pub client_address: Option<String>,
    /// The id of the operator or API token that read it (absent in reads
    /// journaled before operator accounts existed).
    pub operator: Option<String>,
}

/// A resolved case was exported as a regression fixture (the delivery is
/// the row's `delivery_id`: the one that opened the case). The fixture holds
/// the deliveries' bodies, sensitive values replaced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FixtureExported {
    pub case_id: uuid::Uuid,
    /// Who exported it: an operator's or API token's id, or `cli`.
    pub by: String,
    /// How many deliveries the fixture holds.
    pub deliveries: usize,
}
