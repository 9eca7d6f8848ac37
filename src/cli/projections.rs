//! `unicity projections rebuild`: every derived table cleared and replayed
//! from the journal, which stays the only source of truth.
//! `unicity projections catch-up`: the deliveries read model brought up to
//! the journal, as a running server's projector does, for the reports read
//! with no server running.

use clap::Subcommand;
use sea_orm::DatabaseConnection;

use crate::services::projections;

#[derive(Subcommand)]
pub(super) enum ProjectionsCommand {
    /// Clear every projection and replay the journal into it.
    Rebuild,
    /// Apply to the deliveries read model (search, lists, the dashboard,
    /// the reports) the journal rows it does not hold yet.
    CatchUp,
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
        ProjectionsCommand::CatchUp => {
            let before = crate::store::projector::lag(db).await?;
            let at = crate::store::projector::catch_up(db, 5_000).await?;
            println!(
                "the deliveries read model holds the journal up to position {at} \
                 ({} rows were behind)",
                before.rows
            );
        }
    }
    Ok(())
}
