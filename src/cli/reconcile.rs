//! `unicity reconcile`: one reconciliation of a window, as the server runs
//! periodically. It fails (exit 1) when no look-up can list operations or a
//! provider could not be listed, after printing what every provider gave.

use anyhow::Context;
use chrono::{DateTime, Utc};

use super::open_engine;
use crate::config::Settings;
use crate::domain::reconcile::Window;
use crate::services::reconcile;

#[derive(clap::Args)]
pub(super) struct ReconcileArgs {
    /// Start of the window (RFC 3339), included.
    #[arg(long)]
    from: DateTime<Utc>,
    /// End of the window (RFC 3339), excluded.
    #[arg(long)]
    to: DateTime<Utc>,
    /// Only the deliveries of this source (and its provider).
    #[arg(long)]
    source: Option<String>,
}

pub(super) async fn run(settings: Settings, args: &ReconcileArgs) -> anyhow::Result<()> {
    let (from, to) = (args.from, args.to);
    if to <= from {
        anyhow::bail!("--to must come after --from");
    }
    let source = match args.source.as_deref() {
        Some(slug) => Some(
            settings
                .sources
                .iter()
                .find(|s| s.slug() == slug)
                .cloned()
                .with_context(|| format!("no source {slug:?} in the configuration"))?,
        ),
        None => None,
    };
    let slack = reconcile::seconds(settings.reconciliation.slack_secs);
    let engine = open_engine(settings).await?;
    let window = Window { from, to };
    let runs = reconcile::run_all(&engine, window, slack, source.as_ref()).await?;
    if runs.is_empty() {
        anyhow::bail!("no look-up lists operations by window: configure a list_url");
    }
    let mut failed = false;
    for run in runs {
        match &run.error {
            Some(error) => {
                failed = true;
                println!("{}: not reconciled: {error}", run.provider);
            }
            None => println!(
                "{}: {} operations expected, {} effects applied, {} matched, {} missing, {} unexpected, {} cases opened",
                run.provider,
                run.expected,
                run.applied,
                run.matched,
                run.missing,
                run.unexpected,
                run.opened
            ),
        }
    }
    if failed {
        anyhow::bail!("a provider could not be listed");
    }
    Ok(())
}
