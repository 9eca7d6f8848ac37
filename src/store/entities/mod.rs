//! sea-orm entities: data only, one per table.

pub mod api_token;
pub mod case;
pub mod case_form_token;
pub mod deferred_delivery;
pub mod delivery;
pub mod effect;
pub mod effect_delivery;
pub mod effect_horizon;
pub mod hand_made_hold;
pub mod journal;
pub mod key_secret_check;
pub mod migrated_key;
pub mod operator;
pub mod password_link;
pub mod projector_checkpoint;
pub mod raw_body;
pub mod reconciliation_run;
pub mod session;
pub mod setup_token;
pub mod strategy_breaker;
pub mod strategy_migration;
pub mod strategy_version;
pub mod transport_link;
