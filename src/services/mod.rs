//! Orchestration: the only layer that calls storage, providers and the domain
//! together.

pub mod access;
pub mod audit;
pub mod backoff;
pub mod breakers;
pub mod case_view;
pub mod cases;
pub mod corpus;
pub mod dashboard;
pub mod deliveries;
pub mod derived;
pub mod effects;
pub mod engine;
pub mod fixtures;
pub mod ingest;
pub mod items;
pub mod lookups;
pub mod observe;
pub mod projections;
pub mod projector;
pub mod queue;
pub mod rate_limits;
pub mod raw_reads;
pub mod reconcile;
pub mod rejections;
pub mod retention;
pub mod sandbox;
pub mod search;
pub mod shadow;
pub mod status;
pub mod strategies;
pub mod strategy_list;
pub mod sweeper;
pub mod timeline;
pub mod watch;
