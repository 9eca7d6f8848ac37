//! `unicity fixtures export --case ID [--out DIR]`: a resolved case as a
//! regression fixture file. `unicity fixtures check DIR`: every fixture of
//! a folder replayed against this build (on a fresh SQLite database each,
//! configured as the server is), each difference printed; exits 1 if any.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Subcommand;
use uuid::Uuid;

use super::{Cli, definitions, open_for_reading};
use crate::config::FileConfig;
use crate::services::fixtures;

#[derive(Subcommand)]
pub(super) enum FixturesCommand {
    /// Write a resolved case as a fixture: its deliveries as received
    /// (sensitive values replaced), the strategies in force, the expected
    /// decisions and effects. The export is journaled.
    Export {
        #[arg(long)]
        case: Uuid,
        /// The folder to write `case-<ID>.json` in; a file already there is
        /// never replaced.
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
            let definitions = definitions(cli)?;
            // Each source's header mask as configured, as the server applies it.
            let masks = definitions
                .sources
                .iter()
                .map(|source| {
                    let mask = source.header_mask_in(&definitions.catalog)?;
                    Ok((source.slug.clone(), mask))
                })
                .collect::<anyhow::Result<HashMap<_, _>>>()?;
            let db = open_for_reading(cli).await?;
            // The case's deliveries come from the read model, brought up to
            // the journal first, as the server's export page does.
            crate::store::projector::catch_up(&db, 5_000).await?;
            let path = out.join(format!("case-{case}.json"));
            // Claimed before the export is journaled: a file already there,
            // or a link planted in its place, is never written through.
            let mut file = create_new(&path)?;
            let written = async {
                let fixture =
                    fixtures::export_from(&db, &definitions.catalog, &masks, *case, "cli").await?;
                let mut text = serde_json::to_vec_pretty(&fixture)?;
                text.push(b'\n');
                file.write_all(&text)
                    .and_then(|()| file.sync_all())
                    .with_context(|| format!("cannot write {}", path.display()))?;
                anyhow::Ok(fixture)
            }
            .await;
            let fixture = match written {
                Ok(fixture) => fixture,
                Err(error) => {
                    // The file this export created, and nothing else.
                    let _ = std::fs::remove_file(&path);
                    return Err(error);
                }
            };
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

/// A new file at `path`, never one already there (nor through a link there).
fn create_new(path: &Path) -> anyhow::Result<std::fs::File> {
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
    {
        Ok(file) => Ok(file),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => anyhow::bail!(
            "{} already exists: an export never replaces a file; remove it or choose another --out",
            path.display()
        ),
        Err(error) => Err(error).with_context(|| format!("cannot create {}", path.display())),
    }
}

/// Replays each fixture of `dir` on a fresh SQLite database, printing `ok`
/// or `DIFF` and each difference per file; returns how many differ.
async fn check(dir: &Path, base: &str) -> anyhow::Result<usize> {
    let mut scratch = fixtures::SqliteScratch::new(std::env::temp_dir());
    let checked = fixtures::check(dir, base, &mut scratch, |one| {
        if one.passed() {
            println!("ok    {} ({})", one.file.display(), one.name);
        } else {
            println!("DIFF  {} ({})", one.file.display(), one.name);
            for difference in &one.differences {
                println!("      {difference}");
            }
        }
    })
    .await?;
    let failed = checked.iter().filter(|one| !one.passed()).count();
    println!("{} fixture(s), {failed} differing", checked.len());
    Ok(failed)
}
