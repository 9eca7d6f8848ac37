//! Identity over the whole system: horizons, versions, `key explain`.

use crate::support::app::{fresh_database, refund, spawn_app_with, spawn_on, test_settings};
use crate::support::counts::Counts;

const SHORT_STRATEGY: &str = r#"
[engine]
lease_secs = 30
sweep_interval_ms = 100

[[strategies]]
name = "short-refund"
version = 1
provider = "norefid"
event_types = ["refund.*"]
kind = "business_reference"
strength = "strong"
horizon = "HORIZON"
effect_type = "refund.create"
criticality = "critical"
fields = [
  { name = "payment", path = "$.payment_id" },
  { name = "refund_reference", path = "$.refund_reference" },
]
discriminants = [{ name = "amount", path = "$.amount" }]

[[hierarchies]]
provider = "norefid"
event_type = "refund.*"
strategies = ["short-refund"]
"#;

fn short(horizon: &str) -> String {
    SHORT_STRATEGY.replace("HORIZON", horizon)
}

#[tokio::test]
async fn a_late_replay_after_the_horizon_finds_its_effect_in_the_ledger_or_asks_when_purged() {
    let app = spawn_app_with(&short("1s")).await;
    let body = refund("pay_h", 800, Some("rr_h"));
    let first = app.post_signed("hmac", &body).await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    assert_eq!(first.json["strategy"], "short-refund@1");
    // Past the horizon the fast index forgets the key (journaled)...
    app.wait_reservations(0).await;
    assert_eq!(app.journal_count("KeysPurged").await, 1);
    // The key's one row stays, flagged purged, its claim and horizon
    // cleared, exactly as replaying the journal leaves it.
    assert_eq!(app.effects().await, 1);
    assert_eq!(
        app.count(
            "SELECT COUNT(*) FROM effects WHERE key_purged = TRUE AND state = 'applied' \
             AND fencing_token IS NULL AND lease_until IS NULL AND expires_at IS NULL"
        )
        .await,
        1
    );
    assert_rebuilt_the_same(&app).await;

    // ...but the effects ledger still proves the refund happened.
    let late = app.post_signed("hmac", &body).await;
    assert_eq!(late.status, 200, "{}", late.json);
    assert_eq!(late.json["decision"], "ignore");
    assert_eq!(late.json["reason"], "late_replay_found_effect");
    assert_eq!(
        late.json["reference_delivery_id"],
        first.json["delivery_id"]
    );

    // Once retention purged the evidence, a replay needs an approval.
    let purged = unicity::services::retention::purge_evidence(&app.db, chrono::Utc::now())
        .await
        .unwrap();
    assert_eq!(purged, 1);
    let later = app.post_signed("hmac", &body).await;
    assert_eq!(later.json["decision"], "reconcile", "{}", later.json);
    assert_eq!(later.json["reason"], "evidence_purged");
    assert_eq!(app.effects().await, 1, "never a second refund");
    assert_rebuilt_the_same(&app).await;
}

/// Every projection reads the same rebuilt from the journal.
async fn assert_rebuilt_the_same(app: &crate::support::app::TestApp) {
    let probe = crate::support::probe::Probe::of(&app.db);
    let live = probe.snapshot().await;
    unicity::services::projections::rebuild(&app.db)
        .await
        .expect("rebuild");
    let rebuilt = probe.snapshot().await;
    crate::support::probe::assert_same_projections(&live, &rebuilt, &["effects"]);
}

#[tokio::test]
async fn a_strategy_changed_without_a_new_version_stops_the_server_with_what_changed() {
    let (url, _dir) = fresh_database().await;
    let first = spawn_on(&url, &short("30d"), None).await;
    assert_eq!(
        first
            .count("SELECT COUNT(*) FROM strategy_versions WHERE name = 'short-refund'")
            .await,
        1
    );
    assert_eq!(
        first.journal_count("StrategyVersionRecorded").await,
        first.count("SELECT COUNT(*) FROM strategy_versions").await
    );
    let changed = unicity::startup::Application::build(test_settings(&url, &short("60d"))).await;
    let error = format!(
        "{:#}",
        changed.err().expect("the server must refuse to start")
    );
    assert!(error.contains("short-refund@1"), "{error}");
    assert!(error.contains("horizon"), "{error}");

    // The same definition, bumped to version 2, starts.
    let bumped = short("60d").replace("version = 1", "version = 2");
    let app = unicity::startup::Application::build(test_settings(&url, &bumped)).await;
    assert!(app.is_ok(), "a new version is accepted");
}

#[tokio::test]
async fn key_explain_shows_the_chosen_strategy_the_skipped_ones_and_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("unicity.toml");
    std::fs::write(&config, crate::support::app::TEST_SOURCES).unwrap();
    let run = |body: Vec<u8>| {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_unicity"))
            .args([
                "--config",
                config.to_str().unwrap(),
                "key",
                "explain",
                "--source",
                "hmac",
            ])
            .env("UNICITY_KEY_SECRET", crate::support::app::TEST_KEY_SECRET)
            .env("TEST_STRIPE_SECRETS", "whsec_x")
            .env("DATABASE_URL", "sqlite://unused.db")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("unicity runs");
        use std::io::Write;
        child.stdin.take().unwrap().write_all(&body).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let with_reference = run(refund("pay_e", 100, Some("rr_e")));
    assert!(
        with_reference.contains("norefid-refund-ref@1"),
        "{with_reference}"
    );
    assert!(with_reference.contains("strong"), "{with_reference}");

    let without = run(refund("pay_e", 100, None));
    assert!(
        without.contains("norefid-refund-fingerprint@1"),
        "{without}"
    );
    assert!(
        without.contains("refund_reference"),
        "the skip reason names the missing field: {without}"
    );
    assert!(without.contains("weak"), "{without}");
    // The volatile send time never enters the material.
    assert!(!without.contains("sent_at\""), "{without}");
}

#[tokio::test]
async fn past_the_horizon_the_ledger_still_catches_a_differing_discriminant() {
    let app = spawn_app_with(&short("1s")).await;
    app.post_signed("hmac", &refund("pay_l", 800, Some("rr_l")))
        .await;
    app.wait_reservations(0).await;
    let late = app
        .post_signed("hmac", &refund("pay_l", 900, Some("rr_l")))
        .await;
    assert_eq!(late.json["decision"], "quarantine", "{}", late.json);
    assert_eq!(late.json["reason"], "discriminants_differ");
    assert_eq!(late.json["differences"][0]["existing"], 800);
}
