//! Building the application: connect and migrate the database, bind the
//! listener (port 0 in tests), mount the routes behind the security headers,
//! the session middleware and the access guard; print the first-run setup
//! link while no enabled admin exists.

use std::net::TcpListener;
use std::sync::Arc;

use actix_session::SessionMiddleware;
use actix_session::config::{BrowserSession, TtlExtensionPolicy};
use actix_web::cookie::{Key, SameSite};
use actix_web::dev::Server;
use actix_web::middleware::{DefaultHeaders, from_fn};
use actix_web::{App, HttpServer, web};
use anyhow::Context;
use tracing_actix_web::TracingLogger;

use crate::auth::login_token::LoginTokens;
use crate::auth::sessions::DbSessionStore;
use crate::auth::throttle::LoginThrottle;
use crate::config::{AccessConfig, Settings};
use crate::domain::identity::KeySecret;
use crate::services::engine::{Engine, SharedEngine};
use crate::services::{access, breakers, observe, projector, reconcile, rejections, sweeper};
use crate::state::{AccessState, AppState};
use crate::telemetry::RequestSpan;
use crate::{routes, store};

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "unicity_session";

/// A bound, not yet running, server.
pub struct Application {
    port: u16,
    server: Server,
    /// `/metrics` alone, on `--metrics-listen`, with its port.
    metrics: Option<(u16, Server)>,
    engine: SharedEngine,
    setup_url: Option<String>,
}

/// Headers on every answer: no framing, no sniffing, no referrer, and a
/// policy that allows this origin's styles and forms only (no script).
fn security_headers() -> DefaultHeaders {
    DefaultHeaders::new()
        .add((
            "Content-Security-Policy",
            "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
        ))
        .add(("X-Frame-Options", "DENY"))
        .add(("Referrer-Policy", "no-referrer"))
        .add(("X-Content-Type-Options", "nosniff"))
}

/// The key signing session cookies, derived from the key secret so that
/// every process of a deployment reads the others' cookies. A cookie only
/// carries a random id; the session itself is in the database.
fn cookie_key(secret: &KeySecret) -> Key {
    let derived = secret.seal(&serde_json::Value::String(
        "unicity session cookie".to_owned(),
    ));
    Key::derive_from(derived.to_string().as_bytes())
}

/// The key signing the sign-in form's token, derived like the cookie key.
fn login_tokens(secret: &KeySecret) -> LoginTokens {
    let derived = secret.seal(&serde_json::Value::String(
        "unicity login form token".to_owned(),
    ));
    LoginTokens::new(derived.to_string().as_bytes())
}

fn seconds(secs: u64) -> actix_web::cookie::time::Duration {
    actix_web::cookie::time::Duration::seconds(i64::try_from(secs).unwrap_or(i64::MAX))
}

fn session_middleware(
    store: DbSessionStore,
    key: Key,
    config: &AccessConfig,
    secure: bool,
) -> SessionMiddleware<DbSessionStore> {
    SessionMiddleware::builder(store, key)
        .cookie_name(SESSION_COOKIE.to_owned())
        .cookie_http_only(true)
        .cookie_same_site(SameSite::Strict)
        .cookie_secure(secure)
        .session_lifecycle(
            BrowserSession::default()
                .state_ttl(seconds(config.session_idle_secs))
                .state_ttl_extension_policy(TtlExtensionPolicy::OnEveryRequest),
        )
        .build()
}

impl Application {
    /// Connects to and migrates the database, checks strategy versions, starts
    /// the sweeper, then binds `settings.listen`.
    pub async fn build(settings: Settings) -> anyhow::Result<Self> {
        let reconciliation = settings.reconciliation.clone();
        let engine = Engine::open(
            &settings.database_url,
            settings.catalog,
            settings.key_secret,
            settings.sinks,
            settings.lookups,
            settings.engine,
        )
        .await?;
        breakers::refresh(&engine).await?;
        let all: Vec<&crate::config::Source> = settings.sources.iter().collect();
        observe::record_modes(&engine, &all).await?;
        store::spawn_checkpointer(
            &engine.db,
            std::time::Duration::from_millis(engine.config.sqlite_checkpoint_ms.max(1)),
        );
        sweeper::spawn(engine.clone());
        projector::spawn(engine.clone());
        breakers::spawn(engine.clone());
        rejections::spawn(engine.clone());
        reconcile::spawn(engine.clone(), reconciliation);
        spawn_metrics_upkeep(&engine);
        let metrics = match &settings.metrics_listen {
            Some(address) => Some(metrics_server(address, &engine)?),
            None => None,
        };
        let listener = TcpListener::bind(&settings.listen)
            .with_context(|| format!("cannot listen on {}", settings.listen))?;
        let port = listener.local_addr()?.port();
        let sources = settings
            .sources
            .into_iter()
            .map(|s| (s.slug().to_owned(), Arc::new(s)))
            .collect();
        let config = settings.access;
        let public_url = config
            .public_url
            .clone()
            .unwrap_or_else(|| format!("http://{}", listener_address(&listener)))
            .trim_end_matches('/')
            .to_owned();
        let secure = public_url.starts_with("https://");
        let lifetime = chrono::Duration::seconds(
            i64::try_from(config.session_lifetime_secs).unwrap_or(i64::MAX / 1000),
        );
        let sessions = DbSessionStore::new(engine.db.clone(), lifetime);
        let key = cookie_key(&engine.key_secret);
        let setup_url = access::open_setup(&engine.db)
            .await?
            .map(|token| format!("{public_url}/setup/{token}"));
        if let Some(url) = &setup_url {
            // Printed once, not logged: it is a one-time credential.
            eprintln!(
                "\nNo administrator yet. Create the first one within the hour at:\n\n    {url}\n"
            );
        }
        let state = web::Data::new(AppState {
            engine: engine.clone(),
            config_text: settings.config_text.clone(),
            sources,
            access: AccessState {
                throttle: LoginThrottle::new(
                    config.login_failures_before_backoff,
                    config.login_per_address_per_minute,
                ),
                login_tokens: login_tokens(&engine.key_secret),
                trusted_proxies: config.trusted_proxies.clone(),
                public_url,
                secure,
            },
        });
        let server = HttpServer::new(move || {
            App::new()
                .wrap(from_fn(routes::access::guard))
                .wrap(session_middleware(
                    sessions.clone(),
                    key.clone(),
                    &config,
                    secure,
                ))
                .wrap(security_headers())
                .wrap(TracingLogger::<RequestSpan>::new())
                .app_data(state.clone())
                .configure(routes::configure)
        })
        .listen(listener)?
        .run();
        Ok(Self {
            port,
            server,
            metrics,
            engine,
            setup_url,
        })
    }

    /// The first-run setup link printed at start, while no enabled admin exists.
    pub fn setup_url(&self) -> Option<&str> {
        self.setup_url.as_deref()
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The port of the metrics listener, when there is one.
    pub fn metrics_port(&self) -> Option<u16> {
        self.metrics.as_ref().map(|(port, _)| *port)
    }

    /// Serves until stopped, then journals the rejection counts of the
    /// windows still open (best effort: the process is going away).
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        let served = match self.metrics {
            Some((_, metrics)) => {
                let (served, _) = futures_util::future::join(self.server, metrics).await;
                served
            }
            None => self.server.await,
        };
        rejections::flush(self.engine.as_ref(), true).await;
        served
    }
}

/// The listener of `--metrics-listen`: `/metrics` and nothing else, to
/// whoever can connect; every other path is the default 404.
fn metrics_server(address: &str, engine: &SharedEngine) -> anyhow::Result<(u16, Server)> {
    let listener = TcpListener::bind(address)
        .with_context(|| format!("cannot listen for metrics on {address}"))?;
    let port = listener.local_addr()?.port();
    let engine = web::Data::new(engine.clone());
    let server = HttpServer::new(move || {
        App::new()
            .wrap(TracingLogger::<RequestSpan>::new())
            .app_data(engine.clone())
            .service(routes::metrics::open_scrape)
    })
    .workers(1)
    .listen(listener)?
    .run();
    Ok((port, server))
}

/// Folds the histograms' samples every few seconds, scraped or not.
fn spawn_metrics_upkeep(engine: &SharedEngine) {
    let engine = std::sync::Arc::downgrade(engine);
    tokio::spawn(async move {
        let mut every = tokio::time::interval(std::time::Duration::from_secs(5));
        loop {
            every.tick().await;
            let Some(engine) = engine.upgrade() else {
                return;
            };
            engine.metrics.upkeep();
        }
    });
}

/// `host:port` of the bound listener, for the default public URL.
fn listener_address(listener: &TcpListener) -> String {
    listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| "127.0.0.1".to_owned())
}
