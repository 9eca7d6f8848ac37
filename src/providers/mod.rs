//! Talking to providers: webhook signature schemes (and, later, authoritative
//! look-ups and effect sinks).

pub mod answer;
pub mod lookup;
pub mod signature;
pub mod sinks;
pub mod status;
