//! Operator access: roles and the role × action table, argon2id passwords,
//! random tokens, the server-side session store, the sign-in throttle, and
//! who is asking.

pub mod password;
pub mod principal;
pub mod roles;
pub mod secrets;
pub mod sessions;
pub mod throttle;

pub use principal::{Principal, PrincipalKind};
pub use roles::{Action, Role};
