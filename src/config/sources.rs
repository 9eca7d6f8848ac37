//! `[[sources]]`: the places providers post to, as written (`SourceFile`)
//! and as resolved (`Source`), secrets read from the environment. A source
//! resolves only with a usable secret, unless it opts in to unsigned traffic;
//! secrets stay `SecretString`, so `Debug` never prints them.

use anyhow::bail;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use crate::domain::identity::{Catalog, DeliveryFacts, FieldRef, ResourcePaths};
use crate::domain::journal::Origin;
use crate::domain::masking::HeaderMask;
use crate::providers::signature::{self, SchemeConfig};

const DEFAULT_TOLERANCE_SECS: u64 = 300;
const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;

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
    /// Applying its effects, or only observing them (`SourceMode`).
    pub mode: SourceMode,
    /// Effect types (patterns, as `[[sinks]]` writes them) observed while
    /// the source's others are enforced; empty when `mode` says all.
    pub observe_effect_types: Vec<String>,
}

impl Source {
    pub fn slug(&self) -> &str {
        &self.origin.source
    }

    /// The effect types this source observes: every one (`*`) in observe
    /// mode, else those of `observe_effect_types`.
    pub fn observed_effect_types(&self) -> Vec<String> {
        observed(self.mode, &self.observe_effect_types)
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

/// Every effect type (`*`) in observe mode, else `listed`.
fn observed(mode: SourceMode, listed: &[String]) -> Vec<String> {
    match mode {
        SourceMode::Observe => vec!["*".to_owned()],
        SourceMode::Enforce => listed.to_vec(),
    }
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
    /// `observe`: decided and journaled as usual, but no effect is sent to a
    /// sink (a legacy handler still applies them); `enforce` (the default).
    #[serde(default)]
    pub mode: SourceMode,
    /// In `enforce` mode, effect types (patterns as in `[[sinks]]`,
    /// `refund.*`) observed all the same: recorded, never sent.
    #[serde(default)]
    pub observe_effect_types: Vec<String>,
}

/// Whether Unicity applies a source's effects or only observes them beside
/// a legacy handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceMode {
    #[default]
    Enforce,
    Observe,
}

impl SourceMode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Enforce => "enforce",
            Self::Observe => "observe",
        }
    }
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

impl SourceFile {
    /// The effect types this source observes, as written (see
    /// `Source::observed_effect_types`): no secret is needed to know them.
    pub fn observed_effect_types(&self) -> Vec<String> {
        observed(self.mode, &self.observe_effect_types)
    }

    /// The headers this source never stores or shows: its scheme's
    /// signature headers and its own `masked_headers` (no secret needed).
    pub fn header_mask(&self) -> anyhow::Result<HeaderMask> {
        let mut masked = signature::sensitive_headers(&self.signature);
        masked.extend(self.masked_headers.iter().cloned());
        HeaderMask::with(&masked).map_err(|e| anyhow::anyhow!("source {:?}: {e}", self.slug))
    }

    /// `header_mask`, keeping the headers `catalog`'s strategies for this
    /// source's provider key on (`HeaderMask::keeping`), as the server
    /// applies it.
    pub fn header_mask_in(&self, catalog: &Catalog) -> anyhow::Result<HeaderMask> {
        Ok(self
            .header_mask()?
            .keeping(&catalog.keyed_headers(&self.provider)))
    }

    pub(super) fn resolve(self, env: &impl Fn(&str) -> Option<String>) -> anyhow::Result<Source> {
        let header_mask = self.header_mask()?;
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
        if self.mode == SourceMode::Observe && !self.observe_effect_types.is_empty() {
            bail!(
                "source {slug:?}: observe_effect_types is for an enforced source; mode = \"observe\" already observes every effect type"
            );
        }
        if let Some(bad) = self
            .observe_effect_types
            .iter()
            .find(|p| p.trim().is_empty() || p.trim() != p.as_str())
        {
            bail!("source {slug:?}: observe_effect_types holds {bad:?}, not an effect type");
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
            header_mask,
            resource: ResourcePaths::default(),
            mode: self.mode,
            observe_effect_types: self.observe_effect_types,
        })
    }
}

/// The secrets of a rotation, current first: separated by commas or lines.
/// A space is part of a secret (GitHub's documented one has four): split
/// on spaces, each word would verify a signature on its own.
fn split_secrets(list: &str) -> Vec<SecretString> {
    list.split([',', '\n'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| SecretString::from(s.to_owned()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{DEMO_CONFIG, FileConfig};

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

    /// GitHub's documented secret has spaces: it is one secret, with which
    /// GitHub's published signature verifies, and none of its words is a
    /// key of its own that a forger could guess.
    #[test]
    fn a_secret_with_spaces_is_one_secret_and_commas_or_lines_separate_secrets() {
        use crate::providers::signature;
        let text = "[[sources]]\nslug = \"x\"\nprovider = \"github\"\nsecrets_env = \"GH\"\nsignature = { scheme = \"github\" }\n";
        let env = |name: &str| {
            (name == "GH").then(|| "It's a Secret to Everybody, older one\noldest".to_owned())
        };
        let sources = FileConfig::parse(text).unwrap().resolve(env).unwrap();
        let secrets: Vec<_> = sources[0]
            .secrets
            .iter()
            .map(|s| s.expose_secret().to_owned())
            .collect();
        assert_eq!(
            secrets,
            ["It's a Secret to Everybody", "older one", "oldest"]
        );

        let verify = |signature: &str| {
            let headers = [("x-hub-signature-256".to_owned(), signature.to_owned())];
            signature::verify(
                &sources[0].scheme,
                &sources[0].secrets,
                &headers,
                b"Hello, World!",
                0,
                300,
            )
        };
        let published = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        assert_eq!(verify(published).unwrap().secret_index, Some(0));
        for word in ["It's", "a", "Secret", "to", "Everybody"] {
            let forged = signature::sign(&sources[0].scheme, word, "", 0, b"Hello, World!");
            let forged = forged.unwrap();
            assert!(verify(&forged[0].1).is_err(), "keyed on {word:?}");
        }
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
    fn secrets_never_appear_in_debug_output() {
        let sources = FileConfig::parse(DEMO_CONFIG)
            .unwrap()
            .resolve(no_env)
            .unwrap();
        let printed = format!("{sources:?}");
        assert!(!printed.contains("demo-github-secret"));
    }
}
