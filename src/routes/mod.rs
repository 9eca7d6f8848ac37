//! HTTP only: extract, call a service, respond.

pub mod deliveries;
pub mod error;
pub mod health;
pub mod hooks;
