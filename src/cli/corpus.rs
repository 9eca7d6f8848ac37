//! `unicity corpus report [--source S] [--type T] [--json]`: which body
//! fields stay, change or come and go across one event's retries, and which
//! tell apart deliveries the live strategy kept apart (`services::corpus`).
//! It suggests; it changes no strategy.

use clap::Subcommand;

use super::{Cli, open_for_reading};
use crate::services::corpus::{self, Stability};

#[derive(Subcommand)]
pub(super) enum CorpusCommand {
    /// Field stability across retries, and the fields that separate
    /// distinct effects on one resource.
    Report {
        #[arg(long)]
        source: Option<String>,
        /// Only this event type.
        #[arg(long = "type")]
        event_type: Option<String>,
        #[arg(long)]
        json: bool,
    },
}

pub(super) async fn run(cli: &Cli, command: &CorpusCommand) -> anyhow::Result<()> {
    let CorpusCommand::Report {
        source,
        event_type,
        json,
    } = command;
    let catalog = super::definitions(cli)?.catalog;
    let db = open_for_reading(cli).await?;
    let chosen = corpus::Chosen {
        source: source.as_deref(),
        event_type: event_type.as_deref(),
        most: None,
    };
    let report = corpus::report(&db, &catalog, chosen).await?;
    if *json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!(
        "{} deliveries, {} events seen more than once (same provider id or strong key)",
        report.deliveries, report.repeated_events
    );
    for field in &report.fields {
        let what = match field.stability {
            Stability::Volatile => "VOLATILE (a candidate for `volatile`)",
            Stability::Conditional => "conditional",
            Stability::Stable => "stable",
        };
        let declared = if field.declared_volatile {
            " (declared volatile)"
        } else {
            ""
        };
        println!(
            "  {:<40} {what}: in {} events, changed in {}, missing in {}{declared}",
            field.path, field.events, field.changed_in, field.missing_in
        );
    }
    println!(
        "{} resources with more than one effect; fields that told them apart (candidates for discriminants):",
        report.resources_with_distinct_effects
    );
    for s in &report.separating {
        println!("  {:<40} {} resources", s.path, s.resources);
    }
    if report.separating.is_empty() && report.resources_with_distinct_effects > 0 {
        println!("  (none: nothing in their bodies but volatile fields tells them apart)");
    }
    Ok(())
}
