//! Starts Unicity in-process, on its own thread with an actix System (as
//! `#[actix_web::main]` does in production), bound to port 0, with two
//! sources: a Standard Webhooks "norefid" refund provider and Stripe, both on
//! the built-in presets (strategies, hierarchies) and default engine settings.

use std::sync::mpsc;

use anyhow::{Context, anyhow};
use unicity::config::{KEY_SECRET_ENV, Settings, Source};
use unicity::startup::Application;

use crate::payloads::Provider;

pub const NOREFID_SLUG: &str = "bench-norefid";
pub const STRIPE_SLUG: &str = "bench-stripe";
const NOREFID_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const STRIPE_SECRET: &str = "whsec_bench_stripe_secret";
const KEY_SECRET: &str = "unicity-bench-key-secret-0123456789abcdef";

const SOURCES: &str = r#"
[[sources]]
slug = "bench-norefid"
tenant = "bench"
provider = "norefid"
environment = "test"
secrets_env = "BENCH_NOREFID_SECRET"
signature = { scheme = "standard_webhooks" }

[[sources]]
slug = "bench-stripe"
tenant = "bench"
provider = "stripe"
environment = "test"
secrets_env = "BENCH_STRIPE_SECRET"
signature = { scheme = "stripe" }
"#;

/// Secrets come from here, never from the real environment.
fn env(name: &str) -> Option<String> {
    match name {
        "BENCH_NOREFID_SECRET" => Some(NOREFID_SECRET.to_owned()),
        "BENCH_STRIPE_SECRET" => Some(STRIPE_SECRET.to_owned()),
        KEY_SECRET_ENV => Some(KEY_SECRET.to_owned()),
        _ => None,
    }
}

/// The server's settings on `database_url`.
pub fn settings(database_url: &str) -> anyhow::Result<Settings> {
    Settings::from_toml(
        SOURCES,
        "127.0.0.1:0".to_owned(),
        database_url.to_owned(),
        env,
        false,
    )
}

/// The benchmark's sources, secrets resolved.
pub fn sources() -> anyhow::Result<Vec<Source>> {
    Ok(settings("")?.sources)
}

/// The source a provider's events are posted to, and its signing secret.
pub fn source_for(provider: Provider) -> (&'static str, &'static str) {
    match provider {
        Provider::Norefid => (NOREFID_SLUG, NOREFID_SECRET),
        Provider::Stripe => (STRIPE_SLUG, STRIPE_SECRET),
    }
}

/// Builds and runs the application on a dedicated thread; returns its base URL
/// once it listens. The server lives until the process exits.
pub fn start(database_url: &str, postgres_writers: Option<usize>) -> anyhow::Result<String> {
    let mut settings = settings(database_url)?;
    if let Some(writers) = postgres_writers {
        settings.engine.postgres_writers = writers;
    }
    let (ready, listening) = mpsc::channel::<Result<u16, String>>();
    std::thread::Builder::new()
        .name("unicity-server".to_owned())
        .spawn(move || {
            actix_web::rt::System::new().block_on(async move {
                match Application::build(settings).await {
                    Ok(app) => {
                        let _ = ready.send(Ok(app.port()));
                        if let Err(error) = app.run_until_stopped().await {
                            note!("unicity-bench: server stopped: {error}");
                        }
                    }
                    Err(error) => {
                        let _ = ready.send(Err(format!("{error:#}")));
                    }
                }
            });
        })
        .context("cannot spawn the server thread")?;
    let port = listening
        .recv()
        .context("the server thread ended before listening")?
        .map_err(|e| anyhow!("Unicity did not start: {e}"))?;
    Ok(format!("http://127.0.0.1:{port}"))
}
