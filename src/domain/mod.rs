//! Pure domain: journal event types, delivery facts, identity and decisions.
//! Nothing here touches actix, sea_orm, reqwest or tokio, reads the clock or
//! makes ids: time, ids and provider answers come in as arguments.

pub mod cases;
pub mod confidence;
pub mod decision;
pub mod delivery;
pub mod diff;
pub mod fixture;
pub mod identity;
pub mod journal;
pub mod lookup;
pub mod masking;
pub mod money;
pub mod plan;
pub mod reconcile;
pub mod rejection;
pub mod reservation;
pub mod search;
pub mod strict_json;
pub mod uri;
