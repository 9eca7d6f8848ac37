//! `unicity replay --strategies candidate.toml`: what a candidate strategy
//! set would have decided over the journal (`services::shadow`), next to
//! what the live set decides replaying the same deliveries — merges first.
//! Nothing is written to the database it reads. A progress bar is drawn on
//! standard error when it is a terminal, never with `--json`.

use std::path::PathBuf;

use chrono::{DateTime, Utc};

use super::progress::Bar;
use super::{Cli, open_for_reading};
use crate::config::FileConfig;
use crate::services::shadow::{self, Change, Progress, ShadowReport, Unwatched, Window};

#[derive(clap::Args)]
pub(super) struct ReplayArgs {
    /// The candidate: `[[strategies]]` (new versions) and `[[hierarchies]]`,
    /// added to the configuration's.
    #[arg(long)]
    strategies: PathBuf,
    /// Deliveries received at or after this instant (RFC 3339).
    #[arg(long)]
    from: Option<DateTime<Utc>>,
    /// Deliveries received before this instant (RFC 3339).
    #[arg(long)]
    to: Option<DateTime<Utc>>,
    /// Deliveries of this source only.
    #[arg(long)]
    source: Option<String>,
    /// The report as one JSON document.
    #[arg(long)]
    json: bool,
}

pub(super) async fn run(cli: &Cli, args: &ReplayArgs) -> anyhow::Result<()> {
    let db = open_for_reading(cli).await?;
    let base = FileConfig::read(cli.config.as_deref())?;
    let candidate = std::fs::read_to_string(&args.strategies)?;
    let window = Window {
        from: args.from,
        to: args.to,
        source: args.source.clone(),
        most: None,
    };
    let scratch = shadow::scratch_dir()?;
    let bar = Bar::on_stderr(args.json);
    let progress: &dyn Progress = bar.as_ref().map_or(&Unwatched, |bar| bar);
    let report = shadow::watched(&db, &base, &candidate, &window, scratch.path(), progress).await;
    if let Some(bar) = &bar {
        bar.finish(report.is_ok());
    }
    drop(scratch);
    let report = report?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", text(&report));
    }
    Ok(())
}

/// The report for a person.
fn text(report: &ShadowReport) -> String {
    let mut out = format!(
        "replayed {} deliveries ({} left out: body gone; {} decisions compared, a batch's \
         events one by one) in {:.1} s, {:.0} deliveries decided/s by both sets\n",
        report.replayed, report.skipped, report.compared, report.elapsed_secs, report.per_s
    );
    if report.replayed == 0 {
        out += "nothing was compared: widen the window or check the source\n";
        return out;
    }
    let merges: usize = report
        .changes
        .iter()
        .filter(|c| c.change == Change::Merge)
        .map(|c| c.deliveries)
        .sum();
    out += &format!(
        "noise: {} deliveries the live set's own replay decides otherwise (never blamed on the candidate)\n",
        report.noise.len()
    );
    out += &format!(
        "candidate: {} deliveries decided otherwise, {merges} of them merged into another's effect\n",
        report.changes.iter().map(|c| c.deliveries).sum::<usize>()
    );
    for c in &report.changes {
        let label = match c.change {
            Change::Merge => "MERGE (effects may be lost)",
            Change::Split => "SPLIT (an effect may run twice)",
            Change::ToQuarantine => "to quarantine",
            Change::ToReconcile => "to reconciliation",
            Change::Other => "other",
        };
        out += &format!(
            "  {label:<24} {:>6}  {} {}  {}  e.g. {}\n",
            c.deliveries,
            c.strategy,
            c.event_type,
            c.transition,
            c.examples.join(", ")
        );
    }
    for n in report.noise.iter().take(5) {
        out += &format!(
            "  noise: {} journaled {}/{}, replayed {}/{}\n",
            n.delivery_id,
            n.journaled.decision,
            n.journaled.reason,
            n.live_replay.decision,
            n.live_replay.reason
        );
    }
    out
}
