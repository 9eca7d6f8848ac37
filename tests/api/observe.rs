//! Observe mode beside a legacy handler: decided and journaled as usual, no
//! effect sent; the legacy handler's log imported and compared, a double
//! refund and a lost one reported as such; the mode journaled when it
//! changes.

use unicity::services::observe;

use crate::downstream::{Behaviour, Downstream};
use crate::helpers::{Counts, refund, spawn_app_with, spawn_on};

/// A source beside the legacy handler, unsigned for the test, whose sink
/// would be the downstream were it enforced.
pub fn legacy_source(mode: &str, sink: &str) -> String {
    format!(
        r#"
{sink}
[[sources]]
slug = "legacy"
tenant = "acme"
provider = "norefid"
environment = "live"
allow_unsigned = true
signature = {{ scheme = "none" }}
mode = "{mode}"
"#
    )
}

#[tokio::test]
async fn an_observed_source_applies_nothing_and_its_legacy_log_shows_a_double_and_a_lost_refund() {
    let downstream = Downstream::start(Behaviour::Apply { delay_ms: 0 }).await;
    // The downstream is the sink of every source: only the mode keeps the
    // observed one's effects from it.
    let sink = downstream.sink_toml(2000);
    let app = spawn_app_with(&legacy_source("observe", &sink)).await;
    // Given refunds decided in observe mode: one sent twice by the provider,
    // one sent once,
    let body = refund("pay_ob1", 500, Some("rr_ob1"));
    let first = app.post_raw("legacy", body.clone(), &[]).await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    app.wait_applied(1).await;
    let retry = app.post_raw("legacy", body, &[]).await;
    assert_eq!(retry.json["decision"], "ignore", "{}", retry.json);
    let other = app
        .post_raw("legacy", refund("pay_ob2", 700, Some("rr_ob2")), &[])
        .await;
    assert_eq!(other.json["decision"], "process", "{}", other.json);
    app.wait_applied(2).await;
    // then nothing reached the downstream: the effects are recorded only,
    assert!(downstream.calls().is_empty(), "{:?}", downstream.calls());
    // and the mode is on the record.
    assert_eq!(app.journal_count("SourceModeSet").await, 1);

    // When the legacy handler's log says it refunded pay_ob1 twice and
    // never pay_ob2,
    let log = "reference,resource,amount,applied_at\n\
               lg_1,pay_ob1,500,2026-12-02T10:00:00Z\n\
               lg_2,pay_ob1,500,2026-12-02T10:00:05Z\n";
    let settings =
        crate::helpers::test_settings(&app.database_url, &legacy_source("observe", &sink));
    let engine = unicity::services::engine::Engine::open(
        &app.database_url,
        settings.catalog,
        settings.key_secret,
        settings.sinks,
        settings.lookups,
        settings.engine,
    )
    .await
    .unwrap();
    assert_eq!(observe::import(&engine, "legacy", log).await.unwrap(), 2);
    let report = observe::report(&app.db, "legacy").await.unwrap();

    // then the double refund and the lost one are both named.
    assert_eq!(report.legacy_effects, 2);
    assert_eq!(report.unicity_effects, 2);
    let twice: Vec<_> = report
        .applied_twice_by_legacy
        .iter()
        .map(|d| (d.resource.as_str(), d.legacy, d.unicity))
        .collect();
    assert_eq!(twice, [("pay_ob1", 2, 1)]);
    let lost: Vec<_> = report
        .missed_by_legacy
        .iter()
        .map(|d| (d.resource.as_str(), d.legacy, d.unicity))
        .collect();
    assert_eq!(lost, [("pay_ob2", 0, 1)]);
    assert_eq!(app.journal_count("LegacyEffectsImported").await, 1);
}

#[tokio::test]
async fn switching_an_observed_source_to_enforce_is_journaled_and_its_effects_are_sent() {
    let downstream = Downstream::start(Behaviour::Apply { delay_ms: 0 }).await;
    let sink = downstream.sink_toml(2000);
    let observed = spawn_app_with(&legacy_source("observe", &sink)).await;
    let url = observed.database_url.clone();
    // A restart on the same database, enforcing.
    let enforced = spawn_on(&url, &legacy_source("enforce", &sink), None).await;
    assert_eq!(enforced.journal_count("SourceModeSet").await, 2);
    let reply = enforced
        .post_raw("legacy", refund("pay_ob3", 300, Some("rr_ob3")), &[])
        .await;
    assert_eq!(reply.json["decision"], "process", "{}", reply.json);
    downstream.wait_calls(1).await;
    // The same mode again journals nothing.
    let again = spawn_on(&url, &legacy_source("enforce", &sink), None).await;
    assert_eq!(again.journal_count("SourceModeSet").await, 2);
}
