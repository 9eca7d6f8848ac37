//! Events about a delivery's arrival.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::domain::delivery::{BodyParse, BodyRef, DeliveryId, Headers};

/// Where a delivery came from: the configured source and what it stands for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Origin {
    pub source: String,
    pub tenant: String,
    pub provider: String,
    pub environment: String,
}

/// A delivery passed its source's checks and its body is stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeliveryReceived {
    #[serde(flatten)]
    pub origin: Origin,
    pub received_at: DateTime<Utc>,
    /// Signature and authorization values are masked.
    pub headers: Headers,
    pub body: BodyRef,
    pub parse: BodyParse,
    pub signature_scheme: String,
    /// Which of the source's secrets matched (rotation), when one did.
    pub secret_index: Option<usize>,
    /// For one event of a batch delivery: the delivery that carried it, and
    /// its place there. The item is decided as if it had arrived alone; its
    /// body is the item, the batch's raw bytes stay with the parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_of: Option<ItemOf>,
}

/// Where a batch item came from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ItemOf {
    pub parent: DeliveryId,
    pub index: usize,
}

/// A delivery was refused before any decision; the provider got an error.
/// Version 2 bounds what is kept (see `domain::rejection`): a stranger can
/// send this as often as the rate limits allow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeliveryRejected {
    #[serde(flatten)]
    pub origin: Origin,
    pub received_at: DateTime<Utc>,
    /// The first headers, secrets masked, long names and values cut
    /// (version 1 kept every header whole).
    pub headers: Headers,
    /// Headers received but not kept (0 in version 1).
    #[serde(default)]
    pub headers_omitted: usize,
    /// Bytes of all header names and values received (absent in version 1).
    #[serde(default)]
    pub header_bytes: Option<u64>,
    /// Stable snake_case code, the same one the provider received.
    pub reason: String,
    pub status: u16,
    /// Present when the whole body was read (it is hashed, never stored).
    pub body: Option<BodyRef>,
    /// Bytes announced or read when the body was refused for its size.
    pub declared_size: Option<u64>,
}

/// Rejections of one source, reason and answer in one window that were only
/// counted, not journaled one by one: beyond the source's individual quota, or
/// refused by a rate limit. A window's rejections are its individually
/// journaled `DeliveryRejected` events plus these counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RejectionsAggregated {
    #[serde(flatten)]
    pub origin: Origin,
    /// Start of the window (aligned on its length since the epoch).
    pub window_start: DateTime<Utc>,
    pub window_secs: u64,
    /// The same snake_case code the requests were answered.
    pub reason: String,
    pub status: u16,
    pub count: u64,
    /// Header and body bytes received (body size as announced when unread).
    pub bytes: u64,
}
