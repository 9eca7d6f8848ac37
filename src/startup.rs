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
use crate::services::rejections;
use crate::services::{breakers, sweeper};
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
    engine: SharedEngine,
}

impl Application {
    /// Connects to and migrates the database, checks strategy versions, starts
    /// the sweeper, then binds `settings.listen`.
    pub async fn build(settings: Settings) -> anyhow::Result<Self> {
        let engine = Engine::open(
            &settings.database_url,
            settings.catalog,
            settings.key_secret,
            settings.sinks,
            settings.engine,
        )
        .await?;
        breakers::refresh(&engine).await?;
        store::spawn_checkpointer(&engine.db);
        sweeper::spawn(engine.clone());
        breakers::spawn(engine.clone());
        rejections::spawn(engine.clone());
        let listener = TcpListener::bind(&settings.listen)
            .with_context(|| format!("cannot listen on {}", settings.listen))?;
        let port = listener.local_addr()?.port();
        let sources = settings
            .sources
            .into_iter()
            .map(|s| (s.slug().to_owned(), Arc::new(s)))
            .collect();
        let state = web::Data::new(AppState {
            engine: engine.clone(),
            sources,
        });
        let server = HttpServer::new(move || {
            App::new()
                .wrap(TracingLogger::default())
                .app_data(state.clone())
                .service(routes::hooks::receive)
                .service(routes::deliveries::show)
                .service(routes::deliveries::raw)
                .service(routes::health::healthz)
                .service(routes::health::readyz)
        })
        .listen(listener)?
        .run();
        Ok(Self {
            port,
            server,
            engine,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Serves until stopped, then journals the rejection counts of the
    /// windows still open (best effort: the process is going away).
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        let served = self.server.await;
        rejections::flush(&self.engine, true).await;
        served
    }
}
