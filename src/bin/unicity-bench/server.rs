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

/// The server's configuration: its sources, the strategies built in.
pub const CONFIGURATION: &str = SOURCES;

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

/// The server's settings on `database_url`, with the `[engine]` table in
/// `UNICITY_BENCH_ENGINE` if set (to compare settings: the read model's pace,
/// its stretches).
pub fn settings(database_url: &str) -> anyhow::Result<Settings> {
    let engine = std::env::var("UNICITY_BENCH_ENGINE").unwrap_or_default();
    Settings::from_toml(
        &format!("{engine}\n{SOURCES}"),
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

/// How the parent passes the database URL to a server child (not on the
/// command line, where a password would show in `ps`).
const SERVER_URL_ENV: &str = "UNICITY_BENCH_SERVER_URL";

/// The other Unicity processes of a run, stopped when this is dropped.
pub struct Others {
    children: Vec<std::process::Child>,
    pub base_urls: Vec<String>,
}

impl Others {
    /// Starts `count` more servers on `database_url`, each a child process
    /// (this program, `--server-child`), and waits until each listens.
    pub fn start(
        database_url: &str,
        count: usize,
        postgres_writers: Option<usize>,
    ) -> anyhow::Result<Self> {
        use std::io::BufRead as _;
        use std::process::{Command, Stdio};
        let exe = std::env::current_exe().context("cannot find the benchmark's own executable")?;
        let mut others = Self {
            children: Vec::with_capacity(count),
            base_urls: Vec::with_capacity(count),
        };
        for _ in 0..count {
            let mut command = Command::new(&exe);
            command.arg("--server-child");
            if let Some(writers) = postgres_writers {
                command.args(["--postgres-writers", &writers.to_string()]);
            }
            let mut child = command
                .env(SERVER_URL_ENV, database_url)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .context("cannot start a server process")?;
            let stdout = child.stdout.take().context("no stdout")?;
            others.children.push(child);
            let mut line = String::new();
            std::io::BufReader::new(stdout)
                .read_line(&mut line)
                .context("the server process said nothing")?;
            let port: u16 = line
                .trim()
                .parse()
                .map_err(|_| anyhow!("the server process did not start: {line:?}"))?;
            others.base_urls.push(format!("http://127.0.0.1:{port}"));
        }
        Ok(others)
    }

    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(std::process::Child::id).collect()
    }
}

impl Drop for Others {
    fn drop(&mut self) {
        for child in &mut self.children {
            // Closing its stdin asks it to stop; killing makes sure.
            drop(child.stdin.take());
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The child side of `Others::start`: serves until its stdin closes.
pub fn child(postgres_writers: Option<usize>) -> anyhow::Result<()> {
    let url = std::env::var(SERVER_URL_ENV)
        .with_context(|| format!("{SERVER_URL_ENV} is not set (internal option)"))?;
    let base_url = start(&url, postgres_writers)?;
    let port = base_url.rsplit(':').next().unwrap_or_default();
    println!("{port}");
    std::io::Write::flush(&mut std::io::stdout()).context("cannot write to stdout")?;
    // Blocks until the parent closes the pipe (or exits).
    let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
    Ok(())
}
