//! Unicity: receives webhooks, decides for each delivery whether its business
//! effect must happen, already happened, or cannot be decided safely, and keeps
//! the proof in an append-only journal.

pub mod auth;
pub mod cli;
pub mod config;
pub mod domain;
pub mod memory;
pub mod metrics;
pub mod providers;
pub mod routes;
pub mod services;
pub mod simulate;
pub mod startup;
pub mod state;
pub mod store;
pub mod tasks;
pub mod telemetry;
pub mod tls;
