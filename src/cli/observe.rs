//! `unicity observe import --source S FILE` and `unicity observe report
//! --source S [--json]`: a legacy handler's effects beside what Unicity, in
//! observe mode, decided for the same deliveries (`services::observe`).

use std::path::PathBuf;

use clap::Subcommand;

use super::{Cli, definitions, open_database, open_read_model, settings};
use crate::services::observe;

#[derive(Subcommand)]
pub(super) enum ObserveCommand {
    /// Import the legacy handler's effects for a source: CSV with a header
    /// row (`reference,resource,amount,applied_at`; `resource` required) or
    /// JSON lines with the same names. Journaled.
    Import {
        #[arg(long)]
        source: String,
        file: PathBuf,
    },
    /// Where the legacy handler and Unicity disagree for a source.
    Report {
        #[arg(long)]
        source: String,
        #[arg(long)]
        json: bool,
    },
}

pub(super) async fn run(cli: &Cli, command: &ObserveCommand) -> anyhow::Result<()> {
    match command {
        ObserveCommand::Import { source, file } => {
            let text = std::fs::read_to_string(file)?;
            // The key secret seals a sensitive resource as the server does.
            let settings = settings(cli)?;
            let Some(configured) = settings.sources.iter().find(|s| s.slug() == source) else {
                anyhow::bail!("no source `{source}` in the configuration");
            };
            let db = open_database(cli).await?;
            // It seals resources: with the secret the servers seal them with.
            crate::services::engine::refuse_another_key_secret(&db, &settings.key_secret, false)
                .await?;
            let count = observe::import(&db, configured, &settings.key_secret, &text).await?;
            println!("{count} legacy effects of {source} imported");
            Ok(())
        }
        ObserveCommand::Report { source, json } => {
            let definitions = definitions(cli)?;
            let configured = definitions.source(source);
            let observed = configured
                .map(|s| s.observed_effect_types())
                .unwrap_or_default();
            // A source still configured: its resources compared as the
            // import sealed its log's, with the key secret when it is here
            // (the report needs no other secret).
            let resources = configured.map(|s| {
                definitions
                    .catalog
                    .resource_paths(&s.provider, s.resource.as_deref())
            });
            let secret =
                crate::config::key_secret(|name| std::env::var(name).ok(), cli.config.is_none());
            let sealing = match (&resources, &secret) {
                (Some(resources), Ok(secret)) => Some(observe::Sealing { resources, secret }),
                (Some(resources), Err(_)) if resources.seals_any() => {
                    eprintln!(
                        "without {}, resources read at a path that is not sensitive are not \
                         compared with the legacy log's, which are sealed",
                        crate::config::KEY_SECRET_ENV
                    );
                    None
                }
                _ => None,
            };
            let db = open_read_model(cli).await?;
            let report = observe::report(&db, source, &observed, sealing).await?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&report)?);
                return Ok(());
            }
            println!(
                "{source}: the legacy handler applied {} effects, Unicity would have applied {}",
                report.legacy_effects, report.unicity_effects
            );
            let amount = |a: &Option<serde_json::Value>| {
                a.as_ref().map_or("?".to_owned(), ToString::to_string)
            };
            println!(
                "applied by the legacy handler more often than Unicity would have (double effects): {}",
                report.applied_twice_by_legacy.len()
            );
            let lines = |list: &[observe::Disagreement]| {
                for d in list {
                    println!(
                        "  {} amount {}: legacy {} ×, Unicity {} ×",
                        d.resource,
                        amount(&d.amount),
                        d.legacy,
                        d.unicity
                    );
                }
            };
            lines(&report.applied_twice_by_legacy);
            println!(
                "applied by Unicity and never by the legacy handler (lost effects): {}",
                report.missed_by_legacy.len()
            );
            lines(&report.missed_by_legacy);
            println!(
                "applied by Unicity, naming no resource (compared with nothing): {}",
                report.without_resource.len()
            );
            for delivery in &report.without_resource {
                println!("  {delivery}");
            }
            println!("sent to a person by Unicity: {}", report.for_a_person.len());
            for h in &report.for_a_person {
                println!("  {} ({})", h.delivery_id, h.reason);
            }
            println!("collisions: {}", report.collisions.len());
            for h in &report.collisions {
                println!("  {} ({})", h.delivery_id, h.reason);
            }
            Ok(())
        }
    }
}
