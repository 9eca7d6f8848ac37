//! `unicity fixtures export --case ID [--out DIR]`: a resolved case as a
//! regression fixture file. `unicity fixtures check DIR`: every fixture of
//! a folder replayed against this build (on a fresh SQLite database each,
//! configured as the server is), each difference printed; exits 1 if any.

use std::path::{Path, PathBuf};

use clap::Subcommand;
use uuid::Uuid;

use super::{Cli, open_engine, settings};
use crate::config::FileConfig;
use crate::domain::fixture::Fixture;
use crate::services::fixtures;

#[derive(Subcommand)]
pub(super) enum FixturesCommand {
    /// Write a resolved case as a fixture: its deliveries as received
    /// (sensitive values replaced), the strategies in force, the expected
    /// decisions and effects. The export is journaled.
    Export {
        #[arg(long)]
        case: Uuid,
        /// The folder to write `case-<ID>.json` in.
        #[arg(long, default_value = ".")]
        out: PathBuf,
    },
    /// Replay every `*.json` fixture of DIR against this build and the
    /// configuration's strategies; exit 1 if any decides otherwise.
    Check { dir: PathBuf },
}

pub(super) async fn run(cli: &Cli, command: &FixturesCommand) -> anyhow::Result<()> {
    match command {
        FixturesCommand::Export { case, out } => {
            let engine = open_engine(settings(cli)?).await?;
            let fixture = fixtures::export(&engine, *case, "cli").await?;
            let path = out.join(format!("case-{case}.json"));
            let mut text = serde_json::to_vec_pretty(&fixture)?;
            text.push(b'\n');
            std::fs::write(&path, text)?;
            println!(
                "{}: {} deliveries, {} effect(s) expected",
                path.display(),
                fixture.deliveries.len(),
                fixture.expected_effects
            );
            Ok(())
        }
        FixturesCommand::Check { dir } => {
            let base = FileConfig::read(cli.config.as_deref())?;
            let failed = check(dir, &base).await?;
            if failed > 0 {
                eprintln!("{failed} fixture(s) decided otherwise");
                std::process::exit(1);
            }
            Ok(())
        }
    }
}

/// Replays each fixture of `dir`; returns how many differ.
async fn check(dir: &Path, base: &str) -> anyhow::Result<usize> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    let mut failed = 0;
    for file in &files {
        let fixture: Fixture = serde_json::from_slice(&std::fs::read(file)?)?;
        let scratch =
            std::env::temp_dir().join(format!("unicity-replay-{}", Uuid::now_v7().simple()));
        std::fs::create_dir_all(&scratch)?;
        let url = format!("sqlite://{}?mode=rwc", scratch.join("replay.db").display());
        let replayed = fixtures::replay(&fixture, base, &url).await;
        let _ = std::fs::remove_dir_all(&scratch);
        let differences = replayed?.differences();
        if differences.is_empty() {
            println!("ok    {} ({})", file.display(), fixture.name);
        } else {
            failed += 1;
            println!("DIFF  {} ({})", file.display(), fixture.name);
            for difference in differences {
                println!("      {difference}");
            }
        }
    }
    println!("{} fixture(s), {failed} differing", files.len());
    Ok(failed)
}
