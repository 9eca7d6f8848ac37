//! A scratch engine for what is decided again rather than for real — a
//! fixture's replay, a shadow replay: the configuration's strategies,
//! hierarchies and engine settings, the sources it is given made unsigned,
//! no sink (effects recorded in its own ledger), no look-up, no
//! reconciliation, its own key secret, on a database of its own. Deliveries
//! go through the ingest service the webhook route calls.

use std::collections::HashMap;

use anyhow::Context;
use chrono::{DateTime, Utc};

use super::engine::{Engine, SharedEngine};
use super::ingest::{self, Accepted, Arrival, Refusal};
use crate::config::{KEY_SECRET_ENV, Settings, Source};
use crate::domain::delivery::{DeliveryId, Headers};
use crate::domain::fixture::Decided;
use crate::domain::journal::Origin;

/// The key secret a scratch engine seals sensitive values with: keys differ
/// from the real ones, their equalities do not.
const SANDBOX_KEY_SECRET: &str = "unicity-sandbox-key-secret-0123456789";

/// Tables of the configuration a sandbox leaves out.
const LEFT_OUT: [&str; 4] = ["sources", "sinks", "lookups", "reconciliation"];

/// The slugs of the sources `base` configures.
pub fn configured_sources(base: &str) -> anyhow::Result<Vec<String>> {
    let table: toml::Table = toml::from_str(base).context("the configuration")?;
    let sources = table.get("sources").and_then(toml::Value::as_array);
    Ok(sources
        .into_iter()
        .flatten()
        .filter_map(|source| source.get("slug")?.as_str().map(str::to_owned))
        .collect())
}

/// `base` without the tables a sandbox leaves out, with `candidate`'s
/// `[[strategies]]` and `[[hierarchies]]` added (anything else in it is
/// refused), and one unsigned source per origin.
pub fn configuration(
    base: &str,
    candidate: Option<&str>,
    origins: &[Origin],
) -> anyhow::Result<String> {
    let mut table: toml::Table = toml::from_str(base).context("the configuration")?;
    for name in LEFT_OUT {
        table.remove(name);
    }
    if let Some(candidate) = candidate {
        let added: toml::Table = toml::from_str(candidate).context("the candidate")?;
        for (name, value) in added {
            if !["strategies", "hierarchies"].contains(&name.as_str()) {
                anyhow::bail!(
                    "a candidate holds [[strategies]] and [[hierarchies]] only, not `{name}`"
                );
            }
            let toml::Value::Array(items) = value else {
                anyhow::bail!("the candidate's `{name}` is not a list of tables");
            };
            match table
                .entry(name)
                .or_insert_with(|| toml::Value::Array(Vec::new()))
            {
                toml::Value::Array(existing) => existing.extend(items),
                _ => anyhow::bail!("the configuration's tables are not lists"),
            }
        }
    }
    let mut sources: Vec<toml::Value> = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for origin in origins {
        if seen.contains(&origin.source.as_str()) {
            continue;
        }
        seen.push(&origin.source);
        let mut source = toml::Table::new();
        source.insert("slug".into(), origin.source.clone().into());
        source.insert("tenant".into(), origin.tenant.clone().into());
        source.insert("provider".into(), origin.provider.clone().into());
        source.insert("environment".into(), origin.environment.clone().into());
        source.insert("allow_unsigned".into(), true.into());
        let mut signature = toml::Table::new();
        signature.insert("scheme".into(), "none".into());
        source.insert("signature".into(), signature.into());
        sources.push(source.into());
    }
    table.insert("sources".into(), sources.into());
    Ok(toml::to_string(&table)?)
}

/// The settings of a sandbox configured by `text` on `database_url`: a
/// scratch database, whose commits are not synced to disk.
pub fn settings(text: &str, database_url: &str) -> anyhow::Result<Settings> {
    let mut settings = Settings::from_toml(
        text,
        "127.0.0.1:0".to_owned(),
        database_url.to_owned(),
        |name| (name == KEY_SECRET_ENV).then(|| SANDBOX_KEY_SECRET.to_owned()),
        false,
    )
    .context("the sandbox's configuration")?;
    settings.engine.durability = crate::store::Durability::Scratch;
    Ok(settings)
}

/// A scratch engine and its sources. Dropped, its writer and connections go.
pub struct Sandbox {
    pub engine: SharedEngine,
    sources: HashMap<String, Source>,
}

impl Sandbox {
    pub async fn open(settings: Settings) -> anyhow::Result<Self> {
        let sources = settings
            .sources
            .iter()
            .map(|s| (s.slug().to_owned(), s.clone()))
            .collect();
        let engine = Engine::open(
            &settings.database_url,
            settings.catalog,
            settings.key_secret,
            settings.sinks,
            settings.lookups,
            settings.engine,
        )
        .await?;
        Ok(Self { engine, sources })
    }

    /// Receives `body` on `source` as if it arrived at `received_at`.
    pub async fn receive(
        &self,
        source: &str,
        received_at: DateTime<Utc>,
        headers: &Headers,
        body: &[u8],
    ) -> anyhow::Result<Result<Accepted, Refusal>> {
        let source = self
            .sources
            .get(source)
            .with_context(|| format!("no source {source:?} in the sandbox"))?;
        let arrival = Arrival {
            delivery_id: DeliveryId::from_uuid(uuid::Uuid::now_v7()),
            received_at,
            headers,
            client: None,
        };
        Ok(ingest::receive(&self.engine, source, arrival, body).await)
    }
}

/// What a delivery came to, as compared: its decision and reason, or
/// `refused` and the refusal's code.
pub fn decided(received: &Result<Accepted, Refusal>) -> Decided {
    match received {
        Ok(accepted) => Decided {
            decision: accepted.decision.decision.action.as_str().to_owned(),
            reason: accepted.decision.decision.reason.as_str().to_owned(),
        },
        Err(refusal) => Decided {
            decision: "refused".to_owned(),
            reason: refusal.code().to_owned(),
        },
    }
}

/// What one event of a batch came to, as compared.
pub fn item_decided(item: &crate::services::items::Decided) -> Decided {
    Decided {
        decision: item.decision.decision.action.as_str().to_owned(),
        reason: item.decision.decision.reason.as_str().to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use sea_orm::{ConnectionTrait, DbBackend, Statement};

    use super::*;

    #[tokio::test]
    async fn a_sandbox_decides_on_a_scratch_database_that_is_not_synced() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let origin = Origin {
            source: "shop".into(),
            tenant: "t".into(),
            provider: "stripe".into(),
            environment: "test".into(),
        };
        let text = configuration("", None, &[origin]).expect("a configuration");
        let url = crate::store::test_url(&dir);
        let sandbox = Sandbox::open(settings(&text, &url).expect("settings"))
            .await
            .expect("the sandbox opens");
        let row = sandbox
            .engine
            .db
            .query_one_raw(Statement::from_string(
                DbBackend::Sqlite,
                "PRAGMA synchronous",
            ))
            .await
            .expect("the pragma reads")
            .expect("one row");
        let synchronous: i64 = row.try_get_by_index(0).expect("an integer");
        assert_eq!(synchronous, 0, "synchronous=OFF");
    }
}
