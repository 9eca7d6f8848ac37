//! `unicity retention purge-evidence`: drops the stored results of effects
//! settled long ago. Their identity stays in the ledger, so a late replay
//! still goes to reconciliation rather than running again.

use clap::Subcommand;
use sea_orm::DatabaseConnection;

use crate::services::retention;

#[derive(Subcommand)]
pub(super) enum RetentionCommand {
    /// Purge the stored results of effects settled more than DAYS days ago.
    /// Their identity stays in the ledger: a late replay goes to reconciliation.
    PurgeEvidence {
        #[arg(long)]
        older_than_days: u32,
    },
}

pub(super) async fn run(db: &DatabaseConnection, command: &RetentionCommand) -> anyhow::Result<()> {
    let RetentionCommand::PurgeEvidence { older_than_days } = command;
    let before = chrono::Utc::now()
        .checked_sub_signed(chrono::Duration::days(i64::from(*older_than_days)))
        .ok_or_else(|| {
            anyhow::anyhow!("--older-than-days {older_than_days} reaches before any date")
        })?;
    let purged = retention::purge_evidence(db, before).await?;
    println!("evidence purged for {purged} effects settled before {before}");
    Ok(())
}
