//! Settings: sources come from one TOML file (or the built-in demo file),
//! secrets and the database from the environment. Secrets are typed
//! (`SecretString`) so they never reach a `Debug` print or a log line.
//! Each table of the file has its own module below; this one reads the file
//! and assembles `Settings`, refusing at start-up what could not run.

use std::collections::HashSet;
use std::path::Path;

use anyhow::{Context, bail};
use serde::Deserialize;

use crate::domain::identity::{
    Catalog, CatalogConfig, FieldRef, HierarchyDef, KeySecret, ProviderDef, StrategyDef,
};
use crate::providers::lookup::{Lookup, LookupFile};
use crate::providers::sinks::SinkConfig;

mod access;
mod engine;
mod proxies;
mod reconciliation;
mod sources;

pub use access::AccessConfig;
pub use engine::EngineConfig;
pub use proxies::{ProxyRange, TrustedProxies, canonical};
pub use reconciliation::ReconciliationConfig;
pub use sources::{Source, SourceFile, SourceMode};

/// The configuration used when no file is given: one demo source per scheme.
pub const DEMO_CONFIG: &str = include_str!("../demo.toml");

pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
pub const DEFAULT_DATABASE_URL: &str = "sqlite://unicity.db?mode=rwc";

/// The demo key secret, used only with the demo configuration.
const DEMO_KEY_SECRET: &str = "unicity-demo-key-secret-do-not-use-in-production";
/// Environment variable holding the secret that seals sensitive values in keys.
pub const KEY_SECRET_ENV: &str = "UNICITY_KEY_SECRET";

/// Everything the application needs to start.
#[derive(Debug, Clone)]
pub struct Settings {
    pub listen: String,
    /// Where `/metrics` is also served to anyone who can connect, alone
    /// (`--metrics-listen`); the main listener serves it to operators only.
    pub metrics_listen: Option<String>,
    /// The configuration's text, for what is decided again on scratch
    /// databases (`services::sandbox`): its strategies and engine settings.
    pub config_text: String,
    pub database_url: String,
    pub sources: Vec<Source>,
    pub catalog: Catalog,
    pub key_secret: KeySecret,
    pub sinks: Vec<SinkConfig>,
    pub engine: EngineConfig,
    pub access: AccessConfig,
    /// Authoritative look-ups per provider and effect type (`[[lookups]]`).
    pub lookups: Vec<Lookup>,
    pub reconciliation: ReconciliationConfig,
}

/// The key secret `env` holds; the published demo one when it holds none
/// and `demo` allows it.
pub fn key_secret(env: impl Fn(&str) -> Option<String>, demo: bool) -> anyhow::Result<KeySecret> {
    let key_secret = match (env(KEY_SECRET_ENV), demo) {
        (Some(secret), _) => secret,
        (None, true) => {
            tracing::warn!("{KEY_SECRET_ENV} is unset: keys use the published demo secret");
            DEMO_KEY_SECRET.to_owned()
        }
        (None, false) => {
            bail!("set {KEY_SECRET_ENV} (at least 16 bytes): it seals sensitive values in keys")
        }
    };
    KeySecret::from_bytes(key_secret.as_bytes())
        .map_err(|e| anyhow::anyhow!("{KEY_SECRET_ENV}: {e}"))
}

impl Settings {
    /// Builds settings from a configuration text; `env` supplies secrets.
    /// `demo` allows the published demo key secret when none is set.
    pub fn from_toml(
        text: &str,
        listen: String,
        database_url: String,
        env: impl Fn(&str) -> Option<String>,
        demo: bool,
    ) -> anyhow::Result<Self> {
        let file = FileConfig::parse(text)?;
        let catalog = file.catalog()?;
        let key_secret = key_secret(&env, demo)?;
        let mut sinks = file.sinks.clone();
        for sink in &mut sinks {
            crate::providers::status::check(&sink.kind)?;
            sink.kind.read_credential(&env)?;
        }
        let engine = file.engine.clone();
        engine.check()?;
        let reconciliation = file.reconciliation.clone();
        reconciliation.check()?;
        let access = file.access.clone();
        access.check()?;
        let lookups = file
            .lookups
            .iter()
            .map(|l| l.resolve(&env))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let configured: Vec<Option<Vec<FieldRef>>> =
            file.sources.iter().map(|s| s.resource.clone()).collect();
        let mut sources = file.resolve(env)?;
        for (source, configured) in sources.iter_mut().zip(configured) {
            if catalog.provider(&source.origin.provider).is_none() {
                bail!(
                    "source {:?}: unknown provider {:?} (known: {})",
                    source.slug(),
                    source.origin.provider,
                    catalog.providers().join(", ")
                );
            }
            source.resource =
                catalog.resource_paths(&source.origin.provider, configured.as_deref());
            let keyed = catalog.keyed_headers(&source.origin.provider);
            for header in keyed
                .iter()
                .filter(|h| source.header_mask.masked_by_pattern(h))
            {
                tracing::warn!(
                    source = source.slug(),
                    header = header.as_str(),
                    "a header this source's strategies key on is masked by a pattern: \
                     fixtures and shadow replays of its deliveries cannot key as it did"
                );
            }
            source.header_mask = source.header_mask.clone().keeping(&keyed);
        }
        // An observed source's effects, or those of its observed effect
        // types, are recorded in the ledger, never sent: their own sinks come
        // first, whatever else is configured.
        let observed = sources.iter().flat_map(|s| {
            s.observed_effect_types()
                .into_iter()
                .map(|effect_type| SinkConfig {
                    effect_type,
                    source: Some(s.slug().to_owned()),
                    kind: crate::providers::sinks::SinkKind::Record,
                })
        });
        sinks.splice(0..0, observed.collect::<Vec<_>>());
        Ok(Self {
            listen,
            metrics_listen: None,
            config_text: text.to_owned(),
            database_url,
            sources,
            catalog,
            key_secret,
            sinks,
            engine,
            access,
            lookups,
            reconciliation,
        })
    }
}

/// What commands that verify no signature and derive no key read of the
/// configuration (`unicity strategies list`, `corpus report`, `observe
/// report`, `fixtures export`): the strategy catalog, the engine's settings
/// and the sources as written. No secret is read, so none is required: an
/// engineer runs them without production's signing or key secrets. The
/// server, and every command that verifies or derives, builds `Settings`.
#[derive(Debug)]
pub struct Definitions {
    pub catalog: Catalog,
    pub engine: EngineConfig,
    pub sources: Vec<SourceFile>,
}

impl Definitions {
    pub fn from_toml(text: &str) -> anyhow::Result<Self> {
        let file = FileConfig::parse(text)?;
        Ok(Self {
            catalog: file.catalog()?,
            engine: file.engine,
            sources: file.sources,
        })
    }

    /// The source `slug` as written, if the configuration has it.
    pub fn source(&self, slug: &str) -> Option<&SourceFile> {
        self.sources.iter().find(|s| s.slug == slug)
    }
}

/// The TOML file as written by an operator.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    #[serde(default)]
    pub sources: Vec<SourceFile>,
    #[serde(default)]
    pub providers: Vec<ProviderDef>,
    #[serde(default)]
    pub strategies: Vec<StrategyDef>,
    #[serde(default)]
    pub hierarchies: Vec<HierarchyDef>,
    #[serde(default)]
    pub sinks: Vec<SinkConfig>,
    #[serde(default)]
    pub engine: EngineConfig,
    #[serde(default)]
    pub access: AccessConfig,
    #[serde(default)]
    pub lookups: Vec<LookupFile>,
    #[serde(default)]
    pub reconciliation: ReconciliationConfig,
}

impl FileConfig {
    /// The text of the file at `path`, or of the demo configuration.
    pub fn read(path: Option<&Path>) -> anyhow::Result<String> {
        match path {
            Some(path) => std::fs::read_to_string(path)
                .with_context(|| format!("cannot read configuration file {}", path.display())),
            None => Ok(DEMO_CONFIG.to_owned()),
        }
    }

    pub fn parse(text: &str) -> anyhow::Result<Self> {
        toml::from_str(text).context("invalid configuration")
    }

    /// The strategy catalog its providers, strategies and hierarchies make.
    pub fn catalog(&self) -> anyhow::Result<Catalog> {
        Catalog::build(CatalogConfig {
            providers: self.providers.clone(),
            strategies: self.strategies.clone(),
            hierarchies: self.hierarchies.clone(),
        })
        .context("invalid strategy catalog")
    }

    /// Resolves secrets through `env` and checks every source.
    pub fn resolve(self, env: impl Fn(&str) -> Option<String>) -> anyhow::Result<Vec<Source>> {
        let mut seen = HashSet::new();
        let mut sources = Vec::with_capacity(self.sources.len());
        for file in self.sources {
            if !seen.insert(file.slug.clone()) {
                bail!("source {:?} is declared twice", file.slug);
            }
            sources.push(file.resolve(&env)?);
        }
        Ok(sources)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn the_demo_configuration_builds_settings_with_every_source_on_a_known_provider() {
        let settings =
            Settings::from_toml(DEMO_CONFIG, "l".into(), "d".into(), no_env, true).unwrap();
        assert_eq!(settings.sources.len(), 5);
        assert_eq!(settings.engine.lease_secs, 30);
    }

    #[test]
    fn a_real_configuration_requires_the_key_secret() {
        let err =
            Settings::from_toml(DEMO_CONFIG, "l".into(), "d".into(), no_env, false).unwrap_err();
        assert!(err.to_string().contains(KEY_SECRET_ENV), "{err}");
    }

    #[test]
    fn definitions_need_no_secret_where_settings_need_them_all() {
        let text = "[[sources]]\nslug = \"x\"\nprovider = \"github\"\nsecrets_env = \"X_SECRET\"\nsignature = { scheme = \"github\" }\n";
        let strict = Settings::from_toml(text, "l".into(), "d".into(), no_env, false).unwrap_err();
        assert!(strict.to_string().contains(KEY_SECRET_ENV), "{strict}");
        let key_only = |name: &str| (name == KEY_SECRET_ENV).then(|| "k".repeat(32));
        let strict =
            Settings::from_toml(text, "l".into(), "d".into(), key_only, false).unwrap_err();
        assert!(strict.to_string().contains("X_SECRET"), "{strict}");
        let read = Definitions::from_toml(text).unwrap();
        assert!(read.source("x").is_some());
        assert!(read.catalog.strategies().count() > 0);
    }

    #[test]
    fn a_source_on_an_unknown_provider_is_refused() {
        let text = "[[sources]]\nslug = \"x\"\nprovider = \"nobody\"\nallow_unsigned = true\nsignature = { scheme = \"none\" }\n";
        let err = Settings::from_toml(text, "l".into(), "d".into(), no_env, true).unwrap_err();
        assert!(err.to_string().contains("unknown provider"), "{err}");
    }
}
