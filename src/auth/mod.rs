//! Operator access: roles and the role × action table, argon2id passwords,
//! random tokens, the server-side session store, the sign-in form token and
//! throttle, and who is asking.

pub mod login_token;
pub mod password;
pub mod principal;
pub mod roles;
pub mod secrets;
pub mod sessions;
pub mod throttle;

pub use principal::{Principal, PrincipalKind};
pub use roles::{Action, Role};
