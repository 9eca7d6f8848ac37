//! Orchestration: the only layer that calls storage, providers and the domain
//! together.

pub mod deliveries;
pub mod ingest;
