//! Log set-up: one line per event, structured fields, sqlx kept quiet.

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber; `RUST_LOG` overrides the default filter.
pub fn init() {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,sea_orm=warn,sea_orm_migration=warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .try_init();
}
