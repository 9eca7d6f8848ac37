//! `unicity fixtures` from the command line: `check` says which file is not
//! a valid fixture and exits non-zero instead of stopping on it; `export`
//! writes a new file and never replaces one, nor writes through a link
//! planted where its file goes.

use std::path::Path;
use std::process::Output;

use crate::support::app::fresh_database;
use crate::support::processes::cli;

/// Runs `unicity` with `args` on `database_url`, configured in `config`.
async fn unicity(database_url: &str, config: &Path, args: &[&str]) -> Output {
    let mut command = cli(database_url, "", config);
    command.args(args);
    tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("join")
        .expect("unicity runs")
}

#[tokio::test]
async fn fixtures_check_says_a_file_whose_offset_no_clock_can_reach_is_not_a_valid_fixture() {
    let (url, _database) = fresh_database().await;
    let config = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let shipped =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/no-strategy-rejected.json");
    let mut fixture: serde_json::Value =
        serde_json::from_slice(&std::fs::read(shipped).unwrap()).unwrap();
    fixture["deliveries"][0]["offset_ms"] = serde_json::json!(9_000_000_000_000_000_000_i64);
    let file = dir.path().join("far.json");
    std::fs::write(&file, serde_json::to_vec(&fixture).unwrap()).unwrap();

    let output = unicity(
        &url,
        config.path(),
        &["fixtures", "check", dir.path().to_str().unwrap()],
    )
    .await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.contains("far.json: not a valid fixture"), "{stderr}");
    assert!(stderr.contains("offset_ms"), "{stderr}");
}
