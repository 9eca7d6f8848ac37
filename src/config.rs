//! Settings: sources come from one TOML file (or the built-in demo file),
//! secrets and the database from the environment. Secrets are typed
//! (`SecretString`) so they never reach a `Debug` print or a log line.

use std::collections::HashSet;
use std::path::Path;

use anyhow::{Context, bail};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use crate::domain::identity::{
    Catalog, CatalogConfig, DeliveryFacts, FieldRef, HierarchyDef, KeySecret, ProviderDef,
    ResourcePaths, StrategyDef,
};
use crate::domain::journal::Origin;
use crate::domain::masking::HeaderMask;
use crate::providers::lookup::{Lookup, LookupFile};
use crate::providers::signature::{self, SchemeConfig};
use crate::providers::sinks::SinkConfig;

mod proxies;
pub use proxies::{ProxyRange, TrustedProxies, canonical};

/// The configuration used when no file is given: one demo source per scheme.
pub const DEMO_CONFIG: &str = include_str!("demo.toml");

pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
pub const DEFAULT_DATABASE_URL: &str = "sqlite://unicity.db?mode=rwc";
const DEFAULT_TOLERANCE_SECS: u64 = 300;
const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;

/// The demo key secret, used only with the demo configuration.
const DEMO_KEY_SECRET: &str = "unicity-demo-key-secret-do-not-use-in-production";
/// Environment variable holding the secret that seals sensitive values in keys.
pub const KEY_SECRET_ENV: &str = "UNICITY_KEY_SECRET";

/// Everything the application needs to start.
#[derive(Debug, Clone)]
pub struct Settings {
    pub listen: String,
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
        let catalog = Catalog::build(CatalogConfig {
            providers: file.providers.clone(),
            strategies: file.strategies.clone(),
            hierarchies: file.hierarchies.clone(),
        })
        .context("invalid strategy catalog")?;
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
        let key_secret = KeySecret::from_bytes(key_secret.as_bytes())
            .map_err(|e| anyhow::anyhow!("{KEY_SECRET_ENV}: {e}"))?;
        let sinks = file.sinks.clone();
        for sink in &sinks {
            crate::providers::status::check(&sink.kind)?;
        }
        let engine = file.engine.clone();
        let reconciliation = file.reconciliation.clone();
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
        }
        Ok(Self {
            listen,
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

/// Periodic reconciliation against the providers' lists of operations (for
/// look-ups with a `list_url`): every `interval_secs`, the window of
/// `window_secs` that ended `delay_secs` ago, each side listed `slack_secs`
/// wider so that an operation near an edge still finds its effect.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReconciliationConfig {
    /// 0: no periodic run (`unicity reconcile` still runs one).
    pub interval_secs: u64,
    pub window_secs: u64,
    /// Deliveries still on their way (provider retries) are waited for.
    pub delay_secs: u64,
    pub slack_secs: u64,
}

impl Default for ReconciliationConfig {
    fn default() -> Self {
        Self {
            interval_secs: 3600,
            window_secs: 3600,
            delay_secs: 600,
            slack_secs: 300,
        }
    }
}

/// Operator access: where the back-office is reached, how long sessions
/// last, how fast sign-in attempts may come.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AccessConfig {
    /// The URL operators reach this server at (`https://...` makes the
    /// session cookie `Secure`). Default: `http://` and the listen address.
    pub public_url: Option<String>,
    /// A session idle this long ends.
    pub session_idle_secs: u64,
    /// A session ends this long after sign-in, however active.
    pub session_lifetime_secs: u64,
    /// Failed sign-ins one client address may make for one name before each
    /// further attempt from there waits (1 s, doubling with every failure, at
    /// most 15 minutes). Other addresses are not slowed down for that name.
    #[serde(alias = "login_per_account_per_minute")]
    pub login_failures_before_backoff: u32,
    /// Sign-in attempts allowed per client address per minute, whatever the names.
    pub login_per_address_per_minute: u32,
    /// Proxies whose `X-Forwarded-For` and `X-Forwarded-Host` are believed:
    /// addresses or CIDR ranges. Default empty: the peer address and the
    /// `Host` header are used as they are.
    pub trusted_proxies: TrustedProxies,
}

impl Default for AccessConfig {
    fn default() -> Self {
        Self {
            public_url: None,
            session_idle_secs: 30 * 60,
            session_lifetime_secs: 12 * 3600,
            login_failures_before_backoff: 5,
            login_per_address_per_minute: 20,
            trusted_proxies: TrustedProxies::default(),
        }
    }
}

impl AccessConfig {
    fn check(&self) -> anyhow::Result<()> {
        if let Some(url) = &self.public_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            bail!("[access] public_url {url:?} must start with http:// or https://");
        }
        if self.session_idle_secs == 0 || self.session_lifetime_secs == 0 {
            bail!("[access] session timeouts must be positive");
        }
        if self.login_failures_before_backoff == 0 || self.login_per_address_per_minute == 0 {
            bail!("[access] login limits must be positive");
        }
        Ok(())
    }
}

/// How the decision engine runs.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EngineConfig {
    /// How long a reservation's holder may take to settle its effect. A lease
    /// that runs out makes the outcome unknown: reconciled, never re-run.
    pub lease_secs: u64,
    /// How often leases and horizons are checked.
    pub sweep_interval_ms: u64,
    /// First pause before a failed look-up is tried again; it doubles with
    /// each failure (up to an hour), with up to a quarter of jitter.
    pub lookup_retry_secs: u64,
    /// Failed look-ups in a row after which a provider is not asked for
    /// `lookup_breaker_secs` (its circuit breaker opens).
    pub lookup_breaker_failures: u32,
    pub lookup_breaker_secs: u64,
    /// Commit concurrent deliveries together (one fsync for a burst, each still
    /// durable before its answer; on PostgreSQL batches lock each key they
    /// decide on, in every process alike). Default: on. Off: one transaction
    /// per delivery.
    pub group_commit: Option<bool>,
    /// Group-commit writers on PostgreSQL, each committing the deliveries of
    /// its own routing shards of keys, so that one batch's round trips and
    /// fsync overlap another's. SQLite has one writer at a time whatever this
    /// says.
    pub postgres_writers: usize,
    /// Share of a strategy's recent deliveries that may collide before its
    /// breaker trips (0.005 = 0.5 %).
    pub breaker_threshold: f64,
    /// Fewest recent deliveries before a rate is trusted.
    pub breaker_min_deliveries: i64,
    /// How far back "recent" goes.
    pub breaker_window_secs: u64,
    /// How often breakers are evaluated.
    pub breaker_check_ms: u64,
    /// Serve `GET /api/deliveries/{id}/raw`: the unmasked raw body, to
    /// engineers and admins, each read journaled with who read it. Off by default.
    pub raw_body_reads: bool,
    /// Rejections journaled one by one per source and window; beyond that they
    /// are counted, one `RejectionsAggregated` per source, reason and answer.
    pub rejections_journaled_per_window: u32,
    /// Length of that window (aggregates are journaled when it closes).
    pub rejection_window_secs: u64,
    /// Requests per second one client address may make, whatever they get
    /// (0: no limit). Loose: above one provider's pace and the benchmark's.
    pub client_requests_per_sec: u32,
    /// Refused requests per second one client address may cause before its
    /// refusals become 429 (0: no limit). Strict: a provider whose requests are
    /// refused has a configuration to fix, not a burst to absorb.
    pub client_rejections_per_sec: u32,
    /// Requests per second to one source from every client (0: no limit).
    pub source_requests_per_sec: u32,
    /// Refused requests per second to one source from every client before its
    /// refusals become 429 (0: no limit). Valid deliveries are not refused, so
    /// a flood of bad ones never makes this limit refuse them.
    pub source_rejections_per_sec: u32,
    /// The burst each rate allows, in seconds of that rate.
    pub rate_burst_secs: u32,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            lease_secs: 30,
            sweep_interval_ms: 1000,
            lookup_retry_secs: 30,
            lookup_breaker_failures: 5,
            lookup_breaker_secs: 60,
            group_commit: None,
            postgres_writers: 2,
            breaker_threshold: 0.005,
            breaker_min_deliveries: 200,
            breaker_window_secs: 3600,
            breaker_check_ms: 30_000,
            raw_body_reads: false,
            rejections_journaled_per_window: 60,
            rejection_window_secs: 60,
            client_requests_per_sec: 10_000,
            client_rejections_per_sec: 20,
            source_requests_per_sec: 10_000,
            source_rejections_per_sec: 200,
            rate_burst_secs: 2,
        }
    }
}

/// A place a provider posts to, with everything needed to check what arrives.
#[derive(Debug, Clone)]
pub struct Source {
    pub origin: Origin,
    pub scheme: SchemeConfig,
    /// Current secret first; older ones stay valid during a rotation.
    pub secrets: Vec<SecretString>,
    pub tolerance_secs: u64,
    pub max_body_bytes: usize,
    /// Headers whose values are never stored or shown: the defaults, the
    /// scheme's signature headers, and the source's own `masked_headers`.
    pub header_mask: HeaderMask,
    /// Where the resource a delivery is searched by is read (a payment id).
    pub resource: ResourcePaths,
}

impl Source {
    pub fn slug(&self) -> &str {
        &self.origin.source
    }

    /// The headers as they may be journaled and shown.
    pub fn mask_headers(&self, headers: &[(String, String)]) -> crate::domain::delivery::Headers {
        self.header_mask.apply(headers)
    }

    /// A delivery to this source as the identity engine sees it.
    pub fn facts<'a>(
        &'a self,
        headers: &'a [(String, String)],
        parse: crate::domain::delivery::BodyParse,
        body: Option<&'a serde_json::Value>,
        raw_body: &'a [u8],
    ) -> DeliveryFacts<'a> {
        DeliveryFacts {
            tenant: &self.origin.tenant,
            source: self.slug(),
            provider: &self.origin.provider,
            environment: &self.origin.environment,
            headers,
            parse,
            body,
            raw_body,
        }
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

/// One `[[sources]]` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceFile {
    pub slug: String,
    #[serde(default = "default_tenant")]
    pub tenant: String,
    pub provider: String,
    #[serde(default = "default_environment")]
    pub environment: String,
    pub signature: SchemeConfig,
    /// Environment variable holding the secrets, comma- or space-separated,
    /// current first.
    #[serde(default)]
    pub secrets_env: Option<String>,
    /// A published secret used only while `secrets_env` is unset (demos).
    #[serde(default)]
    pub demo_secret: Option<String>,
    #[serde(default = "default_tolerance")]
    pub tolerance_secs: u64,
    #[serde(default = "default_max_body")]
    pub max_body_bytes: usize,
    /// Required to accept `scheme = "none"`: unsigned traffic is an explicit choice.
    #[serde(default)]
    pub allow_unsigned: bool,
    /// Header names (case-insensitive, `*` a wildcard) whose values are never
    /// stored or shown, added to the default set (keys, tokens, signatures).
    #[serde(default)]
    pub masked_headers: Vec<String>,
    /// Where the resource a delivery is about (a payment id) is read, first
    /// present wins, replacing the provider's list: search finds deliveries
    /// by it. A path a strategy declares sensitive is stored hashed.
    #[serde(default)]
    pub resource: Option<Vec<FieldRef>>,
}

fn default_tenant() -> String {
    "default".to_owned()
}
fn default_environment() -> String {
    "live".to_owned()
}
fn default_tolerance() -> u64 {
    DEFAULT_TOLERANCE_SECS
}
fn default_max_body() -> usize {
    DEFAULT_MAX_BODY_BYTES
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

impl SourceFile {
    fn resolve(self, env: &impl Fn(&str) -> Option<String>) -> anyhow::Result<Source> {
        let slug = self.slug;
        if slug.is_empty()
            || !slug
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
        {
            bail!("source slug {slug:?} must be lower-case letters, digits, '-' or '_'");
        }
        let unsigned = self.signature == SchemeConfig::None;
        if unsigned && !self.allow_unsigned {
            bail!(
                "source {slug:?} uses scheme \"none\": set allow_unsigned = true to accept unsigned deliveries"
            );
        }
        let from_env = self.secrets_env.as_deref().and_then(env);
        let secrets: Vec<SecretString> = match (from_env, self.demo_secret) {
            (Some(list), _) => split_secrets(&list),
            (None, Some(demo)) => {
                tracing::warn!(
                    source = %slug,
                    variable = self.secrets_env.as_deref().unwrap_or("(none)"),
                    "source uses its published demo secret; set the variable to replace it"
                );
                vec![SecretString::from(demo)]
            }
            (None, None) => Vec::new(),
        };
        if secrets.is_empty() && !unsigned {
            match self.secrets_env {
                Some(var) => bail!("source {slug:?} has no secret: set {var}"),
                None => bail!("source {slug:?} has no secret: name a variable with secrets_env"),
            }
        }
        for secret in &secrets {
            signature::validate_secret(&self.signature, secret.expose_secret()).map_err(|e| {
                anyhow::anyhow!(
                    "source {slug:?}: a configured secret is not usable ({})",
                    e.code()
                )
            })?;
        }
        let mut masked = signature::sensitive_headers(&self.signature);
        masked.extend(self.masked_headers);
        let header_mask =
            HeaderMask::with(&masked).map_err(|e| anyhow::anyhow!("source {slug:?}: {e}"))?;
        Ok(Source {
            origin: Origin {
                source: slug,
                tenant: self.tenant,
                provider: self.provider,
                environment: self.environment,
            },
            scheme: self.signature,
            secrets,
            tolerance_secs: self.tolerance_secs,
            max_body_bytes: self.max_body_bytes,
            header_mask,
            resource: ResourcePaths::default(),
        })
    }
}

fn split_secrets(list: &str) -> Vec<SecretString> {
    list.split([',', ' ', '\n'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| SecretString::from(s.to_owned()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn demo_configuration_resolves_one_source_per_scheme() {
        let sources = FileConfig::parse(DEMO_CONFIG)
            .unwrap()
            .resolve(no_env)
            .unwrap();
        let slugs: Vec<_> = sources.iter().map(Source::slug).collect();
        assert_eq!(
            slugs,
            [
                "demo-standard",
                "demo-stripe",
                "demo-github",
                "demo-hmac",
                "demo-unsigned"
            ]
        );
    }

    #[test]
    fn secrets_from_the_environment_win_over_demo_secrets_and_keep_rotation_order() {
        let file = FileConfig::parse(DEMO_CONFIG).unwrap();
        let env =
            |name: &str| (name == "UNICITY_SECRETS_DEMO_GITHUB").then(|| "new, old".to_owned());
        let sources = file.resolve(env).unwrap();
        let github = sources.iter().find(|s| s.slug() == "demo-github").unwrap();
        let secrets: Vec<_> = github
            .secrets
            .iter()
            .map(|s| s.expose_secret().to_owned())
            .collect();
        assert_eq!(secrets, ["new", "old"]);
    }

    #[test]
    fn unsigned_sources_must_opt_in() {
        let text =
            "[[sources]]\nslug = \"x\"\nprovider = \"p\"\nsignature = { scheme = \"none\" }\n";
        let err = FileConfig::parse(text)
            .unwrap()
            .resolve(no_env)
            .unwrap_err();
        assert!(err.to_string().contains("allow_unsigned"), "{err}");
    }

    #[test]
    fn a_signed_source_without_secret_is_refused_naming_the_variable() {
        let text = "[[sources]]\nslug = \"x\"\nprovider = \"p\"\nsecrets_env = \"X_SECRET\"\nsignature = { scheme = \"github\" }\n";
        let err = FileConfig::parse(text)
            .unwrap()
            .resolve(no_env)
            .unwrap_err();
        assert!(err.to_string().contains("X_SECRET"), "{err}");
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
    fn a_source_on_an_unknown_provider_is_refused() {
        let text = "[[sources]]\nslug = \"x\"\nprovider = \"nobody\"\nallow_unsigned = true\nsignature = { scheme = \"none\" }\n";
        let err = Settings::from_toml(text, "l".into(), "d".into(), no_env, true).unwrap_err();
        assert!(err.to_string().contains("unknown provider"), "{err}");
    }

    #[test]
    fn a_source_masks_its_own_headers_on_top_of_the_defaults_and_its_scheme() {
        let text = "[[sources]]\nslug = \"x\"\nprovider = \"p\"\ndemo_secret = \"s\"\nmasked_headers = [\"X-Partner-Pin\", \"x-acme-*\"]\nsignature = { scheme = \"hmac\", header = \"x-sig\", encoding = \"hex\" }\n";
        let sources = FileConfig::parse(text).unwrap().resolve(no_env).unwrap();
        let mask = &sources[0].header_mask;
        for name in ["x-partner-pin", "x-acme-key", "x-sig", "x-api-key"] {
            assert!(mask.matches(name), "{name}");
        }
        assert!(!mask.matches("content-type"));
    }

    #[test]
    fn a_masked_header_that_is_no_header_name_is_refused() {
        let text = "[[sources]]\nslug = \"x\"\nprovider = \"p\"\nallow_unsigned = true\nmasked_headers = [\"x key\"]\nsignature = { scheme = \"none\" }\n";
        let err = FileConfig::parse(text)
            .unwrap()
            .resolve(no_env)
            .unwrap_err();
        assert!(err.to_string().contains("masked header"), "{err}");
    }

    #[test]
    fn raw_body_reads_are_off_unless_enabled() {
        assert!(!EngineConfig::default().raw_body_reads);
        let file = FileConfig::parse("[engine]\nraw_body_reads = true\n").unwrap();
        assert!(file.engine.raw_body_reads);
    }

    #[test]
    fn trusted_proxies_are_none_by_default_and_parsed_as_addresses_or_ranges() {
        assert!(AccessConfig::default().trusted_proxies.is_empty());
        let text = "[access]\ntrusted_proxies = [\"127.0.0.1\", \"10.0.0.0/8\"]\n";
        let access = FileConfig::parse(text).unwrap().access;
        assert!(access.trusted_proxies.trusts("10.2.3.4".parse().unwrap()));
        assert!(!access.trusted_proxies.trusts("192.0.2.1".parse().unwrap()));
        let wrong = FileConfig::parse("[access]\ntrusted_proxies = [\"proxy.local\"]\n");
        assert!(wrong.is_err());
        // Files written for the limit's former name still load.
        let old = FileConfig::parse("[access]\nlogin_per_account_per_minute = 3\n").unwrap();
        assert_eq!(old.access.login_failures_before_backoff, 3);
    }

    #[test]
    fn secrets_never_appear_in_debug_output() {
        let sources = FileConfig::parse(DEMO_CONFIG)
            .unwrap()
            .resolve(no_env)
            .unwrap();
        let printed = format!("{sources:?}");
        assert!(!printed.contains("demo-github-secret"));
    }
}
