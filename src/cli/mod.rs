//! The `unicity` command line: the clap definitions of every subcommand and
//! the dispatch to the file that runs it. `main.rs` only parses and calls
//! [`run`]. Subcommands, flags, printed text and exit codes are an interface
//! (scripts and the process tests rely on them): change them deliberately.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::config::{DEFAULT_DATABASE_URL, DEFAULT_LISTEN, Definitions, FileConfig, Settings};

mod corpus;
mod fixtures;
mod keys;
mod observe;
mod operators;
mod progress;
mod projections;
mod reconcile;
mod replay;
mod retention;
mod serve;
mod simulate;
mod strategies;
mod tokens;

/// Unicity: webhook ingest that decides, proves and reconciles what must happen once.
///
/// Sources (what providers post to), strategies, hierarchies and effect sinks come
/// from one TOML file. Secrets come from the environment: each source names the
/// variable holding its secrets in `secrets_env` (comma-separated, current first),
/// and UNICITY_KEY_SECRET seals sensitive values in keys. Without a file, a demo
/// configuration with published demo secrets is used (see the README).
#[derive(Parser)]
#[command(name = "unicity", version, about, long_about)]
pub struct Cli {
    /// TOML configuration file ([[sources]], [[strategies]], [[hierarchies]], [[sinks]], [engine]).
    #[arg(long, env = "UNICITY_CONFIG", global = true)]
    pub config: Option<PathBuf>,

    /// Database URL: sqlite://FILE?mode=rwc (embedded) or postgres://USER@HOST/DB.
    #[arg(long, env = "DATABASE_URL", default_value = DEFAULT_DATABASE_URL, global = true, hide_env_values = true)]
    database_url: String,

    /// Log lines, on standard error, as `text` or `json` (one object per
    /// line); by default text on a terminal, JSON otherwise.
    #[arg(long, env = "UNICITY_LOG_FORMAT", value_enum, global = true)]
    pub log_format: Option<crate::telemetry::LogFormat>,

    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the HTTP server (the default).
    Serve {
        /// Address to listen on.
        #[arg(long, env = "UNICITY_LISTEN", default_value = DEFAULT_LISTEN)]
        listen: String,
        /// Also serve `/metrics` on this address, to anyone who can reach it
        /// (off by default; the main address serves it to operators only).
        #[arg(long, env = "UNICITY_METRICS_LISTEN")]
        metrics_listen: Option<String>,
    },
    /// Apply pending database migrations and exit.
    Migrate,
    /// What the journal says of body fields: stable, volatile, conditional,
    /// and those that separate distinct effects. Suggests, never applies.
    Corpus {
        #[command(subcommand)]
        command: corpus::CorpusCommand,
    },
    /// Observe mode: import a legacy handler's effects, and report where it
    /// and Unicity disagree.
    Observe {
        #[command(subcommand)]
        command: observe::ObserveCommand,
    },
    /// Resolved cases as regression fixtures: export one, check a folder.
    Fixtures {
        #[command(subcommand)]
        command: fixtures::FixturesCommand,
    },
    /// Identity keys.
    Key {
        #[command(subcommand)]
        command: keys::KeyCommand,
    },
    /// Derived tables (deliveries, transport links, taken keys and their effects, cases).
    Projections {
        #[command(subcommand)]
        command: projections::ProjectionsCommand,
    },
    /// Strategy versions.
    Strategies {
        #[command(subcommand)]
        command: strategies::StrategiesCommand,
    },
    /// Collision breakers.
    Breaker {
        #[command(subcommand)]
        command: strategies::BreakerCommand,
    },
    /// Retention of stored evidence.
    Retention {
        #[command(subcommand)]
        command: retention::RetentionCommand,
    },
    /// Compare the providers' operations in a window with the effects
    /// ledger (look-ups with a `list_url`): a missing or unexpected effect
    /// opens a case, once. The server runs this periodically too.
    Reconcile(reconcile::ReconcileArgs),
    /// What a candidate strategy set would decide over the journal, next to
    /// the live set's replay of the same deliveries: merges first. Writes
    /// nothing to the database it reads.
    Replay(replay::ReplayArgs),
    /// Play a provider and a downstream ledger on loopback against a running
    /// Unicity, then print a reconciliation report. Exits with 1 if a refund
    /// was applied twice or never (left for a person is not a failure).
    Simulate(simulate::SimulateArgs),
    /// Operators (people who sign in to the back-office).
    Users {
        #[command(subcommand)]
        command: operators::UsersCommand,
    },
    /// API tokens (for `/api`, as `Authorization: Bearer <token>`).
    Tokens {
        #[command(subcommand)]
        command: tokens::TokensCommand,
    },
}

/// Runs the parsed command; without one, the server.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match &cli.command {
        None => serve::serve(&cli, default_listen(), default_metrics_listen()).await,
        Some(Command::Serve {
            listen,
            metrics_listen,
        }) => serve::serve(&cli, listen.clone(), metrics_listen.clone()).await,
        Some(Command::Migrate) => serve::migrate(&cli.database_url).await,
        Some(Command::Corpus { command }) => corpus::run(&cli, command).await,
        Some(Command::Fixtures { command }) => fixtures::run(&cli, command).await,
        Some(Command::Observe { command }) => observe::run(&cli, command).await,
        Some(Command::Key { command }) => keys::run(&settings(&cli)?, command),
        Some(Command::Projections { command }) => {
            projections::run(&open_database(&cli).await?, command).await
        }
        Some(Command::Strategies { command }) => strategies::run(&cli, command).await,
        Some(Command::Breaker { command }) => strategies::reset(&cli, command).await,
        Some(Command::Retention { command }) => {
            retention::run(&open_database(&cli).await?, command).await
        }
        Some(Command::Reconcile(args)) => reconcile::run(settings(&cli)?, args).await,
        Some(Command::Replay(args)) => replay::run(&cli, args).await,
        Some(Command::Simulate(args)) => simulate::run(settings(&cli)?, args).await,
        Some(Command::Users { command }) => {
            operators::run(&open_database(&cli).await?, command).await
        }
        Some(Command::Tokens { command }) => {
            tokens::run(&open_database(&cli).await?, command).await
        }
    }
}

/// The listen address of `serve`'s flag when another command (or none) runs.
fn default_listen() -> String {
    std::env::var("UNICITY_LISTEN").unwrap_or_else(|_| DEFAULT_LISTEN.to_owned())
}

/// The metrics address of `serve`'s flag when no command runs.
fn default_metrics_listen() -> Option<String> {
    std::env::var("UNICITY_METRICS_LISTEN").ok()
}

/// The settings of commands that need the configuration but not a listener.
fn settings(cli: &Cli) -> anyhow::Result<Settings> {
    settings_listening(cli, default_listen())
}

fn settings_listening(cli: &Cli, listen: String) -> anyhow::Result<Settings> {
    let text = FileConfig::read(cli.config.as_deref())?;
    Settings::from_toml(
        &text,
        listen,
        cli.database_url.clone(),
        |name| std::env::var(name).ok(),
        cli.config.is_none(),
    )
}

/// The configuration as commands that verify no signature and derive no
/// key read it: no secret is asked for (see `Definitions`).
fn definitions(cli: &Cli) -> anyhow::Result<Definitions> {
    Definitions::from_toml(&FileConfig::read(cli.config.as_deref())?)
}

/// The database, migrated: every command that writes it on purpose starts
/// here.
async fn open_database(cli: &Cli) -> anyhow::Result<sea_orm::DatabaseConnection> {
    let db = crate::store::connect(&cli.database_url).await?;
    crate::store::migrate(&db).await?;
    Ok(db)
}

/// The database as it is, for commands that read it: never migrated, and
/// refused if its schema is not this binary's (run against production from
/// an engineer's machine, a read must change nothing there).
async fn open_for_reading(cli: &Cli) -> anyhow::Result<sea_orm::DatabaseConnection> {
    let db = crate::store::connect(&cli.database_url).await?;
    crate::store::require_current_schema(&db).await?;
    Ok(db)
}

/// `open_for_reading` for a command that reads the deliveries read model,
/// which follows the journal while a server runs: when it does not hold the
/// journal's last rows, standard error says so, and how to apply them.
async fn open_read_model(cli: &Cli) -> anyhow::Result<sea_orm::DatabaseConnection> {
    let db = open_for_reading(cli).await?;
    let lag = crate::store::projector::lag(&db).await?;
    if lag.rows > 0 {
        let since = lag
            .since
            .map(|at| format!(", recorded since {}", at.format("%Y-%m-%d %H:%M:%S UTC")))
            .unwrap_or_default();
        eprintln!(
            "note: the deliveries read model does not hold the journal's last {} rows{since}, \
             and what follows leaves them out: a running server applies them within a second, \
             `unicity projections catch-up` applies them with none running",
            lag.rows
        );
    }
    Ok(db)
}

/// The decision engine on the configured database, without the server, as
/// the server opens it (migrated), for `reconcile` and `simulate`, which run
/// what the server runs but decide no delivery: the strategy versions of the
/// file they are given are not recorded (only a server records versions).
async fn open_engine(settings: Settings) -> anyhow::Result<crate::services::engine::SharedEngine> {
    crate::services::engine::Engine::open_for_a_command(
        &settings.database_url,
        settings.catalog,
        settings.key_secret,
        settings.sinks,
        settings.lookups,
        settings.engine,
    )
    .await
}
