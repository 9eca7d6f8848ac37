//! Wiring only: install logging, parse the command line, run it.
//! The commands themselves live in `unicity::cli`.

use clap::Parser;
use unicity::cli::Cli;

/// glibc malloc fragments under many small, short-lived allocations across
/// threads (a profile showed ~15 % of CPU in it); mimalloc does not.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[actix_web::main]
async fn main() -> anyhow::Result<()> {
    let small_pages = unicity::memory::small_pages_only();
    let cli = Cli::parse();
    unicity::telemetry::init(cli.log_format);
    if let Err(error) = small_pages {
        tracing::debug!(%error, "transparent huge pages left to the host's setting");
    }
    unicity::cli::run(cli).await
}
