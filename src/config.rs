//! Settings: sources come from one TOML file (or the built-in demo file),
//! secrets and the database from the environment. Secrets are typed
//! (`SecretString`) so they never reach a `Debug` print or a log line.

use std::collections::HashSet;
use std::path::Path;

use anyhow::{Context, bail};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use crate::domain::journal::Origin;
use crate::providers::signature::{self, SchemeConfig};

/// The configuration used when no file is given: one demo source per scheme.
pub const DEMO_CONFIG: &str = include_str!("demo.toml");

pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
pub const DEFAULT_DATABASE_URL: &str = "sqlite://unicity.db?mode=rwc";
const DEFAULT_TOLERANCE_SECS: u64 = 300;
const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;

/// Everything the application needs to start.
#[derive(Debug, Clone)]
pub struct Settings {
    pub listen: String,
    pub database_url: String,
    pub sources: Vec<Source>,
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
}

impl Source {
    pub fn slug(&self) -> &str {
        &self.origin.source
    }
}

/// The TOML file as written by an operator.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    #[serde(default)]
    pub sources: Vec<SourceFile>,
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
    /// Reads the file at `path`, or the demo configuration when there is none.
    pub fn load(path: Option<&Path>) -> anyhow::Result<Self> {
        let text = match path {
            Some(path) => std::fs::read_to_string(path)
                .with_context(|| format!("cannot read configuration file {}", path.display()))?,
            None => DEMO_CONFIG.to_owned(),
        };
        Self::parse(&text)
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
    fn secrets_never_appear_in_debug_output() {
        let sources = FileConfig::parse(DEMO_CONFIG)
            .unwrap()
            .resolve(no_env)
            .unwrap();
        let printed = format!("{sources:?}");
        assert!(!printed.contains("demo-github-secret"));
    }
}
