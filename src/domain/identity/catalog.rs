//! The catalog: built-in presets (compiled in from `presets/*.toml`) plus the
//! user's additions from the config file, checked once at start-up.
//!
//! Rules kept here: a `name@version` is defined once; a provider is defined
//! once; a user hierarchy for the same (provider, event-type pattern) as a
//! preset replaces it; every hierarchy names strategies that exist for its
//! provider. The current version of a strategy is its highest non-retired one.

use super::field::FieldRef;
use super::provider::ProviderDef;
use super::resource::ResourcePaths;
use super::strategy::{Kind, StrategyDef, StrategyRef};
use super::{pattern, presets};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What the config file may add: top-level `[[providers]]`, `[[strategies]]`,
/// `[[hierarchies]]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CatalogConfig {
    pub providers: Vec<ProviderDef>,
    pub strategies: Vec<StrategyDef>,
    pub hierarchies: Vec<HierarchyDef>,
}

/// For one provider and event-type pattern, the strategies tried in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HierarchyDef {
    pub provider: String,
    pub event_type: String,
    pub strategies: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogError {
    #[error("preset {file} does not parse: {reason}")]
    Preset { file: String, reason: String },
    #[error("strategy {0} is defined twice")]
    DuplicateStrategy(StrategyRef),
    #[error("provider {0} is defined twice")]
    DuplicateProvider(String),
    #[error("{0}")]
    Invalid(String),
}

/// The checked set of providers, strategies and hierarchies.
#[derive(Debug, Clone)]
pub struct Catalog {
    pub(super) providers: BTreeMap<String, ProviderDef>,
    pub(super) strategies: BTreeMap<(String, u32), StrategyDef>,
    pub(super) hierarchies: Vec<HierarchyDef>,
}

impl Catalog {
    /// Built-in presets plus `user`.
    pub fn build(user: CatalogConfig) -> Result<Catalog, CatalogError> {
        let mut parts = built_in()?;
        parts.push(user);
        Self::from_parts(parts)
    }

    /// Only what is given, no presets (tests and tools).
    pub fn from_parts(parts: Vec<CatalogConfig>) -> Result<Catalog, CatalogError> {
        let mut providers = BTreeMap::new();
        let mut strategies = BTreeMap::new();
        let mut hierarchies: Vec<HierarchyDef> = Vec::new();
        for part in parts {
            for p in part.providers {
                p.validate().map_err(CatalogError::Invalid)?;
                if providers.contains_key(&p.name) {
                    return Err(CatalogError::DuplicateProvider(p.name));
                }
                providers.insert(p.name.clone(), p);
            }
            for s in part.strategies {
                s.validate().map_err(CatalogError::Invalid)?;
                let id = (s.name.clone(), s.version);
                if strategies.contains_key(&id) {
                    return Err(CatalogError::DuplicateStrategy(s.strategy_ref()));
                }
                strategies.insert(id, s);
            }
            for h in part.hierarchies {
                hierarchies.retain(|o| !(o.provider == h.provider && o.event_type == h.event_type));
                hierarchies.push(h);
            }
        }
        let catalog = Catalog {
            providers,
            strategies,
            hierarchies,
        };
        catalog.check_references()?;
        Ok(catalog)
    }

    /// The items of a batch are keyed one by one, each from its own body: a
    /// strategy of a provider whose deliveries may be batches reads no
    /// header and hashes no raw body, which are the whole delivery's and
    /// every item's alike (two items would share one key, and an item sent
    /// again in another batch would get another). What breaks that rule,
    /// among the versions not retired: the server refuses to start on it
    /// (`services::strategies::check_and_record`), while the commands still
    /// run, so that its keys can be migrated to a version that keeps it.
    pub fn batch_conflicts(&self) -> Vec<String> {
        let batched = |s: &&StrategyDef| {
            !s.retired
                && self
                    .providers
                    .get(&s.provider)
                    .is_some_and(|p| p.items.is_some())
        };
        let mut conflicts = Vec::new();
        for s in self.strategies.values().filter(batched) {
            let header = s
                .fields
                .iter()
                .chain(&s.discriminants)
                .map(|f| &f.path)
                .chain(s.scope.iter().filter_map(|i| i.path.as_ref()))
                .find(|path| path.is_header());
            let why = match (s.kind, header) {
                (Kind::RawHash, _) => "hashes the raw body".to_owned(),
                (_, Some(path)) => format!("reads {path}"),
                _ => continue,
            };
            conflicts.push(format!(
                "strategy {}: provider {} delivers batches, whose items are keyed each from \
                 its own body, but the strategy {why}, which is the whole delivery's",
                s.strategy_ref(),
                s.provider
            ));
        }
        conflicts
    }

    fn check_references(&self) -> Result<(), CatalogError> {
        let invalid = |m: String| Err(CatalogError::Invalid(m));
        for s in self.strategies.values() {
            if !self.providers.contains_key(&s.provider) {
                return invalid(format!(
                    "strategy {}: unknown provider {}",
                    s.strategy_ref(),
                    s.provider
                ));
            }
        }
        for h in &self.hierarchies {
            if !self.providers.contains_key(&h.provider) {
                return invalid(format!(
                    "hierarchy {}/{}: unknown provider",
                    h.provider, h.event_type
                ));
            }
            if h.strategies.is_empty() {
                return invalid(format!(
                    "hierarchy {}/{}: no strategies",
                    h.provider, h.event_type
                ));
            }
            for name in &h.strategies {
                match self.current(name) {
                    Some(s) if s.provider == h.provider => {}
                    Some(s) => {
                        return invalid(format!(
                            "hierarchy {}/{}: strategy {name} belongs to {}",
                            h.provider, h.event_type, s.provider
                        ));
                    }
                    None => {
                        return invalid(format!(
                            "hierarchy {}/{}: no current version of strategy {name}",
                            h.provider, h.event_type
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Names of the providers known.
    pub fn providers(&self) -> Vec<&str> {
        self.providers.keys().map(String::as_str).collect()
    }

    pub fn provider(&self, name: &str) -> Option<&ProviderDef> {
        self.providers.get(name)
    }

    /// Every body path a strategy of `provider` declares sensitive, any
    /// version: a value sensitive to one strategy is sensitive everywhere.
    pub fn sensitive_paths(&self, provider: &str) -> Vec<&FieldRef> {
        let mut paths: Vec<&FieldRef> = Vec::new();
        for strategy in self.strategies().filter(|s| s.provider == provider) {
            for path in &strategy.sensitive {
                if !paths.iter().any(|p| p.as_str() == path.as_str()) {
                    paths.push(path);
                }
            }
        }
        paths
    }

    /// The paths at which a stored body of `provider` holds sensitive
    /// values: `sensitive_paths`, which are written against one event, and,
    /// for a provider whose deliveries may be batches, each of them under
    /// every item (`$.events[*]` then `.metadata.email`). A view or an
    /// export of a whole delivery masks these.
    pub fn sensitive_in_body(&self, provider: &str) -> Vec<FieldRef> {
        let paths = self.sensitive_paths(provider);
        let items = self.provider(provider).and_then(|p| p.items.as_ref());
        // A singular items path may select the array of events itself
        // (`$.events`) or one event: both are masked under.
        let under_items = items.into_iter().flat_map(|items| {
            let each = if items.is_singular() { "[*]" } else { "" };
            paths.iter().flat_map(move |path| {
                let rest = path.as_str().strip_prefix('$').unwrap_or_default();
                [
                    format!("{}{each}{rest}", items.as_str()),
                    format!("{}{rest}", items.as_str()),
                ]
                .into_iter()
                .filter_map(|text| FieldRef::parse(&text).ok())
            })
        });
        let mut all: Vec<FieldRef> = under_items.collect();
        all.splice(0..0, paths.iter().map(|p| (*p).clone()));
        all
    }

    /// The headers a delivery of `provider` is keyed by: its transport id,
    /// event type and header aliases, and every header a strategy of it
    /// reads. Replays (fixtures, shadow) key again from the journaled
    /// headers, so these are journaled as they came whatever their names say
    /// (`HeaderMask::keeping`); their values enter the key's material in
    /// clear anyway (only body paths may be declared sensitive).
    pub fn keyed_headers(&self, provider: &str) -> Vec<String> {
        let mut read: Vec<&FieldRef> = Vec::new();
        let mut names: Vec<String> = Vec::new();
        if let Some(def) = self.provider(provider) {
            read.extend(&def.transport);
            read.extend(
                def.event_type
                    .iter()
                    .flat_map(|rule| &rule.parts)
                    .map(|part| &part.field),
            );
            for (name, alias) in &def.header_aliases {
                names.push(name.to_ascii_lowercase());
                names.push(alias.to_ascii_lowercase());
            }
        }
        for strategy in self.strategies().filter(|s| s.provider == provider) {
            read.extend(strategy.fields.iter().map(|f| &f.path));
            read.extend(strategy.discriminants.iter().map(|f| &f.path));
            read.extend(strategy.scope.iter().filter_map(|s| s.path.as_ref()));
        }
        names.extend(
            read.iter()
                .filter_map(|f| f.header_name())
                .map(str::to_owned),
        );
        names.sort();
        names.dedup();
        names
    }

    /// Where a source of `provider` reads the resource it is searched by:
    /// `configured` (the source's own list), else the provider's, else the
    /// defaults; sensitive paths marked.
    pub fn resource_paths(&self, provider: &str, configured: Option<&[FieldRef]>) -> ResourcePaths {
        let of_provider = self.provider(provider).map(|p| p.resource.as_slice());
        let defaults = ResourcePaths::defaults();
        let paths = match (configured, of_provider) {
            (Some(paths), _) => paths,
            (None, Some(paths)) if !paths.is_empty() => paths,
            _ => defaults.as_slice(),
        };
        ResourcePaths::new(paths, &self.sensitive_paths(provider))
    }

    /// Every definition, retired ones included, ordered by name then version.
    pub fn strategies(&self) -> impl Iterator<Item = &StrategyDef> {
        self.strategies.values()
    }

    pub fn strategy(&self, name: &str, version: u32) -> Option<&StrategyDef> {
        self.strategies.get(&(name.to_owned(), version))
    }

    /// The definition that derived `key` (`name@version:…`), while the
    /// catalog still holds it.
    pub fn keyed(&self, key: &str) -> Option<&StrategyDef> {
        let (strategy, _) = key.split_once(':')?;
        let (name, version) = strategy.split_once('@')?;
        self.strategy(name, version.parse().ok()?)
    }

    /// Highest non-retired version of `name`.
    pub fn current(&self, name: &str) -> Option<&StrategyDef> {
        self.versions_of(name).filter(|s| !s.retired).last()
    }

    /// Non-retired versions of `name` older than the current one, newest first.
    pub fn older(&self, name: &str) -> Vec<&StrategyDef> {
        let Some(current) = self.current(name) else {
            return Vec::new();
        };
        let mut older: Vec<&StrategyDef> = self
            .versions_of(name)
            .filter(|s| !s.retired && s.version < current.version)
            .collect();
        older.reverse();
        older
    }

    /// Retired versions of `name` older than the current one, newest first:
    /// they key nothing, but a delivery is still keyed by them to find the
    /// effects their migration could not carry over (evidence purged).
    pub fn retired(&self, name: &str) -> Vec<&StrategyDef> {
        let Some(current) = self.current(name) else {
            return Vec::new();
        };
        let mut retired: Vec<&StrategyDef> = self
            .versions_of(name)
            .filter(|s| s.retired && s.version < current.version)
            .collect();
        retired.reverse();
        retired
    }

    fn versions_of<'a>(&'a self, name: &str) -> impl Iterator<Item = &'a StrategyDef> + 'a {
        let name = name.to_owned();
        self.strategies.values().filter(move |s| s.name == name)
    }

    /// The hierarchy for an event type: exact pattern first, then the most
    /// specific wildcard, then the first declared.
    pub fn hierarchy(&self, provider: &str, event_type: &str) -> Option<&HierarchyDef> {
        let mut best: Option<&HierarchyDef> = None;
        for h in self.hierarchies.iter().filter(|h| h.provider == provider) {
            if !pattern::matches(&h.event_type, event_type) {
                continue;
            }
            let better = best.is_none_or(|b| {
                pattern::specificity(&h.event_type) > pattern::specificity(&b.event_type)
            });
            if better {
                best = Some(h);
            }
        }
        best
    }
}

/// The built-in presets (`presets::PRESETS`), parsed.
fn built_in() -> Result<Vec<CatalogConfig>, CatalogError> {
    presets::PRESETS
        .iter()
        .map(|(file, text)| {
            toml::from_str(text).map_err(|e| CatalogError::Preset {
                file: (*file).to_owned(),
                reason: e.to_string(),
            })
        })
        .collect()
}
