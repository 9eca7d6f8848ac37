//! The replay's progress: the service tells how many deliveries both sets
//! have decided; the command draws it on standard error when that is a
//! terminal, and never with `--json` or into a pipe.

use std::sync::Mutex;

use unicity::services::shadow::{self, Progress, Window};

use crate::shadow::PAYMENT_ONLY;
use crate::support::app::{TEST_SOURCES, TestApp, refund, spawn_app};
use crate::support::processes::cli;

/// Every call, in order.
#[derive(Default)]
struct Told {
    started: Mutex<Vec<usize>>,
    decided: Mutex<Vec<usize>>,
}

impl Progress for Told {
    fn started(&self, total: usize) {
        self.started.lock().unwrap().push(total);
    }
    fn decided(&self, done: usize) {
        self.decided.lock().unwrap().push(done);
    }
}

/// `n` refunds, each followed by the provider's retry of it.
async fn journal_of(n: u64) -> TestApp {
    let app = spawn_app().await;
    for k in 0..n {
        let body = refund(&format!("pay_pg_{k}"), 100 + k, Some(&format!("rr_pg_{k}")));
        let first = app.post_signed("hmac", &body).await;
        assert_eq!(first.json["decision"], "process", "{}", first.json);
        let retry = app.post_signed("hmac", &body).await;
        assert_eq!(retry.json["decision"], "ignore", "{}", retry.json);
    }
    app
}

#[tokio::test]
async fn the_replay_tells_its_total_then_each_delivery_decided_by_both_sets_once() {
    // Given a journal of 300 deliveries (more than are in flight at once),
    let app = journal_of(150).await;
    let told = Told::default();

    // when the candidate is replayed over it, watched,
    let scratch = tempfile::tempdir().unwrap();
    let report = shadow::watched(
        &app.db,
        TEST_SOURCES,
        PAYMENT_ONLY,
        &Window::default(),
        scratch.path(),
        &told,
    )
    .await
    .expect("replayed");

    // then the total is told once, before anything is decided, and every
    // count from 1 to it once, rising.
    assert_eq!(report.replayed, 300);
    assert_eq!(*told.started.lock().unwrap(), [300]);
    let decided = told.decided.lock().unwrap().clone();
    assert_eq!(decided, (1..=300).collect::<Vec<_>>());
}

/// The replay command over `app`'s journal, run in a terminal (`script`
/// gives it one) with standard output sent to `out`; what the terminal
/// showed.
async fn in_a_terminal(app: &TestApp, dir: &std::path::Path, json: bool, out: &str) -> String {
    let candidate = dir.join("candidate.toml");
    std::fs::write(&candidate, PAYMENT_ONLY).unwrap();
    let unicity = cli(&app.database_url, "", dir);
    let mut line = format!(
        "'{}' replay --strategies '{}'",
        unicity.get_program().to_string_lossy(),
        candidate.display()
    );
    if json {
        line += " --json";
    }
    line += &format!(" > '{out}'");
    let mut command = std::process::Command::new("script");
    command.args(["-q", "-e", "-c", &line, "/dev/null"]);
    for (name, value) in unicity.get_envs() {
        if let Some(value) = value {
            command.env(name, value);
        }
    }
    command
        .env("TERM", "xterm")
        .stdin(std::process::Stdio::null());
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .unwrap()
        .expect("script runs (util-linux)");
    let shown = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{shown}");
    shown
}

#[tokio::test]
async fn in_a_terminal_the_bar_shows_deliveries_done_and_their_rate_but_never_with_json() {
    let app = journal_of(2).await;
    let dir = tempfile::tempdir().unwrap();

    // A person at a terminal sees the bar, the report going to a file,
    let out = dir.path().join("report.txt");
    let shown = in_a_terminal(&app, dir.path(), false, &out.to_string_lossy()).await;
    assert!(shown.contains("replaying 4/4 deliveries"), "{shown:?}");
    assert!(shown.contains("/s"), "the rate: {shown:?}");
    let report = std::fs::read_to_string(&out).unwrap();
    assert!(report.starts_with("replayed 4 deliveries"), "{report}");
    assert!(!report.contains("replaying"), "{report}");

    // and with --json, nothing but the report, even at a terminal.
    let out = dir.path().join("report.json");
    let shown = in_a_terminal(&app, dir.path(), true, &out.to_string_lossy()).await;
    assert!(!shown.contains("replaying"), "{shown:?}");
    assert!(!shown.contains('\u{1b}'), "{shown:?}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(report["replayed"], 4, "{report}");
}

#[tokio::test]
async fn into_a_pipe_the_command_prints_no_progress_bytes() {
    let app = journal_of(2).await;
    let dir = tempfile::tempdir().unwrap();
    let candidate = dir.path().join("candidate.toml");
    std::fs::write(&candidate, PAYMENT_ONLY).unwrap();
    let mut command = cli(&app.database_url, "", dir.path());
    command.args(["replay", "--strategies"]).arg(&candidate);

    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .unwrap()
        .unwrap();

    assert!(output.status.success());
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert!(stdout.starts_with("replayed 4 deliveries"), "{stdout}");
    assert!(stderr.is_empty(), "{stderr:?}");
    assert!(
        !stdout.contains('\r') && !stdout.contains('\u{1b}'),
        "{stdout:?}"
    );
}
