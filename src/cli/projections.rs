//! `unicity projections rebuild`: every derived table cleared and replayed
//! from the journal, which stays the only source of truth.

use clap::Subcommand;
use sea_orm::DatabaseConnection;

use crate::services::projections;

#[derive(Subcommand)]
pub(super) enum ProjectionsCommand {
    /// Clear every projection and replay the journal into it.
    Rebuild,
}

pub(super) async fn run(
    db: &DatabaseConnection,
    command: &ProjectionsCommand,
) -> anyhow::Result<()> {
    match command {
        ProjectionsCommand::Rebuild => {
            let replayed = projections::rebuild(db).await?;
            println!(
                "projections rebuilt from {} journal rows ({} events)",
                replayed.rows, replayed.events
            );
        }
    }
    Ok(())
}
