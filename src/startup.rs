//! Building the application: connect and migrate the database, bind the
//! listener (port 0 in tests), mount the routes.

use std::collections::HashMap;
use std::net::TcpListener;
use std::sync::Arc;

use actix_web::dev::Server;
use actix_web::{App, HttpServer, web};
use anyhow::Context;
use sea_orm::DatabaseConnection;
use tracing_actix_web::TracingLogger;

use crate::config::{Settings, Source};
use crate::services::engine::{Engine, SharedEngine};
use crate::services::{breakers, strategies, sweeper};
use crate::store::writer::Writer;
use crate::{routes, store};

/// What every request handler can reach.
pub struct AppState {
    pub engine: SharedEngine,
    pub sources: HashMap<String, Arc<Source>>,
}

impl AppState {
    pub fn db(&self) -> &DatabaseConnection {
        &self.engine.db
    }
}

/// A bound, not yet running, server.
pub struct Application {
    port: u16,
    server: Server,
}

impl Application {
    /// Connects to and migrates the database, checks strategy versions, starts
    /// the sweeper, then binds `settings.listen`.
    pub async fn build(settings: Settings) -> anyhow::Result<Self> {
        let db = store::connect(&settings.database_url).await?;
        store::migrate(&db).await?;
        let added = strategies::check_and_record(&db, &settings.catalog).await?;
        if added > 0 {
            tracing::info!(added, "new strategy versions recorded");
        }
        let grouped = settings.engine.group_commit.unwrap_or(true);
        let writer = if grouped {
            let count = match store::backend(&db) {
                sea_orm::DbBackend::Postgres => settings.engine.postgres_writers.max(1),
                _ => 1,
            };
            Writer::start_on_threads(&settings.database_url, count).await?
        } else {
            Writer::direct(&settings.database_url).await?
        };
        let engine = Arc::new(Engine {
            writer,
            db,
            catalog: settings.catalog,
            key_secret: settings.key_secret,
            sinks: settings.sinks,
            config: settings.engine,
            http: reqwest::Client::new(),
            tripped: Default::default(),
        });
        breakers::refresh(&engine).await?;
        store::spawn_checkpointer(&engine.db);
        sweeper::spawn(engine.clone());
        breakers::spawn(engine.clone());
        let listener = TcpListener::bind(&settings.listen)
            .with_context(|| format!("cannot listen on {}", settings.listen))?;
        let port = listener.local_addr()?.port();
        let sources = settings
            .sources
            .into_iter()
            .map(|s| (s.slug().to_owned(), Arc::new(s)))
            .collect();
        let state = web::Data::new(AppState { engine, sources });
        let server = HttpServer::new(move || {
            App::new()
                .wrap(TracingLogger::default())
                .app_data(state.clone())
                .service(routes::hooks::receive)
                .service(routes::deliveries::show)
                .service(routes::health::healthz)
                .service(routes::health::readyz)
        })
        .listen(listener)?
        .run();
        Ok(Self { port, server })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        self.server.await
    }
}
