//! `unicity strategies migrate` and `unicity breaker reset`: the two commands
//! that act on a strategy version (`name@version`). A breaker reset is
//! journaled with its reason, so it refuses an empty one before touching the
//! database.

use clap::Subcommand;

use super::{Cli, open_database, settings};
use crate::services::{breakers, strategies};

#[derive(Subcommand)]
pub(super) enum StrategiesCommand {
    /// Before retiring a version (`name@version`): re-derive, under the
    /// current version, the key of every effect it keyed from the retained
    /// body, so that a late retry still finds its effect. Then mark the version
    /// `retired = true`; the server refuses to start with it retired before.
    Migrate { strategy: String },
}

#[derive(Subcommand)]
pub(super) enum BreakerCommand {
    /// Reset a tripped strategy (`name@version`): auto-ignore resumes for it.
    Reset {
        strategy: String,
        /// Why it is safe to resume (journaled with the reset).
        #[arg(long)]
        reason: String,
    },
}

pub(super) async fn migrate(cli: &Cli, command: &StrategiesCommand) -> anyhow::Result<()> {
    let StrategiesCommand::Migrate { strategy } = command;
    let settings = settings(cli)?;
    let db = open_database(cli).await?;
    let done = strategies::migrate(
        &db,
        &settings.catalog,
        &settings.sources,
        &settings.key_secret,
        strategy,
    )
    .await?;
    println!(
        "{strategy}: {} keys migrated, {} left for reconciliation (body gone); it may now be retired",
        done.migrated, done.unmigrated
    );
    Ok(())
}

pub(super) async fn reset(cli: &Cli, command: &BreakerCommand) -> anyhow::Result<()> {
    let BreakerCommand::Reset { strategy, reason } = command;
    if reason.trim().is_empty() {
        anyhow::bail!("a breaker reset needs a reason (--reason)");
    }
    let db = open_database(cli).await?;
    if breakers::reset(&db, strategy, "cli".to_owned(), reason.clone()).await? {
        println!("breaker of {strategy} reset");
    } else {
        println!("{strategy} was not tripped");
    }
    Ok(())
}
