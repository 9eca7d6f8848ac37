//! A real browser for the back-office tests: headless Chromium driven
//! through chromedriver (Debian's `chromium` and `chromium-driver`, which
//! `.ci/run` installs). Each test gets its own chromedriver on a free port
//! and its own profile; at most one browser runs at a time (two cores).
//! Every page a test visits can be saved as a screenshot under
//! `target/tmp/screenshots/` for people to look at.
//!
//! Without the browser, a test is skipped with a message — except in CI
//! (`CI=true`), where a missing browser fails the run.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use tokio::sync::{Semaphore, SemaphorePermit};

use super::processes::free_port;

static ONE_AT_A_TIME: Semaphore = Semaphore::const_new(1);

const CHROMIUM_ARGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--window-size=1280,900",
];

fn program(variable: &str, default: &str) -> Option<PathBuf> {
    let path = std::env::var_os(variable)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(default));
    path.exists().then_some(path)
}

/// chromedriver and its Chromium, killed together (one process group) when
/// the test ends, even if it panicked.
struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
        let group = format!("-{}", self.0.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.0.wait();
    }
}

pub struct Browser {
    client: Option<Client>,
    base: String,
    shots: PathBuf,
    _profile: tempfile::TempDir,
    _driver: Driver,
    _permit: SemaphorePermit<'static>,
}

impl Browser {
    /// A fresh browser pointed at `base` (the server's address), or `None`
    /// (after saying why) when the browser is not installed outside CI.
    pub async fn open(base: &str, test: &str) -> Option<Self> {
        let found = (
            program("CHROMEDRIVER", "/usr/bin/chromedriver"),
            program("CHROMIUM", "/usr/bin/chromium"),
        );
        let (Some(chromedriver), Some(chromium)) = found else {
            let message = "browser tests need chromium and chromedriver \
                           (apt-get install chromium chromium-driver)";
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "{message}: CI must run them"
            );
            eprintln!("skipping {test}: {message}");
            return None;
        };
        let permit = ONE_AT_A_TIME.acquire().await.expect("semaphore open");
        let port = free_port();
        let driver = {
            use std::os::unix::process::CommandExt;
            Command::new(chromedriver)
                .arg(format!("--port={port}"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .process_group(0)
                .spawn()
                .map(Driver)
                .expect("chromedriver starts")
        };
        let profile = tempfile::tempdir().expect("profile directory");
        let mut args: Vec<String> = CHROMIUM_ARGS.iter().map(|a| a.to_string()).collect();
        args.push(format!("--user-data-dir={}", profile.path().display()));
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".to_owned(),
            serde_json::json!({ "binary": chromium, "args": args }),
        );
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let webdriver = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(20);
        let client = loop {
            match ClientBuilder::new(connector.clone())
                .capabilities(capabilities.clone())
                .connect(&webdriver)
                .await
            {
                Ok(client) => break client,
                Err(_) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(error) => panic!("chromedriver did not start a session: {error}"),
            }
        };
        let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join("screenshots")
            .join(test);
        std::fs::create_dir_all(&shots).expect("screenshot directory");
        Some(Self {
            client: Some(client),
            base: base.to_owned(),
            shots,
            _profile: profile,
            _driver: driver,
            _permit: permit,
        })
    }

    fn client(&self) -> &Client {
        self.client.as_ref().expect("browser open")
    }

    /// Opens `path` of the server.
    pub async fn visit(&self, path: &str) {
        self.client()
            .goto(&format!("{}{path}", self.base))
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}"));
    }

    /// Opens a page of another site (an absolute URL).
    pub async fn visit_url(&self, url: &str) {
        self.client()
            .goto(url)
            .await
            .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    }

    /// The text of the alert dialog open on the page, if a script opened one.
    pub async fn alert(&self) -> Option<String> {
        self.client().get_alert_text().await.ok()
    }

    pub async fn find_all(&self, css: &str) -> Vec<Element> {
        self.client()
            .find_all(Locator::Css(css))
            .await
            .expect("find_all")
    }

    /// The current path (and query) of the page.
    pub async fn path(&self) -> String {
        let url = self.client().current_url().await.expect("current url");
        match url.query() {
            Some(query) => format!("{}?{query}", url.path()),
            None => url.path().to_owned(),
        }
    }

    pub async fn find(&self, css: &str) -> Element {
        self.client()
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no element {css} on this page: {e}"))
    }

    /// Types `value` into the field `css` (cleared first).
    pub async fn fill(&self, css: &str, value: &str) {
        let field = self.find(css).await;
        field.clear().await.expect("clear field");
        field.send_keys(value).await.expect("type into field");
    }

    pub async fn click(&self, css: &str) {
        self.find(css).await.click().await.expect("click");
    }

    /// Resizes the window to `width` × 800 CSS pixels.
    pub async fn width(&self, width: u32) {
        self.client()
            .set_window_size(width, 800)
            .await
            .expect("window resized");
    }

    /// How far the page is wider than the window (0 when nothing scrolls
    /// sideways).
    pub async fn overflow(&self) -> i64 {
        self.client()
            .execute(
                "return document.documentElement.scrollWidth - document.documentElement.clientWidth;",
                vec![],
            )
            .await
            .ok()
            .and_then(|v| v.as_i64())
            .expect("a width")
    }

    /// Presses `key` on the keyboard, on whatever has the focus.
    pub async fn press(&self, key: char) {
        use fantoccini::actions::{InputSource, KeyAction, KeyActions};
        let actions = KeyActions::new("keyboard".to_owned())
            .then(KeyAction::Down { value: key })
            .then(KeyAction::Up { value: key });
        self.client()
            .perform_actions(actions)
            .await
            .unwrap_or_else(|e| panic!("press {key}: {e}"));
    }

    /// Presses `key` and waits until the page it leads to has loaded.
    pub async fn press_and_wait(&self, key: char) {
        self.mark_page().await;
        self.press(key).await;
        self.wait_for_new_page(&format!("pressing {key}")).await;
    }

    async fn mark_page(&self) {
        self.client()
            .execute("window.__unicity_old_page = true;", vec![])
            .await
            .expect("mark the page");
    }

    /// Clicks `css` (a submit button or a link) and waits until the next
    /// page has loaded: a mark left on the old page's window is gone (a new
    /// document has a new window) and the new document is complete.
    pub async fn click_and_wait(&self, css: &str) {
        self.mark_page().await;
        self.click(css).await;
        self.wait_for_new_page(css).await;
    }

    async fn wait_for_new_page(&self, what: &str) {
        let client = self.client();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let loaded = client
                .execute(
                    "return !window.__unicity_old_page && document.readyState === 'complete';",
                    vec![],
                )
                .await
                .ok()
                .and_then(|v| v.as_bool())
                .unwrap_or(false);
            if loaded {
                return;
            }
            assert!(Instant::now() < deadline, "{what} led to no new page");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The visible text of the page's `main`.
    pub async fn text(&self) -> String {
        self.find("main").await.text().await.expect("page text")
    }

    /// The page's HTML as the browser holds it.
    pub async fn html(&self) -> String {
        self.client().source().await.expect("page source")
    }

    /// Saves the page as `target/tmp/screenshots/<test>/<name>.png`.
    pub async fn screenshot(&self, name: &str) {
        let png = self.client().screenshot().await.expect("screenshot");
        std::fs::write(self.shots.join(format!("{name}.png")), png).expect("screenshot saved");
    }

    /// Signs in through the login page as a person would.
    pub async fn sign_in(&self, name: &str, password: &str) {
        self.visit("/login").await;
        self.fill("input[name=name]", name).await;
        self.fill("input[name=password]", password).await;
        self.click_and_wait("form[action='/login'] button[type=submit]")
            .await;
    }

    /// Signs out through the navigation's button.
    pub async fn sign_out(&self) {
        self.click_and_wait("form[action='/logout'] button[type=submit]")
            .await;
    }

    /// Ends the browser session (the driver is killed on drop).
    pub async fn close(mut self) {
        if let Some(client) = self.client.take() {
            let _ = client.close().await;
        }
    }
}
