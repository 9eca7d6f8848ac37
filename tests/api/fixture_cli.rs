//! `unicity fixtures` from the command line: `check` says which file is not
//! a valid fixture and exits non-zero instead of stopping on it; `export`
//! writes a new file and never replaces one, nor writes through a link
//! planted where its file goes.

use std::path::Path;
use std::process::Output;

use unicity::domain::fixture::Fixture;

use crate::support::app::{fresh_database, spawn_app};
use crate::support::counts::Counts;
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

#[tokio::test]
async fn fixtures_export_never_replaces_a_file_nor_writes_through_a_planted_link() {
    let app = spawn_app().await;
    let refund = || crate::support::app::refund("pay_cli", 700, None);
    let first = app.post_signed("hmac", &refund()).await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    app.wait_applied(1).await;
    let second = app.post_signed("hmac", &refund()).await;
    let case_id = second.json["case_id"].as_str().expect("a case").to_owned();
    let resolved = app
        .resolve(
            &case_id,
            serde_json::json!({"resolution": "confirm_duplicate", "note": "a retry"}),
        )
        .await;
    assert_eq!(resolved.status, 200);
    let config = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let export = || async {
        unicity(
            &app.database_url,
            config.path(),
            &[
                "fixtures",
                "export",
                "--case",
                &case_id,
                "--out",
                out.path().to_str().unwrap(),
            ],
        )
        .await
    };
    let path = out.path().join(format!("case-{case_id}.json"));

    // A link planted where the file goes is not written through,
    let victim = elsewhere.path().join("victim");
    std::fs::write(&victim, "kept").unwrap();
    std::os::unix::fs::symlink(&victim, &path).unwrap();
    let refused = export().await;
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(stderr.contains("already exists"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "kept");
    // nor is a link to nowhere;
    std::fs::remove_file(&victim).unwrap();
    let refused = export().await;
    assert!(!refused.status.success());
    assert!(!victim.exists(), "written through a dangling link");
    std::fs::remove_file(&path).unwrap();

    // where nothing is, the fixture is written,
    let written = export().await;
    assert!(
        written.status.success(),
        "{}",
        String::from_utf8_lossy(&written.stderr)
    );
    let text = std::fs::read(&path).unwrap();
    let fixture: Fixture = serde_json::from_slice(&text).expect("a fixture");
    assert_eq!(fixture.deliveries.len(), 2);
    // and a second export does not replace it.
    let again = export().await;
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(!again.status.success());
    assert!(stderr.contains("already exists"), "{stderr}");
    assert_eq!(std::fs::read(&path).unwrap(), text);
    assert_eq!(app.journal_count("FixtureExported").await, 1);
}
