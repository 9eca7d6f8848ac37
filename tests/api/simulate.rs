//! `unicity simulate` run as a process against a test server: a small
//! scenario with every kind of delivery, its provider and downstream on
//! loopback. It must exit 0, and its report must agree with what Unicity
//! recorded and what its own downstream counted.

use crate::support::app::spawn_app_with;
use crate::support::counts::Counts;
use crate::support::processes::{cli, free_port};

/// The figure after `label` on its line of the report.
fn figure(report: &str, label: &str) -> i64 {
    report
        .lines()
        .find_map(|line| line.trim_start().strip_prefix(label))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no `{label}` in the report:\n{report}"))
}

#[tokio::test]
async fn a_small_simulation_passes_and_its_report_matches_the_ledger() {
    let (provider, downstream) = (free_port(), free_port());
    let listing = crate::support::provider::lookup_toml(&format!("http://127.0.0.1:{provider}"));
    let extra = format!(
        r#"
[engine]
sweep_interval_ms = 100
lookup_retry_secs = 1
lookup_breaker_secs = 2

[[sinks]]
source = "hmac"
kind = "http"
url = "http://127.0.0.1:{downstream}/effects"
timeout_ms = 500
status_url = "http://127.0.0.1:{downstream}/effects/{{idempotency_key}}"
status_not_found = "failed"

{listing}"#
    );
    let app = spawn_app_with(&extra).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let mut command = cli(&app.database_url, &extra, dir.path());
    command.args([
        "simulate",
        "--unicity",
        &app.address,
        "--source",
        "hmac",
        "--provider-listen",
        &format!("127.0.0.1:{provider}"),
        "--downstream-listen",
        &format!("127.0.0.1:{downstream}"),
        "--items",
        "12",
        "--seed",
        "3",
        "--api-outage-ms",
        "500",
        "--late-ms",
        "1200",
        "--settle-secs",
        "40",
    ]);
    let report = crate::support::processes::finished(command).await;
    assert!(report.contains("PASS"), "{report}");

    let made = figure(&report, "refunds made by the provider");
    let applied = figure(&report, "effects applied (downstream)");
    assert_eq!(
        figure(&report, "deliveries sent"),
        app.count("SELECT COUNT(*) FROM deliveries WHERE source = 'hmac'")
            .await,
        "every delivery the simulator sent reached Unicity"
    );
    assert_eq!(
        applied,
        app.applied_effects().await,
        "the downstream counted the effects Unicity applied"
    );
    let total = report
        .lines()
        .find(|l| l.trim_start().starts_with("total"))
        .expect("a total line");
    let cells: Vec<i64> = total
        .split_whitespace()
        .skip(1)
        .map(|n| n.parse().expect("a number"))
        .collect();
    // items, refunds, applied, person, twice, never
    assert_eq!(cells[1], made);
    assert_eq!(cells[2], applied);
    assert_eq!((cells[4], cells[5]), (0, 0), "{report}");
    assert_eq!(
        cells[2] + cells[3],
        made,
        "every refund applied or left for a person: {report}"
    );
    assert!(
        app.cases_with_status("missing_effect", "open").await >= 1,
        "the dropped delivery is found by reconciliation: {report}"
    );
}
