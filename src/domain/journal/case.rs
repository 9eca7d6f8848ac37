//! Events of a case's life after it was opened (opening is part of the
//! decision or settlement that opened it).

use serde::{Deserialize, Serialize};

use crate::domain::cases::Resolution;

/// A case was settled, by whom and why; `effect_id` is the effect applied
/// (processed as distinct) or confirmed (duplicate).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseResolved {
    pub case_id: uuid::Uuid,
    pub resolution: Resolution,
    /// The operator (or token, or look-up) that resolved it.
    pub resolved_by: String,
    pub note: String,
    /// The provider's own reference for the operation, when one was given.
    pub authoritative_ref: Option<String>,
    pub effect_id: Option<uuid::Uuid>,
    /// The key the effect was applied under (processed as distinct).
    pub key: Option<String>,
    /// Made by hand: the operation, and what its look-alikes are
    /// recognised by, held from then on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub made_by_hand: Option<HandMade>,
}

/// An operation a person made by hand (a missing effect closed so).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandMade {
    pub provider: String,
    /// The provider's id of the operation: no effect may cite it.
    pub operation_id: String,
    /// Its resource, amount and currency sealed under the key secret
    /// (`domain::reconcile::hand_made_seal`).
    pub seal: String,
}

/// A case given to an operator to handle (or given back: no assignee).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseAssigned {
    pub case_id: uuid::Uuid,
    /// The operator's name; `None` when the case was unassigned.
    pub assignee: Option<String>,
    pub by: super::Actor,
}

/// A note added to a case without resolving it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseCommented {
    pub case_id: uuid::Uuid,
    pub commented_by: String,
    pub note: String,
}

/// The provider's API was asked about a case: what it answered (or the
/// error), how long it took, and what Unicity concluded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LookupPerformed {
    pub case_id: uuid::Uuid,
    /// The URL asked; never a secret in it.
    pub url: String,
    pub status: Option<u16>,
    pub latency_ms: u64,
    pub operations: Vec<ProviderOperation>,
    pub error: Option<String>,
    /// `process_as_distinct`, `confirm_duplicate` or `for_a_person`.
    pub verdict: String,
    /// Why the answer leaves the case for a person. Absent from look-ups
    /// journaled before 2026-12-04.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// After a failure: when the look-up is tried again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<chrono::DateTime<chrono::Utc>>,
    /// Who asked, when a person did (an operator's or a token's
    /// signature, as `resolved_by` keeps it); absent for the server's own
    /// questions and in look-ups journaled before 2026-12-07.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asked_by: Option<String>,
}

/// One operation as the provider's API lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProviderOperation {
    pub id: String,
    pub amount: Option<serde_json::Value>,
    pub currency: Option<serde_json::Value>,
    pub status: Option<String>,
    /// The resource it belongs to (a payment), when the mapping reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// When the provider made it, when the mapping reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<chrono::DateTime<chrono::Utc>>,
}
