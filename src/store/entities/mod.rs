//! sea-orm entities: data only, one per table.

pub mod journal;
pub mod raw_body;
