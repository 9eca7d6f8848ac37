//! `spawn_app` and the `TestApp` driver shared by every integration test.

use std::sync::Arc;

use sea_orm::{ConnectionTrait, Database, DatabaseConnection, DbBackend};
use serde_json::Value;
use unicity::auth::Role;
use unicity::config::{Settings, Source};
use unicity::domain::journal::Actor;
use unicity::providers::signature;
use unicity::services::access;
use unicity::startup::Application;

/// Sources every test server has, one per signature scheme, with test secrets.
pub const TEST_SOURCES: &str = r#"
[[sources]]
slug = "std"
tenant = "acme"
provider = "standard-webhooks"
environment = "test"
demo_secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
signature = { scheme = "standard_webhooks" }

[[sources]]
slug = "stripe"
tenant = "acme"
provider = "stripe"
environment = "test"
secrets_env = "TEST_STRIPE_SECRETS"
signature = { scheme = "stripe" }

[[sources]]
slug = "github"
tenant = "acme"
provider = "github"
environment = "live"
demo_secret = "gh-test-secret"
signature = { scheme = "github" }

[[sources]]
slug = "hmac"
tenant = "acme"
provider = "norefid"
environment = "live"
demo_secret = "hmac-test-secret"
max_body_bytes = 1024
signature = { scheme = "hmac", header = "x-signature", encoding = "hex" }

[[sources]]
slug = "gocardless"
tenant = "acme"
provider = "gocardless"
environment = "live"
demo_secret = "gc-test-secret"
signature = { scheme = "hmac", header = "webhook-signature", encoding = "hex" }

[[sources]]
slug = "adyen"
tenant = "acme"
provider = "adyen"
environment = "test"
demo_secret = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
signature = { scheme = "adyen" }

[[sources]]
slug = "open"
tenant = "acme"
provider = "norefid"
environment = "test"
allow_unsigned = true
signature = { scheme = "none" }
"#;

/// The Stripe source has two secrets (a rotation in progress): current first.
pub const STRIPE_SECRETS: [&str; 2] = ["whsec_current_stripe", "whsec_previous_stripe"];

pub struct TestApp {
    pub address: String,
    pub database_url: String,
    pub db: DatabaseConnection,
    /// Sends an admin API token on every request (`/api` needs one).
    pub client: reqwest::Client,
    /// The first-run setup link the server printed, if any.
    pub setup_url: Option<String>,
    pub sources: Vec<Arc<Source>>,
    _dir: Option<tempfile::TempDir>,
}

/// A fresh database URL: a new SQLite file, or a new PostgreSQL database
/// created next to the one TEST_DATABASE_URL names.
pub async fn fresh_database() -> (String, Option<tempfile::TempDir>) {
    fresh_database_with("").await
}

/// The same, a PostgreSQL database created with `options` (a collation, a
/// template); SQLite's ignores them.
pub async fn fresh_database_with(options: &str) -> (String, Option<tempfile::TempDir>) {
    match std::env::var("TEST_DATABASE_URL") {
        Ok(base) if !base.is_empty() => {
            let admin = Database::connect(base.as_str())
                .await
                .expect("TEST_DATABASE_URL must reach PostgreSQL");
            let name = format!("unicity_test_{}", uuid::Uuid::new_v4().simple());
            admin
                .execute_unprepared(&format!("CREATE DATABASE {name} {options}"))
                .await
                .expect("create test database");
            let _ = admin.close().await;
            let cut = base
                .rfind('/')
                .expect("TEST_DATABASE_URL has a database name");
            (format!("{}/{name}", &base[..cut]), None)
        }
        _ => {
            let dir = tempfile::tempdir().expect("temp dir");
            let url = format!("sqlite://{}/unicity.db?mode=rwc", dir.path().display());
            (url, Some(dir))
        }
    }
}

/// Fresh databases as every test gets them (`fresh_database`), for the
/// library's fixture check: each removed once its replay is over, the
/// PostgreSQL ones dropped.
#[derive(Default)]
pub struct TestDatabases {
    made: Vec<(String, Option<tempfile::TempDir>)>,
}

impl unicity::services::fixtures::Scratch for TestDatabases {
    async fn create(&mut self) -> anyhow::Result<String> {
        let (url, dir) = fresh_database().await;
        self.made.push((url.clone(), dir));
        Ok(url)
    }

    async fn remove(&mut self, url: &str) -> anyhow::Result<()> {
        let Some(at) = self.made.iter().position(|(made, _)| made == url) else {
            return Ok(());
        };
        // A SQLite file goes with its directory.
        if self.made.swap_remove(at).1.is_none() {
            let (_, name) = url.rsplit_once('/').expect("a database name");
            let admin = Database::connect(std::env::var("TEST_DATABASE_URL")?).await?;
            admin
                .execute_unprepared(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                .await?;
            let _ = admin.close().await;
        }
        Ok(())
    }
}

/// The key secret every test server seals sensitive values with.
pub const TEST_KEY_SECRET: &str = "test-key-secret-0123456789abcdef";

/// The variable a test sink reads its downstream's credential from, and
/// the credential.
pub const DOWNSTREAM_CREDENTIAL_ENV: &str = "TEST_DOWNSTREAM_CREDENTIAL";
pub const DOWNSTREAM_CREDENTIAL: &str = "dsk_test_3f9a1c";

fn test_env(name: &str) -> Option<String> {
    match name {
        "TEST_STRIPE_SECRETS" => Some(STRIPE_SECRETS.join(",")),
        unicity::config::KEY_SECRET_ENV => Some(TEST_KEY_SECRET.to_owned()),
        DOWNSTREAM_CREDENTIAL_ENV => Some(DOWNSTREAM_CREDENTIAL.to_owned()),
        _ => None,
    }
}

/// The settings of a test server: the test sources plus `extra` TOML
/// (sinks, engine settings, strategies).
pub fn test_settings(database_url: &str, extra: &str) -> Settings {
    let text = format!("{extra}\n{TEST_SOURCES}");
    Settings::from_toml(
        &text,
        "127.0.0.1:0".to_owned(),
        database_url.to_owned(),
        test_env,
        false,
    )
    .expect("test configuration")
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with("").await
}

/// A test server whose configuration adds `extra` TOML to the test sources.
pub async fn spawn_app_with(extra: &str) -> TestApp {
    let (database_url, dir) = fresh_database().await;
    spawn_on(&database_url, extra, dir).await
}

/// A test server on an existing database (a restart, or a second process).
pub async fn spawn_on(database_url: &str, extra: &str, dir: Option<tempfile::TempDir>) -> TestApp {
    spawn_settings(test_settings(database_url, extra), dir).await
}

/// A server on a fresh database with the demo configuration, as
/// `unicity serve` runs it without a configuration file: the demo sources
/// on their published secrets, whatever the environment holds.
pub async fn spawn_demo() -> TestApp {
    let (database_url, dir) = fresh_database().await;
    let text = unicity::config::FileConfig::read(None).expect("the demo configuration");
    let settings = Settings::from_toml(
        &text,
        "127.0.0.1:0".to_owned(),
        database_url,
        |_| None,
        true,
    )
    .expect("demo settings");
    spawn_settings(settings, dir).await
}

/// A test server running `settings`, on the database they name.
pub async fn spawn_settings(settings: Settings, dir: Option<tempfile::TempDir>) -> TestApp {
    let database_url = settings.database_url.clone();
    let sources = settings.sources.clone();
    let app = Application::build(settings)
        .await
        .expect("application builds");
    let address = format!("http://127.0.0.1:{}", app.port());
    let setup_url = app.setup_url().map(str::to_owned);
    tokio::spawn(app.run_until_stopped());
    let db = Database::connect(database_url.as_str())
        .await
        .expect("test connection");
    let token = issue_token(&db, Role::Admin).await;
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::AUTHORIZATION,
        format!("Bearer {token}").parse().expect("header value"),
    );
    unicity::tls::install();
    let client = reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .expect("http client");
    TestApp {
        address,
        database_url,
        db,
        client,
        setup_url,
        sources: sources.into_iter().map(Arc::new).collect(),
        _dir: dir,
    }
}

/// A fresh API token of `role`, issued through the service layer.
pub async fn issue_token(db: &DatabaseConnection, role: Role) -> String {
    let name = format!("test-{role}-{}", uuid::Uuid::new_v4().simple());
    access::issue_token(db, &name, role, None, Actor::Cli)
        .await
        .expect("token issued")
}

/// A response reduced to what tests look at.
pub struct Reply {
    pub status: u16,
    pub json: Value,
}

impl TestApp {
    pub fn source(&self, slug: &str) -> &Source {
        self.sources
            .iter()
            .find(|s| s.slug() == slug)
            .expect("known test source")
    }

    pub fn is_postgres(&self) -> bool {
        self.db.get_database_backend() == DbBackend::Postgres
    }

    /// Posts `body` to `/hooks/{slug}` with the given headers, as is.
    pub async fn post_raw(
        &self,
        slug: &str,
        body: impl Into<Vec<u8>>,
        headers: &[(String, String)],
    ) -> Reply {
        let mut request = self
            .client
            .post(format!("{}/hooks/{slug}", self.address))
            .header("content-type", "application/json")
            .body(body.into());
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let response = request.send().await.expect("request sent");
        reply(response).await
    }

    /// Signs `body` with `secret` as the source's scheme would, then posts it.
    pub async fn post_signed_with(
        &self,
        slug: &str,
        secret: &str,
        msg_id: &str,
        timestamp: i64,
        body: &[u8],
    ) -> Reply {
        let scheme = &self.source(slug).scheme;
        let headers = signature::sign(scheme, secret, msg_id, timestamp, body).expect("signable");
        self.post_raw(slug, body.to_vec(), &headers).await
    }

    /// A refund of `payment`, then another refund reusing its reference for
    /// another amount: a key collision (`discriminants_differ`) for the
    /// reference strategy, which trips its breaker when it is sensitive.
    /// `applied`: the effects applied once the first refund is.
    pub async fn collide(&self, payment: &str, applied: i64) {
        use super::counts::Counts;
        let reference = format!("rr_{payment}");
        self.post_signed("hmac", &refund(payment, 100, Some(&reference)))
            .await;
        self.wait_applied(applied).await;
        let clash = self
            .post_signed("hmac", &refund(payment, 999, Some(&reference)))
            .await;
        assert_eq!(
            clash.json["reason"], "discriminants_differ",
            "{}",
            clash.json
        );
    }

    /// Signs `body` with the source's current secret, timestamped now.
    pub async fn post_signed(&self, slug: &str, body: &[u8]) -> Reply {
        let secret = secret_of(self.source(slug));
        let msg_id = format!("msg_{}", uuid::Uuid::new_v4().simple());
        self.post_signed_with(slug, &secret, &msg_id, chrono::Utc::now().timestamp(), body)
            .await
    }

    pub async fn get(&self, path: &str) -> Reply {
        let response = self
            .client
            .get(format!("{}{path}", self.address))
            .send()
            .await
            .expect("request sent");
        reply(response).await
    }

    /// The body of `GET path`, as text.
    pub async fn get_text(&self, path: &str) -> String {
        self.client
            .get(format!("{}{path}", self.address))
            .send()
            .await
            .expect("request sent")
            .text()
            .await
            .expect("text")
    }

    /// `GET /cases/{case_id}/fixture` (the case page's export) with the
    /// test's admin token.
    pub async fn export_fixture(&self, case_id: &str) -> reqwest::Response {
        self.client
            .get(format!("{}/cases/{case_id}/fixture", self.address))
            .send()
            .await
            .expect("request sent")
    }

    /// Resolves `case_id` through the API as the test's admin token, with
    /// `resolution` the request body (`resolution`, `note`, …).
    pub async fn resolve(&self, case_id: &str, resolution: Value) -> Reply {
        let response = self
            .client
            .post(format!("{}/api/cases/{case_id}/resolve", self.address))
            .json(&resolution)
            .send()
            .await
            .expect("request sent");
        reply(response).await
    }

    /// Asks the provider or the downstream about `case_id` again, through
    /// the API as the test's admin token.
    pub async fn look_up(&self, case_id: &str) -> Reply {
        let response = self
            .client
            .post(format!("{}/api/cases/{case_id}/lookup", self.address))
            .send()
            .await
            .expect("request sent");
        reply(response).await
    }

    pub async fn delivery(&self, id: &str) -> Reply {
        self.get(&format!("/api/deliveries/{id}")).await
    }
}

/// The `delivery_id` a webhook answer names.
pub fn id_of(reply: &Reply) -> String {
    reply.json["delivery_id"]
        .as_str()
        .expect("delivery id")
        .to_owned()
}

pub fn secret_of(source: &Source) -> String {
    use secrecy::ExposeSecret;
    source
        .secrets
        .first()
        .map(|s| s.expose_secret().to_owned())
        .unwrap_or_default()
}

async fn reply(response: reqwest::Response) -> Reply {
    let status = response.status().as_u16();
    let text = response.text().await.expect("body read");
    let json = serde_json::from_str(&text).unwrap_or(Value::String(text));
    Reply { status, json }
}

/// A norefid refund body; `reference` is the provider's refund request id.
pub fn refund(payment: &str, amount: u64, reference: Option<&str>) -> Vec<u8> {
    let mut body = serde_json::json!({
        "type": "refund.created",
        "payment_id": payment,
        "amount": amount,
        "currency": "EUR",
        "sent_at": chrono::Utc::now().to_rfc3339(),
    });
    if let Some(reference) = reference {
        body["refund_reference"] = Value::String(reference.to_owned());
    }
    serde_json::to_vec(&body).expect("json")
}

/// A fixture shipped in `tests/fixtures/`, read as the format says.
pub fn shipped_fixture(name: &str) -> unicity::domain::fixture::Fixture {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    serde_json::from_slice(&std::fs::read(&path).expect("the fixture reads"))
        .expect("a valid fixture")
}
