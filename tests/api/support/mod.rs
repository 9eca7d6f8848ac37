//! What the tests stand on, one module per kind: the test server and how to
//! talk to it (`app`), what tests count in its database (`counts`) and read
//! there row by row (`probe`), what its servers log (`logs`), the binary run
//! as child processes (`processes`), a form client without JavaScript
//! (`forms`), an administrator's change held open
//! while the server acts (`held`), a real browser (`chromium`), the queue and case pages' set-up
//! (`pages`), a database read as it is for upgrade tests (`schema`), and the
//! services on either side of Unicity: a provider's API
//! (`provider`) and the downstream that applies effects (`downstream`, and
//! over HTTPS only, `tls_downstream`).

pub mod app;
pub mod chromium;
pub mod counts;
pub mod downstream;
pub mod forms;
pub mod held;
pub mod logs;
pub mod pages;
pub mod probe;
pub mod processes;
pub mod provider;
pub mod schema;
pub mod tls_downstream;
