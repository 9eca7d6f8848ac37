//! `unicity serve` (also what runs without a command) and `unicity migrate`.
//! Serving migrates the database itself; `migrate` is for deployments that
//! apply the schema before starting servers.

use super::{Cli, settings_listening};
use crate::startup::Application;
use crate::store;

/// Builds the application on `listen` (and `/metrics` alone on
/// `metrics_listen`) and serves until stopped.
pub(super) async fn serve(
    cli: &Cli,
    listen: String,
    metrics_listen: Option<String>,
) -> anyhow::Result<()> {
    let mut settings = settings_listening(cli, listen)?;
    settings.metrics_listen = metrics_listen;
    let app = Application::build(settings).await?;
    tracing::info!(
        port = app.port(),
        metrics_port = app.metrics_port(),
        "unicity listening"
    );
    app.run_until_stopped().await?;
    Ok(())
}

/// Applies pending migrations and says so, the URL's password masked.
pub(super) async fn migrate(database_url: &str) -> anyhow::Result<()> {
    let db = store::connect(database_url).await?;
    store::migrate(&db).await?;
    tracing::info!(database = %store::redact_url(database_url), "migrations applied");
    Ok(())
}
