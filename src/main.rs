//! Wiring only: parse the command line, load settings, run.

use std::io::{IsTerminal, Read};
use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use secrecy::{ExposeSecret, SecretString};
use unicity::auth::Role;
use unicity::config::{DEFAULT_DATABASE_URL, DEFAULT_LISTEN, FileConfig, Settings};
use unicity::domain::journal::Actor;
use unicity::services::{access, breakers, projections, reconcile, retention, strategies};
use unicity::startup::Application;
use unicity::{store, telemetry};

/// glibc malloc fragments under many small, short-lived allocations across
/// threads (a profile showed ~15 % of CPU in it); mimalloc does not.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Unicity: webhook ingest that decides, proves and reconciles what must happen once.
///
/// Sources (what providers post to), strategies, hierarchies and effect sinks come
/// from one TOML file. Secrets come from the environment: each source names the
/// variable holding its secrets in `secrets_env` (comma-separated, current first),
/// and UNICITY_KEY_SECRET seals sensitive values in keys. Without a file, a demo
/// configuration with published demo secrets is used (see the README).
#[derive(Parser)]
#[command(name = "unicity", version, about, long_about)]
struct Cli {
    /// TOML configuration file ([[sources]], [[strategies]], [[hierarchies]], [[sinks]], [engine]).
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
        /// Address to listen on.
        #[arg(long, env = "UNICITY_LISTEN", default_value = DEFAULT_LISTEN)]
        listen: String,
    },
    /// Apply pending database migrations and exit.
    Migrate,
    /// Identity keys.
    Key {
        #[command(subcommand)]
        command: KeyCommand,
    },
    /// Derived tables (deliveries, transport links, reservations, effects, cases).
    Projections {
        #[command(subcommand)]
        command: ProjectionsCommand,
    },
    /// Strategy versions.
    Strategies {
        #[command(subcommand)]
        command: StrategiesCommand,
    },
    /// Collision breakers.
    Breaker {
        #[command(subcommand)]
        command: BreakerCommand,
    },
    /// Retention of stored evidence.
    Retention {
        #[command(subcommand)]
        command: RetentionCommand,
    },
    /// Compare the providers' operations in a window with the effects
    /// ledger (look-ups with a `list_url`): a missing or unexpected effect
    /// opens a case, once. The server runs this periodically too.
    Reconcile {
        /// Start of the window (RFC 3339), included.
        #[arg(long)]
        from: chrono::DateTime<chrono::Utc>,
        /// End of the window (RFC 3339), excluded.
        #[arg(long)]
        to: chrono::DateTime<chrono::Utc>,
        /// Only the deliveries of this source (and its provider).
        #[arg(long)]
        source: Option<String>,
    },
    /// Play a provider and a downstream ledger on loopback against a running
    /// Unicity, then print a reconciliation report. Exits with 1 if a refund
    /// was applied twice or never (left for a person is not a failure).
    Simulate(SimulateArgs),
    /// Operators (people who sign in to the back-office).
    Users {
        #[command(subcommand)]
        command: UsersCommand,
    },
    /// API tokens (for `/api`, as `Authorization: Bearer <token>`).
    Tokens {
        #[command(subcommand)]
        command: TokensCommand,
    },
}

#[derive(clap::Args)]
struct SimulateArgs {
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

#[derive(Subcommand)]
enum UsersCommand {
    /// Add an operator. The password is read from standard input when it is
    /// not a terminal, else prompted twice.
    Add {
        name: String,
        /// support, finance, engineer or admin.
        #[arg(long)]
        role: Role,
    },
    /// List operators.
    List,
    /// Disable an operator and end their sessions.
    Disable { name: String },
    /// Set an operator's password (read as for `add`) and end their sessions.
    SetPassword { name: String },
    /// Change an operator's role.
    SetRole { name: String, role: Role },
}

#[derive(Subcommand)]
enum TokensCommand {
    /// Issue a token; it is printed once, only its hash is kept.
    Create {
        #[arg(long)]
        name: String,
        #[arg(long)]
        role: Role,
        #[arg(long)]
        expires_days: Option<u32>,
    },
    /// List tokens (never the tokens themselves).
    List,
    /// Revoke a token.
    Revoke { name: String },
}

#[derive(Subcommand)]
enum StrategiesCommand {
    /// Before retiring a version (`name@version`): re-derive, under the
    /// current version, the key of every effect it keyed from the retained
    /// body, so that a late retry still finds its effect. Then mark the version
    /// `retired = true`; the server refuses to start with it retired before.
    Migrate { strategy: String },
}

#[derive(Subcommand)]
enum BreakerCommand {
    /// Reset a tripped strategy (`name@version`): auto-ignore resumes for it.
    Reset {
        strategy: String,
        /// Why it is safe to resume (journaled with the reset).
        #[arg(long)]
        reason: String,
    },
}

#[derive(Subcommand)]
enum RetentionCommand {
    /// Purge the stored results of effects settled more than DAYS days ago.
    /// Their identity stays in the ledger: a late replay goes to reconciliation.
    PurgeEvidence {
        #[arg(long)]
        older_than_days: u32,
    },
}

#[derive(Subcommand)]
enum KeyCommand {
    /// Explain the key of a body read from standard input: chosen strategy and
    /// version, the ones skipped and why, the masked canonical material, the key.
    Explain {
        /// The source the body would be posted to.
        #[arg(long)]
        source: String,
        /// Event type, sent as the provider's type header where it has one (e.g. x-github-event).
        #[arg(long = "type")]
        event_type: Option<String>,
        /// A request header, `name: value` (repeatable).
        #[arg(long = "header", short = 'H')]
        headers: Vec<String>,
    },
}

#[derive(Subcommand)]
enum ProjectionsCommand {
    /// Clear every projection and replay the journal into it.
    Rebuild,
}

fn settings(cli: &Cli, listen: String) -> anyhow::Result<Settings> {
    let text = FileConfig::read(cli.config.as_deref())?;
    Settings::from_toml(
        &text,
        listen,
        cli.database_url.clone(),
        |name| std::env::var(name).ok(),
        cli.config.is_none(),
    )
}

#[actix_web::main]
async fn main() -> anyhow::Result<()> {
    telemetry::init();
    let cli = Cli::parse();
    let default_listen =
        || std::env::var("UNICITY_LISTEN").unwrap_or_else(|_| DEFAULT_LISTEN.to_owned());
    let command = cli.command.as_ref();
    match command {
        None | Some(Command::Serve { .. }) => {
            let listen = match command {
                Some(Command::Serve { listen }) => listen.clone(),
                _ => default_listen(),
            };
            let app = Application::build(settings(&cli, listen)?).await?;
            tracing::info!(port = app.port(), "unicity listening");
            app.run_until_stopped().await?;
        }
        Some(Command::Migrate) => {
            let db = store::connect(&cli.database_url).await?;
            store::migrate(&db).await?;
            tracing::info!(database = %store::redact_url(&cli.database_url), "migrations applied");
        }
        Some(Command::Projections {
            command: ProjectionsCommand::Rebuild,
        }) => {
            let db = store::connect(&cli.database_url).await?;
            store::migrate(&db).await?;
            let replayed = projections::rebuild(&db).await?;
            println!(
                "projections rebuilt from {} journal rows ({} events)",
                replayed.rows, replayed.events
            );
        }
        Some(Command::Strategies {
            command: StrategiesCommand::Migrate { strategy },
        }) => {
            let settings = settings(&cli, default_listen())?;
            let db = store::connect(&cli.database_url).await?;
            store::migrate(&db).await?;
            let done = strategies::migrate(
                &db,
                &settings.catalog,
                &settings.sources,
                &settings.key_secret,
                strategy,
            )
            .await?;
            println!(
                "{strategy}: {} keys migrated, {} left for reconciliation (body gone); it may now be retired",
                done.migrated, done.unmigrated
            );
        }
        Some(Command::Breaker {
            command: BreakerCommand::Reset { strategy, reason },
        }) => {
            if reason.trim().is_empty() {
                anyhow::bail!("a breaker reset needs a reason (--reason)");
            }
            let db = store::connect(&cli.database_url).await?;
            store::migrate(&db).await?;
            if breakers::reset(&db, strategy, "cli".to_owned(), reason.clone()).await? {
                println!("breaker of {strategy} reset");
            } else {
                println!("{strategy} was not tripped");
            }
        }
        Some(Command::Retention {
            command: RetentionCommand::PurgeEvidence { older_than_days },
        }) => {
            let db = store::connect(&cli.database_url).await?;
            store::migrate(&db).await?;
            let before = chrono::Utc::now() - chrono::Duration::days(i64::from(*older_than_days));
            let purged = retention::purge_evidence(&db, before).await?;
            println!("evidence purged for {purged} effects settled before {before}");
        }
        Some(Command::Reconcile { from, to, source }) => {
            let settings = settings(&cli, default_listen())?;
            reconcile(settings, *from, *to, source.as_deref()).await?;
        }
        Some(Command::Simulate(args)) => {
            let settings = settings(&cli, default_listen())?;
            if !simulate(settings, args).await? {
                std::process::exit(1);
            }
        }
        Some(Command::Users { command }) => {
            let db = store::connect(&cli.database_url).await?;
            store::migrate(&db).await?;
            users(&db, command).await?;
        }
        Some(Command::Tokens { command }) => {
            let db = store::connect(&cli.database_url).await?;
            store::migrate(&db).await?;
            tokens(&db, command).await?;
        }
        Some(Command::Key {
            command:
                KeyCommand::Explain {
                    source,
                    event_type,
                    headers,
                },
        }) => {
            let settings = settings(&cli, default_listen())?;
            print!(
                "{}",
                explain(&settings, source, event_type.as_deref(), headers)?
            );
        }
    }
    Ok(())
}

async fn reconcile(
    settings: Settings,
    from: chrono::DateTime<chrono::Utc>,
    to: chrono::DateTime<chrono::Utc>,
    source: Option<&str>,
) -> anyhow::Result<()> {
    if to <= from {
        anyhow::bail!("--to must come after --from");
    }
    let source = match source {
        Some(slug) => Some(
            settings
                .sources
                .iter()
                .find(|s| s.slug() == slug)
                .cloned()
                .with_context(|| format!("no source {slug:?} in the configuration"))?,
        ),
        None => None,
    };
    let slack = reconcile::seconds(settings.reconciliation.slack_secs);
    let engine = open_engine(settings).await?;
    let window = unicity::domain::reconcile::Window { from, to };
    let runs = reconcile::run_all(&engine, window, slack, source.as_ref()).await?;
    if runs.is_empty() {
        anyhow::bail!("no look-up lists operations by window: configure a list_url");
    }
    let mut failed = false;
    for run in runs {
        match &run.error {
            Some(error) => {
                failed = true;
                println!("{}: not reconciled: {error}", run.provider);
            }
            None => println!(
                "{}: {} operations expected, {} effects applied, {} matched, {} missing, {} unexpected, {} cases opened",
                run.provider,
                run.expected,
                run.applied,
                run.matched,
                run.missing,
                run.unexpected,
                run.opened
            ),
        }
    }
    if failed {
        anyhow::bail!("a provider could not be listed");
    }
    Ok(())
}

/// Plays the simulation and prints its report; false when it failed.
async fn simulate(settings: Settings, args: &SimulateArgs) -> anyhow::Result<bool> {
    use unicity::simulate::{self, scenario::Kind};
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
        api_outage: std::time::Duration::from_millis(args.api_outage_ms),
        late: std::time::Duration::from_millis(args.late_ms),
        settle: std::time::Duration::from_secs(args.settle_secs),
        progress: std::io::stderr().is_terminal(),
    };
    let report = simulate::run(options, engine).await?;
    print!("{report}");
    Ok(report.passed())
}

/// The decision engine on the configured database, without the server.
async fn open_engine(
    settings: Settings,
) -> anyhow::Result<unicity::services::engine::SharedEngine> {
    unicity::services::engine::Engine::open(
        &settings.database_url,
        settings.catalog,
        settings.key_secret,
        settings.sinks,
        settings.lookups,
        settings.engine,
    )
    .await
}

async fn users(db: &sea_orm::DatabaseConnection, command: &UsersCommand) -> anyhow::Result<()> {
    match command {
        UsersCommand::Add { name, role } => {
            access::create_operator(db, name, *role, read_password()?, Actor::Cli).await?;
            println!("operator {name} added ({role})");
        }
        UsersCommand::List => {
            for o in access::operators(db).await? {
                let state = if o.enabled { "enabled" } else { "disabled" };
                let last = o.last_login_at.map(|t| t.to_rfc3339());
                println!(
                    "{}\t{}\t{state}\tcreated {}\tlast login {}",
                    o.name,
                    o.role,
                    o.created_at.to_rfc3339(),
                    last.as_deref().unwrap_or("never")
                );
            }
        }
        UsersCommand::Disable { name } => {
            if access::disable_operator(db, name, Actor::Cli).await? {
                println!("operator {name} disabled; their sessions ended");
            } else {
                println!("operator {name} was already disabled");
            }
        }
        UsersCommand::SetPassword { name } => {
            access::set_password(db, name, read_password()?, Actor::Cli).await?;
            println!("password of {name} changed; their sessions ended");
        }
        UsersCommand::SetRole { name, role } => {
            let from = access::set_role(db, name, *role, Actor::Cli).await?;
            println!("operator {name}: {from} -> {role}");
        }
    }
    Ok(())
}

async fn tokens(db: &sea_orm::DatabaseConnection, command: &TokensCommand) -> anyhow::Result<()> {
    match command {
        TokensCommand::Create {
            name,
            role,
            expires_days,
        } => {
            let token = access::issue_token(db, name, *role, *expires_days, Actor::Cli).await?;
            eprintln!("token {name} ({role}) issued; it is shown once:");
            println!("{token}");
        }
        TokensCommand::List => {
            let now = chrono::Utc::now();
            for t in access::tokens(db).await? {
                let state = match (t.revoked_at, t.expires_at) {
                    (Some(_), _) => "revoked",
                    (None, Some(at)) if at <= now => "expired",
                    _ => "active",
                };
                let expires = t.expires_at.map(|t| t.to_rfc3339());
                println!(
                    "{}\t{}\t{state}\tcreated {}\texpires {}",
                    t.name,
                    t.role,
                    t.created_at.to_rfc3339(),
                    expires.as_deref().unwrap_or("never")
                );
            }
        }
        TokensCommand::Revoke { name } => {
            if access::revoke_token(db, name, Actor::Cli).await? {
                println!("token {name} revoked");
            } else {
                println!("token {name} was already revoked");
            }
        }
    }
    Ok(())
}

/// A password: the first line of standard input when it is not a terminal,
/// else typed twice without echo.
fn read_password() -> anyhow::Result<SecretString> {
    if !std::io::stdin().is_terminal() {
        let mut line = String::new();
        std::io::stdin()
            .read_line(&mut line)
            .context("cannot read the password from standard input")?;
        let line = line.trim_end_matches(['\n', '\r']).to_owned();
        return Ok(SecretString::from(line));
    }
    let first = SecretString::from(rpassword::prompt_password("Password: ")?);
    let second = SecretString::from(rpassword::prompt_password("Password again: ")?);
    if first.expose_secret() != second.expose_secret() {
        anyhow::bail!("the two passwords differ");
    }
    Ok(first)
}

fn explain(
    settings: &Settings,
    slug: &str,
    event_type: Option<&str>,
    headers: &[String],
) -> anyhow::Result<String> {
    let source = settings
        .sources
        .iter()
        .find(|s| s.slug() == slug)
        .with_context(|| format!("no source {slug:?} in the configuration"))?;
    let mut raw = Vec::new();
    std::io::stdin()
        .read_to_end(&mut raw)
        .context("cannot read the body from standard input")?;
    let mut pairs = Vec::new();
    for header in headers {
        let (name, value) = header
            .split_once(':')
            .with_context(|| format!("header {header:?} is not `name: value`"))?;
        pairs.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
    }
    if let Some(event_type) = event_type {
        let header = match source.origin.provider.as_str() {
            "github" => Some("x-github-event"),
            _ => None,
        };
        let Some(name) = header else {
            anyhow::bail!(
                "provider {:?} carries its event type in the body: drop --type",
                source.origin.provider
            );
        };
        if !pairs.iter().any(|(p, _)| p == name) {
            pairs.push((name.to_owned(), event_type.to_owned()));
        }
    }
    // Classified as the server does: a body it would not key is not keyed here.
    let (parse, body) = unicity::domain::delivery::BodyParse::classify(&raw);
    let facts = source.facts(&pairs, parse, body.as_ref(), &raw);
    let derivation = settings.catalog.derive(&facts, &settings.key_secret);
    Ok(derivation.explain())
}
