//! `unicity strategies list`, `unicity strategies migrate` and `unicity
//! breaker reset`: what each strategy version keyed, and the two commands
//! that act on one (`name@version`). A breaker reset is
//! journaled with its reason, so it refuses an empty one before touching the
//! database.

use clap::Subcommand;

use super::{Cli, definitions, open_database, open_for_reading, open_read_model, settings};
use crate::services::engine::refuse_another_key_secret;
use crate::services::{breakers, strategies, strategy_list};

#[derive(Subcommand)]
pub(super) enum StrategiesCommand {
    /// Every `name@version` with its fingerprint, first and last use, keys
    /// alive within the horizon, effects, open cases and breaker state.
    List {
        /// One JSON document instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Retire a version (`name@version`): print the plan — each effect it
    /// keyed, re-derived under the current version from its retained body,
    /// or left for reconciliation — then, unless `--dry-run`, migrate its
    /// keys (journaled). Refused while a reservation of it is not settled.
    /// The version is then marked `retired = true` in the configuration.
    Retire {
        strategy: String,
        #[arg(long)]
        dry_run: bool,
    },
    /// Before retiring a version (`name@version`): re-derive, under the
    /// current version, the key of every effect it keyed from the retained
    /// body, so that a late retry still finds its effect. Then mark the version
    /// `retired = true`; the server refuses to start with it retired before.
    Migrate { strategy: String },
}

#[derive(Subcommand)]
pub(super) enum BreakerCommand {
    /// Reset a tripped strategy (`name@version`): auto-ignore resumes for it.
    Reset {
        strategy: String,
        /// Why it is safe to resume (journaled with the reset).
        #[arg(long)]
        reason: String,
    },
}

pub(super) async fn run(cli: &Cli, command: &StrategiesCommand) -> anyhow::Result<()> {
    match command {
        StrategiesCommand::List { json } => list(cli, *json).await,
        StrategiesCommand::Migrate { strategy } => migrate(cli, strategy).await,
        StrategiesCommand::Retire { strategy, dry_run } => retire(cli, strategy, *dry_run).await,
    }
}

async fn list(cli: &Cli, json: bool) -> anyhow::Result<()> {
    let definitions = definitions(cli)?;
    let db = open_read_model(cli).await?;
    let lines = strategy_list::list(
        &db,
        &definitions.catalog,
        &definitions.engine,
        chrono::Utc::now(),
    )
    .await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&lines)?);
        return Ok(());
    }
    let day = |at: Option<chrono::DateTime<chrono::Utc>>| {
        at.map_or("-".to_owned(), |at| at.format("%Y-%m-%d %H:%M").to_string())
    };
    println!(
        "{:<36} {:<8} {:>10} {:<16} {:<16} {:>10} {:>9} {:>6}  breaker",
        "strategy",
        "state",
        "deliveries",
        "first used",
        "last used",
        "keys alive",
        "effects",
        "cases"
    );
    for l in lines {
        let state = if l.retired {
            "retired"
        } else if l.current {
            "current"
        } else {
            "older"
        };
        println!(
            "{:<36} {:<8} {:>10} {:<16} {:<16} {:>10} {:>9} {:>6}  {}",
            l.strategy,
            state,
            l.deliveries,
            day(l.first_used),
            day(l.last_used),
            l.keys_alive,
            l.effects,
            l.open_cases,
            l.breaker
        );
        println!("{:<36} fingerprint {}", "", l.fingerprint);
    }
    Ok(())
}

async fn retire(cli: &Cli, strategy: &str, dry_run: bool) -> anyhow::Result<()> {
    let settings = settings(cli)?;
    // A dry run writes nothing, schema migrations included: it reads the
    // database as it is, and is refused on another schema than this
    // binary's, as every read is.
    let db = if dry_run {
        open_for_reading(cli).await?
    } else {
        open_database(cli).await?
    };
    // It derives keys: with the secret the database's keys are sealed with.
    refuse_another_key_secret(&db, &settings.key_secret, false).await?;
    let plan = strategies::plan(
        &db,
        &settings.catalog,
        &settings.sources,
        &settings.key_secret,
        strategy,
    )
    .await?;
    let migrated = plan.keys.iter().filter(|k| k.to_key.is_some()).count();
    println!(
        "{strategy} → {}: {} effect key(s), {migrated} re-derived from their bodies, {} left for reconciliation",
        plan.to,
        plan.keys.len(),
        plan.keys.len() - migrated
    );
    for key in &plan.keys {
        match (&key.to_key, &key.reason) {
            (Some(to), _) => println!("  {} → {to}", key.from_key),
            (None, reason) => println!(
                "  {} stays, for reconciliation ({})",
                key.from_key,
                reason.as_deref().unwrap_or("no current key")
            ),
        }
    }
    if dry_run {
        if plan.unsettled > 0 {
            println!(
                "{} reservation(s) not settled yet: retiring is refused until they are",
                plan.unsettled
            );
        }
        println!("dry run: nothing written");
        return Ok(());
    }
    let done = strategies::apply(&db, plan).await?;
    println!(
        "{strategy}: {} keys migrated, {} left for reconciliation; now set `retired = true` on it in the configuration, and restart",
        done.migrated, done.unmigrated
    );
    Ok(())
}

async fn migrate(cli: &Cli, strategy: &str) -> anyhow::Result<()> {
    let settings = settings(cli)?;
    let db = open_database(cli).await?;
    refuse_another_key_secret(&db, &settings.key_secret, false).await?;
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
    Ok(())
}

pub(super) async fn reset(cli: &Cli, command: &BreakerCommand) -> anyhow::Result<()> {
    let BreakerCommand::Reset { strategy, reason } = command;
    if reason.trim().is_empty() {
        anyhow::bail!("a breaker reset needs a reason (--reason)");
    }
    let db = open_database(cli).await?;
    if breakers::reset(&db, strategy, "cli".to_owned(), reason.clone()).await? {
        println!("breaker of {strategy} reset");
        return Ok(());
    }
    // Not tripped: say so of a version that exists; a mistyped one is an
    // error, not a reset that found nothing to do.
    let recorded = crate::store::strategy_versions::all(&db).await?;
    let known = definitions(cli)?
        .catalog
        .strategies()
        .any(|s| format!("{}@{}", s.name, s.version) == *strategy)
        || recorded
            .iter()
            .any(|r| format!("{}@{}", r.name, r.version) == *strategy);
    if !known {
        anyhow::bail!(
            "no strategy version {strategy:?} is configured or recorded: a breaker is reset by its name@version, as `unicity strategies list` shows it"
        );
    }
    println!("{strategy} was not tripped");
    Ok(())
}
