//! `unicity fixtures` from the command line: `check` says which file is not
//! a valid fixture and exits non-zero instead of stopping on it; `export`
//! writes a new file and never replaces one, nor writes through a link
//! planted where its file goes.

use std::path::Path;
use std::process::Output;

use unicity::domain::fixture::Fixture;

use crate::fixture_masking::{CUSTOMER_SENSITIVE, weak_match};
use crate::support::app::{fresh_database, spawn_app, spawn_app_with};
use crate::support::counts::Counts;
use crate::support::processes::cli;

/// Runs `unicity` with `args` on `database_url`, configured in `config`.
async fn unicity(database_url: &str, config: &Path, args: &[&str]) -> Output {
    unicity_with(database_url, "", config, args).await
}

/// `unicity`, its configuration adding `extra` to the test sources.
async fn unicity_with(database_url: &str, extra: &str, config: &Path, args: &[&str]) -> Output {
    let mut command = cli(database_url, extra, config);
    command.args(args);
    tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("join")
        .expect("unicity runs")
}

/// `fixtures export` of `case_id` into `out`.
fn export_args<'a>(case_id: &'a str, out: &'a Path) -> [&'a str; 6] {
    let out = out.to_str().expect("a UTF-8 path");
    ["fixtures", "export", "--case", case_id, "--out", out]
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
            &export_args(&case_id, out.path()),
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

/// An engineer exports a case with a configuration that defines the
/// strategy that keyed its deliveries otherwise (here without its
/// sensitive path): the fixture would pin a definition that never keyed
/// them, and mask the bodies by it. Refused; with the configuration that
/// keyed them, written.
#[tokio::test]
async fn fixtures_export_refuses_a_configuration_that_defines_the_keying_strategy_otherwise() {
    let app = spawn_app_with(CUSTOMER_SENSITIVE).await;
    let body = |sent: &str| {
        serde_json::to_vec(&serde_json::json!({
            "type": "refund.created", "payment_id": "pay_def", "amount": 700,
            "currency": "EUR", "sent_at": sent, "customer": {"email": "a.b@example.org"},
        }))
        .unwrap()
    };
    let case_id = weak_match(&app, "hmac", &body("10:00"), &body("10:05")).await;
    let resolved = app
        .resolve(
            &case_id,
            serde_json::json!({"resolution": "confirm_duplicate", "note": "a retry"}),
        )
        .await;
    assert_eq!(resolved.status, 200, "{}", resolved.json);
    let otherwise = CUSTOMER_SENSITIVE.replace("sensitive = [\"$.customer\"]\n", "");
    assert_ne!(otherwise, CUSTOMER_SENSITIVE);
    let (config, out) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let export = |extra: String| {
        let (url, config, out, case_id) = (&app.database_url, config.path(), out.path(), &case_id);
        async move { unicity_with(url, &extra, config, &export_args(case_id, out)).await }
    };
    let refused = export(otherwise).await;
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(stderr.contains("refund-customer@1"), "{stderr}");
    assert!(stderr.contains("defines it otherwise"), "{stderr}");
    assert!(!out.path().join(format!("case-{case_id}.json")).exists());
    assert_eq!(app.journal_count("FixtureExported").await, 0);
    let written = export(CUSTOMER_SENSITIVE.to_owned()).await;
    assert!(
        written.status.success(),
        "{}",
        String::from_utf8_lossy(&written.stderr)
    );
    assert_eq!(app.journal_count("FixtureExported").await, 1);
}
