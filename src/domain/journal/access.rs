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
