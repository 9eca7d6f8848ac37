//! The decision engine's shared state, and `WriteEvent`, the writer job that
//! records one event. Every event reaches the journal through `store::Tx`
//! (a writer job's, or `store::transaction`'s outside the writer).

use std::collections::HashSet;
use std::marker::PhantomData;
use std::sync::{Arc, RwLock};

use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;
use sea_orm::{DatabaseConnection, DbErr};

use crate::config::EngineConfig;
use crate::domain::delivery::DeliveryId;
use crate::domain::identity::{Catalog, KeySecret};
use crate::domain::journal::{JournalEvent, KeySummary};
use crate::domain::plan::Route;
use crate::metrics::Metrics;
use crate::providers::lookup::{Breakers, Lookup};
use crate::providers::sinks::SinkConfig;
use crate::services::rejections::{self, Rejections};
use crate::store;
use crate::store::Tx;
use crate::store::writer::{BatchRecording, PHASES, WriteJob, Writer};

/// Everything deciding and applying effects needs; shared by every request.
pub struct Engine {
    pub db: DatabaseConnection,
    pub catalog: Catalog,
    pub key_secret: KeySecret,
    pub sinks: Vec<SinkConfig>,
    /// The provider's API, asked before a person (see `services::lookups`).
    pub lookups: Vec<Lookup>,
    /// One circuit breaker per provider for those look-ups.
    pub lookup_breakers: Breakers,
    /// Turns to call a sink (`downstream_concurrency` at once).
    pub effect_calls: tokio::sync::Semaphore,
    pub config: EngineConfig,
    pub http: reqwest::Client,
    /// Where write transactions run (group commit on SQLite).
    pub writer: Writer,
    /// Strategies tripped by their collision breaker (`name@version`).
    pub tripped: RwLock<HashSet<String>>,
    /// When the breakers last looked for a trip's stragglers on a read
    /// model that held the whole journal (`services::breakers`).
    pub stragglers_read_at: std::sync::Mutex<Option<chrono::DateTime<chrono::Utc>>>,
    /// Request rate limits and the counts of refused requests.
    pub rejections: Rejections,
    /// What this engine counts and times, for `/metrics`.
    pub metrics: Metrics,
    /// Applies the journal to the deliveries read model after the commit.
    pub projector: crate::store::projector::Progress,
    /// Whether a key may stand for an effect a migration carried from an
    /// older version's key (`Route::migrations_possible`): keys were
    /// migrated, as recorded when the engine opened, or the catalog holds
    /// several versions of a strategy, so that they may be (a migration
    /// needs both, and may carry an effect to another strategy's key).
    pub migrations_possible: bool,
}

pub type SharedEngine = Arc<Engine>;

/// The client of every call out (sinks, status look-ups, provider look-ups).
/// It never follows a redirect: a POST redirected with 301/302/303 would
/// come back as a body-less GET whose 200 read as an effect applied, and a
/// 307/308 would send the whole event to another host. A redirect is an
/// answer of its own (`sinks::classify`).
fn client() -> anyhow::Result<reqwest::Client> {
    crate::tls::install();
    Ok(reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?)
}

impl Engine {
    /// Connects to and migrates the database, checks and records strategy
    /// versions, and starts the writer: everything deciding needs, without
    /// the background tasks or the HTTP server (`startup` adds those).
    pub async fn open(
        database_url: &str,
        catalog: Catalog,
        key_secret: KeySecret,
        sinks: Vec<SinkConfig>,
        lookups: Vec<Lookup>,
        config: EngineConfig,
    ) -> anyhow::Result<SharedEngine> {
        let parts = (catalog, key_secret, sinks, lookups, config);
        Self::open_recording(database_url, parts, true).await
    }

    /// `open` for a host command that decides no delivery (`reconcile`,
    /// `simulate`): strategy versions are recorded by servers only, so a
    /// draft in an engineer's file never becomes the definition a version
    /// number stands for.
    pub async fn open_for_a_command(
        database_url: &str,
        catalog: Catalog,
        key_secret: KeySecret,
        sinks: Vec<SinkConfig>,
        lookups: Vec<Lookup>,
        config: EngineConfig,
    ) -> anyhow::Result<SharedEngine> {
        let parts = (catalog, key_secret, sinks, lookups, config);
        Self::open_recording(database_url, parts, false).await
    }

    async fn open_recording(
        database_url: &str,
        (catalog, key_secret, sinks, lookups, config): (
            Catalog,
            KeySecret,
            Vec<SinkConfig>,
            Vec<Lookup>,
            EngineConfig,
        ),
        record: bool,
    ) -> anyhow::Result<SharedEngine> {
        let db = store::connect_with(database_url, config.durability).await?;
        store::migrate(&db).await?;
        refuse_another_key_secret(&db, &key_secret, record).await?;
        if record {
            let withdrawn = super::access::withdraw_untrusted(&db).await?;
            if !withdrawn.is_empty() {
                tracing::warn!(
                    tokens = ?withdrawn.tokens,
                    links = withdrawn.links,
                    "withdrew what issuers no longer trusted had issued"
                );
            }
            let added = super::strategies::check_and_record(&db, &catalog).await?;
            if added > 0 {
                tracing::info!(added, "new strategy versions recorded");
            }
        }
        let migrations_possible = catalog.strategies().any(|s| {
            s.retired
                || catalog
                    .current(&s.name)
                    .is_some_and(|c| c.version != s.version)
        }) || !store::projections::migrations::migrated_strategies(&db)
            .await?
            .is_empty();
        let metrics = Metrics::new();
        let writer = if config.group_commit.unwrap_or(true) {
            let count = match store::backend(&db) {
                sea_orm::DbBackend::Postgres => config.postgres_writers.max(1),
                _ => 1,
            };
            Writer::start_on_threads(
                database_url,
                count,
                BatchRecording {
                    size: metrics.batch_sizes(),
                    phases: PHASES.map(|phase| metrics.batch_phase(phase)),
                },
                config.durability,
            )
            .await?
        } else {
            Writer::direct(database_url, config.durability).await?
        };
        Ok(Arc::new(Self {
            rejections: Rejections::new(&config),
            writer,
            db,
            catalog,
            key_secret,
            sinks,
            lookups,
            effect_calls: tokio::sync::Semaphore::new(config.downstream_concurrency.max(1)),
            lookup_breakers: Breakers::new(
                config.lookup_breaker_failures,
                std::time::Duration::from_secs(config.lookup_breaker_secs),
            ),
            config,
            http: client()?,
            tripped: Default::default(),
            stragglers_read_at: Default::default(),
            metrics,
            projector: Default::default(),
            migrations_possible,
        }))
    }

    pub fn lease(&self) -> chrono::Duration {
        chrono::Duration::seconds(i64::try_from(self.config.lease_secs).unwrap_or(i64::MAX / 1000))
    }

    pub fn is_tripped(&self, strategy: &str) -> bool {
        self.tripped.read().is_ok_and(|set| set.contains(strategy))
    }

    /// What an event keyed by `key` at `source` is planned with beside
    /// what exists for the key (`Tx::decide_key` reads that): the sink its
    /// effect goes to, whether the provider's API can settle it before a
    /// person, whether its strategy's breaker is tripped, and the lease a
    /// new effect gets.
    pub fn route(&self, source: &str, key: &KeySummary) -> Route {
        Route {
            sink: crate::providers::sinks::select(&self.sinks, source, &key.effect_type).name(),
            // A held delivery's case is put to the provider's API at once.
            lookup_available: self.lookup_for(key).is_some(),
            breaker_tripped: self.is_tripped(&key.strategy),
            tripped_older: key
                .older_keys
                .iter()
                .filter_map(|k| k.split_once(':').map(|(strategy, _)| strategy))
                .filter(|strategy| *strategy != key.strategy && self.is_tripped(strategy))
                .map(str::to_owned)
                .collect(),
            lease: self.lease(),
            migrations_possible: self.migrations_possible,
        }
    }

    /// What a delivery keyed by `key` with body `event` is recognised by
    /// as the webhook of an operation a person made by hand: its resource,
    /// amount and currency as its provider's listing reads them, sealed
    /// (`domain::reconcile::hand_made_seal`). Only for effect types a
    /// listing compares: no other can be found missing.
    pub fn held_as(&self, key: &KeySummary, event: &serde_json::Value) -> Option<String> {
        let (provider, lookup) = self.lookup_for(key)?;
        lookup.listing.as_ref()?;
        let (resource, amount, currency) = lookup.effect_fields.read(event);
        crate::domain::reconcile::hand_made_seal(
            &self.key_secret,
            &provider,
            (resource.as_deref(), amount.as_ref(), currency.as_ref()),
        )
    }

    pub fn set_tripped(&self, strategies: HashSet<String>) {
        if let Ok(mut set) = self.tripped.write() {
            *set = strategies;
        }
    }

    /// The provider of the strategy that keyed `key`, while it is in the
    /// catalog.
    pub fn provider_of(&self, key: &KeySummary) -> Option<String> {
        let (name, version) = key.strategy.split_once('@')?;
        Some(
            self.catalog
                .strategy(name, version.parse().ok()?)?
                .provider
                .clone(),
        )
    }

    /// The look-up configured for the provider of the strategy that keyed
    /// `key` and for its effect type, with that provider's name: whether the
    /// provider's API can be asked before a person.
    pub fn lookup_for(&self, key: &KeySummary) -> Option<(String, &Lookup)> {
        let provider = self.provider_of(key)?;
        let found = crate::providers::lookup::find(&self.lookups, &provider, &key.effect_type)?;
        Some((provider, found))
    }
}

/// Refuses a database whose keys were sealed under another key secret: the
/// same deliveries would derive other keys, with no version to say so, and
/// a retry of an applied refund would find nothing and be refunded again.
/// With `record` (a server), the first to open a database records its
/// secret's check; a command only compares with the one recorded, so that
/// one run with another configuration never locks the servers out.
pub async fn refuse_another_key_secret(
    db: &sea_orm::DatabaseConnection,
    key_secret: &KeySecret,
    record: bool,
) -> anyhow::Result<()> {
    let ours = key_secret.check();
    let recorded = match record {
        true => Some(store::key_secret::record_or_read(db, &ours).await?),
        false => store::key_secret::recorded(db).await?,
    };
    if recorded.is_some_and(|recorded| recorded != ours) {
        anyhow::bail!(
            "{} is not the secret this database's keys were sealed with: with another \
             secret the same deliveries derive other keys and a retry of an applied effect \
             would run it again; start with the secret the database was first opened with",
            crate::config::KEY_SECRET_ENV
        );
    }
    Ok(())
}

impl rejections::Holder for Engine {
    fn rejections(&self) -> &Rejections {
        &self.rejections
    }

    fn writer(&self) -> &Writer {
        &self.writer
    }
}

/// A writer job that writes one event through its projections, of one of
/// two kinds fixed by its type: a record (`WriteEvent::record`) always
/// takes; a claim (`WriteEvent::claim`: a settlement, an expiry, a breaker
/// trip…) takes only if exactly one row took it, is journaled only then, and
/// says whether it took.
pub struct WriteEvent<Kind> {
    delivery_id: Option<DeliveryId>,
    event: JournalEvent,
    /// `None`: the time it is written.
    at: Option<DateTime<Utc>>,
    kind: PhantomData<Kind>,
}

/// A `WriteEvent` that always takes.
pub struct Record;

/// A `WriteEvent` that takes only if exactly one row took its claim.
pub struct IfClaimed;

impl WriteEvent<Record> {
    pub fn record(delivery_id: Option<DeliveryId>, event: JournalEvent) -> Self {
        WriteEvent::new(delivery_id, event)
    }
}

impl WriteEvent<IfClaimed> {
    pub fn claim(delivery_id: Option<DeliveryId>, event: JournalEvent) -> Self {
        WriteEvent::new(delivery_id, event)
    }
}

impl<Kind> WriteEvent<Kind> {
    fn new(delivery_id: Option<DeliveryId>, event: JournalEvent) -> Self {
        Self {
            delivery_id,
            event,
            at: None,
            kind: PhantomData,
        }
    }

    /// Recorded as of `at` instead of the time it is written.
    pub fn at(self, at: DateTime<Utc>) -> Self {
        Self {
            at: Some(at),
            ..self
        }
    }
}

impl WriteJob for WriteEvent<Record> {
    type Output = ();

    fn run<'a>(self, tx: &'a mut Tx<'_>) -> BoxFuture<'a, Result<(), DbErr>> {
        Box::pin(async move {
            let at = self.at.unwrap_or_else(Utc::now);
            tx.record(self.delivery_id, self.event, at).await
        })
    }
}

impl WriteJob for WriteEvent<IfClaimed> {
    type Output = bool;

    fn run<'a>(self, tx: &'a mut Tx<'_>) -> BoxFuture<'a, Result<bool, DbErr>> {
        Box::pin(async move {
            let at = self.at.unwrap_or_else(Utc::now);
            tx.claim(self.delivery_id, &self.event, at).await
        })
    }
}
