//! The identity engine: from a delivery to the identity of what must happen
//! only once. Pure code: no I/O, no clock, no id generation.
//!
//! Two layers: the transport identity (delivery id header, else raw-body
//! hash) and the business identity, produced by the first strategy of the
//! provider's hierarchy whose fields are present. Keys are SHA-256 of the
//! RFC 8785 form of the material bound to its full scope; strategy versions
//! are fingerprinted so that a definition never changes silently.

mod batch;
mod catalog;
mod derive;
mod explain;
pub mod field;
pub mod horizon;
pub mod jcs;
mod key;
pub mod normalize;
pub mod pattern;
mod presets;
mod provider;
pub mod resource;
mod strategy;
mod types;
mod versions;

#[cfg(test)]
mod tests;

pub use batch::BATCH_STRATEGY;
pub use catalog::{Catalog, CatalogConfig, CatalogError, HierarchyDef};
pub use field::{FieldRef, FieldRefError};
pub use horizon::Horizon;
pub use key::{IdentityKey, IdentityKeyError, KeySecret, KeySecretError, is_sealed, mask};
pub use normalize::{NormalizeRules, VolatileField};
pub use presets::PRESETS;
pub use provider::{EventTypePart, EventTypeRule, ProviderDef};
pub use resource::ResourcePaths;
pub use strategy::{Kind, NamedField, ScopeItem, StrategyDef, StrategyRef};
pub use types::{
    BusinessIdentity, DeliveryFacts, Derivation, ItemDerivation, SkipReason, Skipped,
    TransportIdentity, Unresolved,
};
pub use versions::{StrategyVersionRecord, VersionConflict, check_versions};
