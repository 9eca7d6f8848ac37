//! The `unicity` binary run as child processes: a one-off command to its
//! end (`cli`, `finished`), or whole servers, several on one database,
//! killed and restarted (`Deployment`, `Server`). Every server is killed
//! when its guard drops; a failed test keeps the servers' logs and says where.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sea_orm::Database;
use serde_json::Value;
use unicity::config::{KEY_SECRET_ENV, Source};
use unicity::providers::signature;

use super::app::{self, Reply, STRIPE_SECRETS, TEST_KEY_SECRET, TEST_SOURCES, secret_of};
use super::probe::Probe;

/// The `unicity` binary set up as for a test server on `database_url`,
/// with the test sources plus `extra` TOML written to a file in `dir`.
pub fn cli(database_url: &str, extra: &str, dir: &Path) -> Command {
    let config = dir.join("unicity.toml");
    std::fs::write(&config, format!("{extra}\n{TEST_SOURCES}")).expect("configuration written");
    let mut command = Command::new(env!("CARGO_BIN_EXE_unicity"));
    command
        .env("UNICITY_CONFIG", &config)
        .env("DATABASE_URL", database_url)
        .env(KEY_SECRET_ENV, TEST_KEY_SECRET)
        .env("TEST_STRIPE_SECRETS", STRIPE_SECRETS.join(","))
        .env("RUST_LOG", "warn");
    command
}

/// Runs `command` to its end, which must be a success; returns what it printed.
pub async fn finished(command: Command) -> String {
    finished_saying(command).await.0
}

/// `finished`, with what the command said on standard error besides.
pub async fn finished_saying(mut command: Command) -> (String, String) {
    // The arguments only: the environment holds the test secrets.
    let shown = format!("{:?}", command.get_args().collect::<Vec<_>>());
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("join")
        .expect("the command runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "{shown} failed ({}): {stdout}{stderr}",
        output.status,
    );
    (stdout, stderr)
}

/// Runs `command` to its end, which must be a failure; returns what it said
/// on standard error.
pub async fn refused(mut command: Command) -> String {
    let shown = format!("{:?}", command.get_args().collect::<Vec<_>>());
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("join")
        .expect("the command runs");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        !output.status.success(),
        "{shown} succeeded: {}{stderr}",
        String::from_utf8_lossy(&output.stdout)
    );
    stderr
}

/// One fresh database and one configuration file, shared by a test's servers.
pub struct Deployment {
    pub database_url: String,
    config: PathBuf,
    sources: Vec<Source>,
    dir: Option<tempfile::TempDir>,
    _database_dir: Option<tempfile::TempDir>,
    /// Variables set for every process of this deployment.
    env: Vec<(String, PathBuf)>,
}

impl Deployment {
    /// The test sources plus `extra` TOML (engine, sinks), on a fresh database.
    pub async fn new(extra: &str) -> Self {
        let (database_url, database_dir) = app::fresh_database().await;
        let dir = tempfile::tempdir().expect("temp dir");
        let config = dir.path().join("unicity.toml");
        std::fs::write(&config, format!("{extra}\n{TEST_SOURCES}")).expect("configuration written");
        let sources = app::test_settings(&database_url, extra).sources;
        Self {
            database_url,
            config,
            sources,
            dir: Some(dir),
            _database_dir: database_dir,
            env: Vec::new(),
        }
    }

    /// This deployment with `name` set to `path` for its processes.
    pub fn with_env(mut self, name: &str, path: &Path) -> Self {
        self.env.push((name.to_owned(), path.to_owned()));
        self
    }

    fn dir(&self) -> &Path {
        self.dir.as_ref().expect("temp dir").path()
    }

    pub fn source(&self, slug: &str) -> &Source {
        self.sources
            .iter()
            .find(|s| s.slug() == slug)
            .expect("known test source")
    }

    /// The binary with this deployment's environment, and nothing inherited
    /// that could change what it does.
    fn command(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_unicity"));
        command
            .env("DATABASE_URL", &self.database_url)
            .env("UNICITY_CONFIG", &self.config)
            .env(KEY_SECRET_ENV, TEST_KEY_SECRET)
            .env("TEST_STRIPE_SECRETS", STRIPE_SECRETS.join(","))
            .env(
                "RUST_LOG",
                "info,sqlx=warn,sea_orm=warn,sea_orm_migration=warn",
            )
            .env_remove("UNICITY_LISTEN")
            .stdin(Stdio::null());
        command.envs(self.env.iter().map(|(name, path)| (name, path)));
        command
    }

    /// Starts `unicity serve` on a free port and waits until it is ready.
    pub async fn start(&self) -> Server {
        self.start_with(&[]).await
    }

    /// Starts `unicity serve` with `args` too, on a free port, and waits
    /// until it is ready. An argument `{free}` becomes the address of
    /// another free port, chosen again with the server's own on each attempt
    /// (a port taken meanwhile by another test is retried, not fatal), and
    /// kept in `Server::other_address`.
    pub async fn start_with(&self, args: &[&str]) -> Server {
        for attempt in 1..=3 {
            let port = free_port();
            let other = loop {
                let other = free_port();
                if other != port {
                    break format!("127.0.0.1:{other}");
                }
            };
            let args: Vec<&str> = args
                .iter()
                .map(|a| if *a == "{free}" { other.as_str() } else { a })
                .collect();
            let log = self.dir().join(format!("server-{port}.log"));
            let out = File::create(&log).expect("log file");
            let child = self
                .command()
                .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
                .args(&args)
                .stdout(out.try_clone().expect("log file"))
                .stderr(out)
                .spawn()
                .expect("the unicity binary starts");
            let mut server = Server {
                child,
                address: format!("http://127.0.0.1:{port}"),
                other_address: other,
                log,
                http: client(),
                database_url: self.database_url.clone(),
                reader: tokio::sync::OnceCell::new(),
            };
            if server.ready().await {
                return server;
            }
            // Another test may have taken the port between our probe and the bind.
            let text = server.log_text();
            assert!(
                attempt < 3 && text.contains("cannot listen"),
                "the server exited before being ready:\n{text}"
            );
        }
        unreachable!("three attempts either returned or failed")
    }

    /// Starts `unicity serve` with `name` set to `value`, which must refuse
    /// to start within 60 s; returns what it said.
    pub async fn refused_to_serve_with(&self, name: &str, value: &str) -> String {
        let log = self.dir().join("refused.log");
        let out = File::create(&log).expect("log file");
        let mut child = self
            .command()
            .env(name, value)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .stdout(out.try_clone().expect("log file"))
            .stderr(out)
            .spawn()
            .expect("the unicity binary starts");
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(status) = child.try_wait().expect("the child is waited for") {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "the server started: {}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let said = std::fs::read_to_string(&log).expect("log read");
        assert!(!status.success(), "the server ended well: {said}");
        said
    }

    /// Runs `unicity reconcile` over the hour around now; returns what it printed.
    pub async fn reconcile(&self) -> String {
        let now = chrono::Utc::now();
        let hour = chrono::Duration::hours(1);
        self.run(&[
            "reconcile",
            "--from",
            &(now - hour).to_rfc3339(),
            "--to",
            &(now + hour).to_rfc3339(),
        ])
        .await
    }

    /// Runs `unicity projections rebuild`; returns what it printed.
    pub async fn rebuild(&self) -> String {
        self.run(&["projections", "rebuild"]).await
    }

    /// Runs the binary with `args` to its end; returns what it printed.
    async fn run(&self, args: &[&str]) -> String {
        let mut command = self.command();
        command.args(args);
        finished(command).await
    }

    /// A connection of the test's own to the deployment's database.
    pub async fn probe(&self) -> Probe {
        let db = Database::connect(self.database_url.as_str())
            .await
            .expect("test connection");
        Probe::of(&db)
    }
}

impl Drop for Deployment {
    fn drop(&mut self) {
        if std::thread::panicking()
            && let Some(dir) = self.dir.take()
        {
            eprintln!("server logs kept in {}", dir.keep().display());
        }
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

/// An HTTP client that gives up after 15 s.
pub fn client() -> reqwest::Client {
    unicity::tls::install();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(15))
        .build()
        .expect("http client")
}

/// A running `unicity serve`; killed (SIGKILL) when dropped.
pub struct Server {
    child: Child,
    pub address: String,
    /// The address `{free}` stood for in the server's arguments.
    pub other_address: String,
    log: PathBuf,
    http: reqwest::Client,
    database_url: String,
    /// A support token for `/api` reads, issued on first use.
    reader: tokio::sync::OnceCell<String>,
}

impl Server {
    /// True once `/readyz` answers 200; false if the process exited first.
    async fn ready(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if self.child.try_wait().expect("child status").is_some() {
                return false;
            }
            let answer = self
                .http
                .get(format!("{}/readyz", self.address))
                .timeout(Duration::from_secs(1))
                .send()
                .await;
            if answer.is_ok_and(|r| r.status().is_success()) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("not ready after 20 s:\n{}", self.log_text());
    }

    pub async fn get_json(&self, path: &str) -> Value {
        let token = self
            .reader
            .get_or_init(|| async {
                let db = Database::connect(self.database_url.as_str())
                    .await
                    .expect("test connection");
                app::issue_token(&db, unicity::auth::Role::Support).await
            })
            .await;
        self.http
            .get(format!("{}{path}", self.address))
            .bearer_auth(token)
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .expect("read answered")
            .json()
            .await
            .expect("json")
    }

    /// SIGKILL, then reap.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// What the kernel says of the running process (`/proc/<pid>/status`).
    #[cfg(target_os = "linux")]
    pub fn kernel_status(&self) -> String {
        std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("the server's /proc status")
    }

    /// An owned handle for requests that outlive a borrow of the server.
    pub fn poster(&self) -> Poster {
        Poster {
            address: self.address.clone(),
            http: self.http.clone(),
        }
    }

    pub async fn send(&self, slug: &str, body: Vec<u8>, headers: Vec<(String, String)>) -> Reply {
        self.poster()
            .send(slug, body, headers)
            .await
            .expect("request answered")
    }

    /// Posts `body` signed with the source's current secret. Signs now: the
    /// future owns what it sends.
    pub fn post<'s>(
        &'s self,
        source: &Source,
        body: &[u8],
    ) -> impl Future<Output = Reply> + use<'s> {
        let (slug, headers, body) = (
            source.slug().to_owned(),
            signed(source, body),
            body.to_vec(),
        );
        async move { self.send(&slug, body, headers).await }
    }

    /// Posts `body` signed with `secret` under the message id `msg_id`.
    pub fn post_with<'s>(
        &'s self,
        source: &Source,
        msg_id: &str,
        secret: &str,
        body: &[u8],
    ) -> impl Future<Output = Reply> + use<'s> {
        let slug = source.slug().to_owned();
        let headers = signed_as(source, secret, msg_id, body);
        let body = body.to_vec();
        async move { self.send(&slug, body, headers).await }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A handle that posts to a server, owned (no borrow of it).
#[derive(Clone)]
pub struct Poster {
    address: String,
    http: reqwest::Client,
}

impl Poster {
    pub async fn send(
        &self,
        slug: &str,
        body: Vec<u8>,
        headers: Vec<(String, String)>,
    ) -> Result<Reply, reqwest::Error> {
        let mut request = self
            .http
            .post(format!("{}/hooks/{slug}", self.address))
            .header("content-type", "application/json")
            .body(body);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let response = request.send().await?;
        let status = response.status().as_u16();
        let text = response.text().await?;
        let json = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Ok(Reply { status, json })
    }
}

/// Signature headers with the source's current secret and a fresh message id.
pub fn signed(source: &Source, body: &[u8]) -> Vec<(String, String)> {
    let msg_id = format!("msg_{}", uuid::Uuid::new_v4().simple());
    signed_as(source, &secret_of(source), &msg_id, body)
}

/// Signature headers with `secret` under the message id `msg_id`, timestamped now.
pub fn signed_as(
    source: &Source,
    secret: &str,
    msg_id: &str,
    body: &[u8],
) -> Vec<(String, String)> {
    signature::sign(
        &source.scheme,
        secret,
        msg_id,
        chrono::Utc::now().timestamp(),
        body,
    )
    .expect("signable")
}
