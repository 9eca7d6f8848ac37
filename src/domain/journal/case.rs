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
}

/// A note added to a case without resolving it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseCommented {
    pub case_id: uuid::Uuid,
    pub commented_by: String,
    pub note: String,
}
