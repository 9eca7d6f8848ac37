//! `unicity simulate`: a provider and a downstream ledger played on loopback
//! against a running Unicity, then the report. The process exits with 1 when
//! the report fails (a refund applied twice or never), 0 otherwise.

use std::io::IsTerminal;
use std::time::Duration;

use anyhow::Context;

use super::open_engine;
use crate::config::Settings;
use crate::simulate::{self, scenario::Kind};

#[derive(clap::Args)]
pub(super) struct SimulateArgs {
    /// Unicity's base URL.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    unicity: String,
    /// The source the provider posts to (signed with its current secret).
    #[arg(long, default_value = "demo-hmac")]
    source: String,
    /// Where the provider's API listens (the demo look-up points here).
    #[arg(long, default_value = "127.0.0.1:8091")]
    provider_listen: String,
    /// Where the downstream ledger listens (the demo sink points here).
    #[arg(long, default_value = "127.0.0.1:8092")]
    downstream_listen: String,
    /// Payments in the scenario (some get two refunds).
    #[arg(long, default_value_t = 40)]
    items: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Only these kinds, comma-separated: plain, retry, reencoded, equal,
    /// identical, collision, timeout, dropped, burst.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Payments delivered at once.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// How long the provider's API is down at the start.
    #[arg(long, default_value_t = 2000)]
    api_outage_ms: u64,
    /// How late the downstream answers a slow effect (beyond the sink's timeout).
    #[arg(long, default_value_t = 2500)]
    late_ms: u64,
    /// The longest wait for Unicity to settle.
    #[arg(long, default_value_t = 60)]
    settle_secs: u64,
}

/// Plays the simulation and prints its report; a failed report ends the
/// process with 1 at once, without waiting for the loopback servers to stop.
pub(super) async fn run(settings: Settings, args: &SimulateArgs) -> anyhow::Result<()> {
    if !play(settings, args).await? {
        std::process::exit(1);
    }
    Ok(())
}

/// Plays the simulation and prints its report; false when it failed.
async fn play(settings: Settings, args: &SimulateArgs) -> anyhow::Result<bool> {
    let source = settings
        .sources
        .iter()
        .find(|s| s.slug() == args.source)
        .cloned()
        .with_context(|| format!("no source {:?} in the configuration", args.source))?;
    let only = args
        .only
        .iter()
        .map(|name| Kind::parse(name).with_context(|| format!("no scenario kind {name:?}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let engine = open_engine(settings).await?;
    let options = simulate::Options {
        unicity: args.unicity.trim_end_matches('/').to_owned(),
        source,
        provider_listen: args.provider_listen.clone(),
        downstream_listen: args.downstream_listen.clone(),
        items: args.items,
        seed: args.seed,
        only,
        concurrency: args.concurrency,
        api_outage: Duration::from_millis(args.api_outage_ms),
        late: Duration::from_millis(args.late_ms),
        settle: Duration::from_secs(args.settle_secs),
        progress: std::io::stderr().is_terminal(),
    };
    let report = simulate::run(options, engine).await?;
    print!("{report}");
    Ok(report.passed())
}
