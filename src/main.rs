//! Wiring only: parse the command line, load settings, run.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use unicity::config::{DEFAULT_DATABASE_URL, DEFAULT_LISTEN, FileConfig, Settings};
use unicity::startup::Application;
use unicity::{store, telemetry};

/// Unicity: webhook ingest that decides, proves and reconciles what must happen once.
///
/// Sources (what providers post to) come from one TOML file; secrets come from
/// the environment variables each source names in `secrets_env` (comma-separated,
/// current first). Without a file, a demo configuration with published demo
/// secrets is used (see the README).
#[derive(Parser)]
#[command(name = "unicity", version, about, long_about)]
struct Cli {
    /// TOML configuration file with the [[sources]] tables.
    #[arg(long, env = "UNICITY_CONFIG", global = true)]
    config: Option<PathBuf>,

    /// Database URL: sqlite://FILE?mode=rwc (embedded) or postgres://USER@HOST/DB.
    #[arg(long, env = "DATABASE_URL", default_value = DEFAULT_DATABASE_URL, global = true, hide_env_values = true)]
    database_url: String,

    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the HTTP server (the default).
    Serve {
        /// Address to listen on. Reads are not authenticated yet: keep it on localhost.
        #[arg(long, env = "UNICITY_LISTEN", default_value = DEFAULT_LISTEN)]
        listen: String,
    },
    /// Apply pending database migrations and exit.
    Migrate,
}

#[actix_web::main]
async fn main() -> anyhow::Result<()> {
    telemetry::init();
    let cli = Cli::parse();
    match cli.command.unwrap_or(Command::Serve {
        listen: std::env::var("UNICITY_LISTEN").unwrap_or_else(|_| DEFAULT_LISTEN.to_owned()),
    }) {
        Command::Migrate => {
            let db = store::connect(&cli.database_url).await?;
            store::migrate(&db).await?;
            tracing::info!(database = %store::redact_url(&cli.database_url), "migrations applied");
            Ok(())
        }
        Command::Serve { listen } => {
            let sources = FileConfig::load(cli.config.as_deref())?
                .resolve(|name| std::env::var(name).ok())?;
            let settings = Settings {
                listen,
                database_url: cli.database_url,
                sources,
            };
            let app = Application::build(settings).await?;
            tracing::info!(port = app.port(), "unicity listening");
            app.run_until_stopped().await?;
            Ok(())
        }
    }
}
