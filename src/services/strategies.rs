//! Strategy versions: recorded (and journaled) on first use; a definition that
//! changed without a version bump stops the server with what changed; a
//! version is retired only after the identities it keyed were migrated.

use std::collections::BTreeSet;

use anyhow::{Context, bail};
use chrono::Utc;
use sea_orm::DatabaseConnection;

use crate::config::Source;
use crate::domain::delivery::BodyParse;
use crate::domain::identity::{
    BusinessIdentity, Catalog, KeySecret, StrategyVersionRecord, check_versions,
};
use crate::domain::journal::{
    JournalEvent, KeyMigrated, StrategyMigrated, StrategyVersionRecorded,
};
use crate::store::entities::effect;
use crate::store::projections::migrations;
use crate::store::{
    bodies, journal, ledger, strategy_versions, transaction, transaction_owning_reservations,
};

/// Refuses to start on a changed-but-not-bumped strategy; records new versions.
pub async fn check_and_record(db: &DatabaseConnection, catalog: &Catalog) -> anyhow::Result<usize> {
    let recorded = strategy_versions::all(db).await?;
    let conflicts = check_versions(&recorded, catalog);
    if !conflicts.is_empty() {
        let lines: Vec<String> = conflicts.iter().map(ToString::to_string).collect();
        bail!(
            "refusing to start: {}. Give the changed strategy a new version; old keys are never reinterpreted.",
            lines.join("; ")
        );
    }
    let batched = catalog.batch_conflicts();
    if !batched.is_empty() {
        bail!(
            "refusing to start: {}. Key the items from their bodies: add a version of the \
             strategy that does, migrate the keys of this one (`unicity strategies migrate`) \
             and retire it.",
            batched.join("; ")
        );
    }
    refuse_unmigrated_retirements(db, catalog, &recorded).await?;
    refuse_forgotten_versions(db, catalog, &recorded).await?;
    let now = Utc::now();
    let added = transaction(db, async |tx| {
        let mut added = 0;
        for version in catalog.versions() {
            let known = recorded
                .iter()
                .any(|r| r.name == version.name && r.version == version.version);
            if known {
                continue;
            }
            if strategy_versions::insert(tx.connection(), &version, now).await? {
                let event = JournalEvent::StrategyVersionRecorded(StrategyVersionRecorded {
                    name: version.name,
                    version: version.version,
                    fingerprint: version.fingerprint,
                    definition: version.definition,
                });
                tx.record(None, event, now).await?;
                added += 1;
            }
        }
        Ok::<_, sea_orm::DbErr>(added)
    })
    .await?;
    Ok(added)
}

/// A version retired in the configuration that keyed deliveries in this
/// database must have had its keys migrated first (`migrate`): retiring it
/// otherwise would let a late retry of an effect it keyed find nothing.
async fn refuse_unmigrated_retirements(
    db: &DatabaseConnection,
    catalog: &Catalog,
    recorded: &[StrategyVersionRecord],
) -> anyhow::Result<()> {
    let migrated = migrations::migrated_strategies(db).await?;
    let pending: Vec<String> = catalog
        .strategies()
        .filter(|s| s.retired)
        .filter(|s| {
            recorded
                .iter()
                .any(|r| r.name == s.name && r.version == s.version)
        })
        .map(|s| s.strategy_ref().to_string())
        .filter(|strategy| !migrated.contains(strategy))
        .collect();
    if let Some(first) = pending.first() {
        bail!(
            "refusing to start: {} retired before the identities {} keyed were migrated. \
             Run `unicity strategies migrate {first}` (it re-derives them under the current \
             version from the retained bodies), then start again.",
            pending.join(", "),
            if pending.len() == 1 { "it" } else { "they" },
        );
    }
    Ok(())
}

/// Refuses to start without a version that keyed effects while another
/// version of its strategy is configured: its keys, the ones its effects
/// were migrated to and the ledger's record of them are searched only
/// while the configuration holds it (retired or not), so a late retry of
/// what it keyed would find nothing and be processed again. A version
/// edited in place under a new number, or a retired table deleted, is the
/// mistake this catches.
async fn refuse_forgotten_versions(
    db: &DatabaseConnection,
    catalog: &Catalog,
    recorded: &[StrategyVersionRecord],
) -> anyhow::Result<()> {
    let mut forgotten = Vec::new();
    // Of a strategy the configuration still has: a version edited in place
    // or a retired table deleted. (A strategy dropped whole is another
    // change, made on purpose, which other servers on one database with
    // other configurations also make.)
    let named = |name: &str| catalog.strategies().any(|s| s.name == name);
    for r in recorded
        .iter()
        .filter(|r| named(&r.name) && catalog.strategy(&r.name, r.version).is_none())
    {
        let strategy = format!("{}@{}", r.name, r.version);
        if ledger::any_keyed_by(db, &strategy).await? {
            forgotten.push(strategy);
        }
    }
    if let Some(first) = forgotten.first() {
        bail!(
            "refusing to start: {} keyed effects and {} no longer in the configuration, so a late \
             retry of what {} keyed would be processed again. Put its definition back as it was \
             recorded (`unicity strategies list` shows its fingerprint), with `retired = true` \
             once `unicity strategies retire {first}` has run.",
            forgotten.join(", "),
            if forgotten.len() == 1 { "is" } else { "are" },
            if forgotten.len() == 1 { "it" } else { "they" },
        );
    }
    Ok(())
}

/// Why a key could not be carried over to the current version.
const BODY_PURGED: &str = "body_purged";
const SOURCE_GONE: &str = "source_not_configured";
const NO_CURRENT_KEY: &str = "no_current_key";

/// What retiring a strategy version would do, read before anything is
/// written (`unicity strategies retire --dry-run` prints it).
#[derive(Debug, Clone)]
pub struct MigrationPlan {
    pub strategy: String,
    /// `name@version` the keys are re-derived under.
    pub to: String,
    /// Each effect's key, and what stands for it after.
    pub keys: Vec<KeyMigrated>,
    /// Reservations of the version not settled yet (reserved or unknown):
    /// while any is, the version is not retired.
    pub unsettled: u64,
}

/// Plans the migration of the identities `strategy` (`name@version`) keyed:
/// every effect in the ledger under one of its keys re-derived under the
/// current configuration from the body of the delivery that asked for it.
/// Reads only.
pub async fn plan(
    db: &DatabaseConnection,
    catalog: &Catalog,
    sources: &[Source],
    secret: &KeySecret,
    strategy: &str,
) -> anyhow::Result<MigrationPlan> {
    let (name, version) = strategy
        .split_once('@')
        .and_then(|(n, v)| Some((n, v.parse::<u32>().ok()?)))
        .with_context(|| format!("{strategy:?} is not name@version"))?;
    if catalog.strategy(name, version).is_none() {
        bail!("{strategy} is not in the configuration");
    }
    let Some(current) = catalog.current(name).filter(|c| c.version > version) else {
        bail!("{strategy} has no newer, non-retired version to migrate its keys to");
    };
    if migrations::migrated_strategies(db)
        .await?
        .contains(strategy)
    {
        bail!("{strategy} was already retired (its keys were migrated): nothing to do");
    }
    let keyed = crate::store::ledger::keyed_by(db, strategy).await?;
    let mut events = Vec::with_capacity(keyed.len());
    for effect in keyed {
        let (to_key, discriminants, reason) =
            match rederive(db, catalog, sources, secret, &effect).await? {
                Ok(business) => (Some(business.key.full()), business.discriminants, None),
                Err(reason) => (None, Default::default(), Some(reason.to_owned())),
            };
        events.push(KeyMigrated {
            strategy: strategy.to_owned(),
            from_key: effect.key.clone(),
            effect_id: effect.effect_id.parse().unwrap_or_default(),
            to_key,
            discriminants,
            reason,
        });
    }
    let unsettled = crate::store::strategy_usage::unsettled(db, strategy).await?;
    Ok(MigrationPlan {
        strategy: strategy.to_owned(),
        to: current.strategy_ref().to_string(),
        keys: events,
        unsettled: u64::try_from(unsettled).unwrap_or_default(),
    })
}

/// Migrates the identities `strategy` (`name@version`) keyed before it is
/// retired: `plan`, then `apply`.
pub async fn migrate(
    db: &DatabaseConnection,
    catalog: &Catalog,
    sources: &[Source],
    secret: &KeySecret,
    strategy: &str,
) -> anyhow::Result<StrategyMigrated> {
    apply(db, plan(db, catalog, sources, secret, strategy).await?).await
}

/// Writes `plan`: the newer key is recorded to stand for each effect. An
/// effect whose body is gone (or that no current strategy keys) keeps only
/// its old key: a late retry found through it goes to reconciliation.
/// One transaction, journaled (`KeyMigrated` per effect, then
/// `StrategyMigrated`), that owns every reservation while it runs
/// (`store::transaction_owning_reservations`) and judges there, not from the
/// plan, what refuses the retirement: a version already retired (two
/// engineers retiring it at once: the second is told, and journals
/// nothing), a reservation of the version not settled, or an effect the
/// version keyed since the plan was read.
pub async fn apply(
    db: &DatabaseConnection,
    plan: MigrationPlan,
) -> anyhow::Result<StrategyMigrated> {
    let MigrationPlan {
        strategy,
        to,
        keys: events,
        unsettled: _,
    } = plan;
    let migrated = events.iter().filter(|e| e.to_key.is_some()).count() as u64;
    let unmigrated = events.len() as u64 - migrated;
    let now = Utc::now();
    let done = StrategyMigrated {
        strategy: strategy.clone(),
        migrated,
        unmigrated,
    };
    let recorded = JournalEvent::StrategyMigrated(done.clone());
    let already = || {
        anyhow::anyhow!("{strategy} was already retired (its keys were migrated): nothing written")
    };
    transaction_owning_reservations(db, async |tx| {
        let conn = tx.connection();
        if migrations::migrated_strategies(conn)
            .await?
            .contains(&strategy)
        {
            return Err(already());
        }
        let unsettled = crate::store::strategy_usage::unsettled(conn, &strategy).await?;
        if unsettled > 0 {
            bail!(
                "{strategy} holds {unsettled} reservation(s) not settled yet (reserved, being applied, or outcome unknown): settle them before retiring it"
            );
        }
        let keyed: BTreeSet<String> = crate::store::ledger::keyed_by(conn, &strategy)
            .await?
            .into_iter()
            .map(|effect| effect.key)
            .collect();
        let planned: BTreeSet<String> = events.iter().map(|e| e.from_key.clone()).collect();
        if keyed != planned {
            bail!(
                "{strategy} keyed {} effect(s) when it was planned and {} now: plan its retirement again",
                planned.len(),
                keyed.len()
            );
        }
        for event in events {
            tx.record(None, JournalEvent::KeyMigrated(event), now)
                .await?;
        }
        // The row of the retirement is the last word: a retirement that
        // committed meanwhile has it, and this one is rolled back whole.
        if !tx.claim(None, &recorded, now).await? {
            return Err(already());
        }
        Ok(())
    })
    .await?;
    tracing::info!(strategy = %strategy, to = %to, migrated, unmigrated, "strategy keys migrated");
    Ok(done)
}

/// The current business identity of the body that asked for `effect`, or why
/// there is none.
async fn rederive(
    db: &DatabaseConnection,
    catalog: &Catalog,
    sources: &[Source],
    secret: &KeySecret,
    effect: &effect::Model,
) -> anyhow::Result<Result<BusinessIdentity, &'static str>> {
    let Ok(delivery) = effect.first_delivery_id.parse() else {
        return Ok(Err(BODY_PURGED));
    };
    let received = journal::for_delivery(db, delivery)
        .await?
        .into_iter()
        .find_map(|stored| match stored.event {
            JournalEvent::DeliveryReceived(received) => Some(received),
            _ => None,
        });
    let Some(received) = received else {
        return Ok(Err(BODY_PURGED));
    };
    let Some(raw) = bodies::get(db, &received.body.sha256).await? else {
        return Ok(Err(BODY_PURGED));
    };
    let Some(source) = sources.iter().find(|s| s.slug() == received.origin.source) else {
        return Ok(Err(SOURCE_GONE));
    };
    let (parse, document) = BodyParse::classify(&raw);
    let facts = source.facts(&received.headers, parse, document.as_ref(), &raw);
    // The current version keys it (`migrate` checked there is a newer one).
    Ok(catalog
        .derive(&facts, secret)
        .business
        .ok_or(NO_CURRENT_KEY))
}
