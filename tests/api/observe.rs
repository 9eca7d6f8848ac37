//! Observe mode beside a legacy handler: decided and journaled as usual, no
//! effect sent; the legacy handler's log imported and compared, a double
//! refund and a lost one reported as such; the mode journaled when it
//! changes.

use unicity::services::observe;

use crate::support::app::{TestApp, refund, spawn_app_with, spawn_on};
use crate::support::counts::Counts;
use crate::support::downstream::{Behaviour, Downstream};

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
    assert_eq!(
        import(&app, &legacy_source("observe", &sink), log)
            .await
            .unwrap(),
        2
    );
    app.settle().await;
    let report = observe::report(&app.db, "legacy", &["*".to_owned()], None)
        .await
        .unwrap();

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
    assert!(report.without_resource.is_empty());
    assert_eq!(app.journal_count("LegacyEffectsImported").await, 1);
}

#[tokio::test]
async fn an_effect_naming_no_resource_is_counted_and_listed_not_silently_left_out() {
    let app = spawn_app_with(&legacy_source("observe", "")).await;
    // Given a refund whose body names no payment, held for a person in
    // observe mode, whom finance has processed
    let body = serde_json::to_vec(&serde_json::json!({
        "type": "refund.created", "amount": 900, "currency": "EUR",
        "refund_reference": "rr_nr",
    }))
    .unwrap();
    let reply = app.post_raw("legacy", body, &[]).await;
    assert_eq!(
        reply.json["reason"], "required_fields_missing",
        "{}",
        reply.json
    );
    let case = reply.json["case_id"].as_str().expect("a case");
    let done = app
        .resolve(
            case,
            serde_json::json!({"resolution": "process_as_distinct", "note": "checked at the bank"}),
        )
        .await;
    assert_eq!(done.status, 200, "{}", done.json);
    app.wait_applied(1).await;
    app.settle().await;

    // When the report compares it
    let report = observe::report(&app.db, "legacy", &["*".to_owned()], None)
        .await
        .unwrap();

    // Then it is counted among Unicity's effects and listed as compared
    // with nothing
    assert_eq!(report.unicity_effects, 1);
    assert_eq!(
        report.without_resource,
        [reply.json["delivery_id"].as_str().unwrap()]
    );
    assert!(report.missed_by_legacy.is_empty());
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

/// Imports `log` for the `legacy` source of `configuration`, as
/// `unicity observe import` does.
async fn import(app: &TestApp, configuration: &str, log: &str) -> anyhow::Result<usize> {
    let settings = crate::support::app::test_settings(&app.database_url, configuration);
    let source = settings
        .sources
        .iter()
        .find(|s| s.slug() == "legacy")
        .expect("the legacy source");
    observe::import(&app.db, source, &settings.key_secret, log).await
}

#[tokio::test]
async fn a_log_imported_twice_or_overlapping_another_counts_each_legacy_effect_once() {
    let sink = "";
    let configuration = legacy_source("observe", sink);
    let app = spawn_app_with(&configuration).await;
    let reply = app
        .post_raw("legacy", refund("pay_ov1", 500, Some("rr_ov1")), &[])
        .await;
    assert_eq!(reply.json["decision"], "process", "{}", reply.json);
    app.wait_applied(1).await;
    // Given Monday's log, with one refund applied twice (two times),
    let monday = "reference,resource,amount,applied_at\n\
                  lg_1,pay_ov1,500,2026-12-01T10:00:00Z\n\
                  lg_2,pay_ov1,500,2026-12-01T10:00:05Z\n";
    assert_eq!(import(&app, &configuration, monday).await.unwrap(), 2);
    // when the same file comes again it is refused,
    let again = import(&app, &configuration, monday)
        .await
        .expect_err("imported already");
    assert!(
        format!("{again:#}").contains("imported for `legacy` already"),
        "{again:#}"
    );
    // and a later export that repeats Monday's rows adds only what is new;
    let week = "reference,resource,amount,applied_at\n\
                lg_1,pay_ov1,500,2026-12-01T10:00:00Z\n\
                lg_2,pay_ov1,500,2026-12-01T10:00:05Z\n\
                lg_3,pay_ov2,900,2026-12-02T09:00:00Z\n";
    assert_eq!(import(&app, &configuration, week).await.unwrap(), 3);
    app.settle().await;
    let report = observe::report(&app.db, "legacy", &["*".to_owned()], None)
        .await
        .unwrap();
    // then each legacy effect is counted once.
    assert_eq!(report.legacy_effects, 3);
    let twice: Vec<_> = report
        .applied_twice_by_legacy
        .iter()
        .filter(|d| d.resource == "pay_ov1")
        .map(|d| (d.legacy, d.unicity))
        .collect();
    assert_eq!(twice, [(2, 1)]);
}

#[tokio::test]
async fn a_sensitive_resource_in_a_legacy_log_is_journaled_sealed_and_still_compared() {
    const EMAIL: &str = "dana.private@example.org";
    let configuration = format!(
        "{}resource = [\"$.customer_email\"]\n",
        legacy_source("observe", "")
    );
    let app = spawn_app_with(&configuration).await;
    let mut body: serde_json::Value =
        serde_json::from_slice(&refund("pay_sens", 500, Some("rr_sens"))).unwrap();
    body["customer_email"] = EMAIL.into();
    let reply = app
        .post_raw("legacy", serde_json::to_vec(&body).unwrap(), &[])
        .await;
    assert_eq!(reply.json["decision"], "process", "{}", reply.json);
    app.wait_applied(1).await;
    // Given a legacy log that names the customer in clear, with a BOM and
    // quoted cells,
    let log = format!(
        "{}reference,resource,amount,applied_at\n\
         \"lg_s1\",\"{EMAIL}\",\"500\",2026-12-01T10:00:00Z\n",
        '\u{feff}'
    );
    assert_eq!(import(&app, &configuration, &log).await.unwrap(), 1);
    // then the clear value is not journaled,
    assert_eq!(app.journal_count("LegacyEffectsImported").await, 1);
    assert_eq!(app.journal_rows_containing(EMAIL).await, 0);
    // and both sides agree: one refund each.
    app.settle().await;
    let report = observe::report(&app.db, "legacy", &["*".to_owned()], None)
        .await
        .unwrap();
    assert_eq!((report.legacy_effects, report.unicity_effects), (1, 1));
    assert!(report.applied_twice_by_legacy.is_empty(), "{report:?}");
    assert!(report.missed_by_legacy.is_empty(), "{report:?}");
}

/// A source whose resource is the customer's email when the event names
/// one (sensitive) and the payment otherwise: a legacy log cannot say which
/// it named, so its resources are all journaled sealed, and Unicity's clear
/// payment ids are compared sealed too.
#[tokio::test]
async fn a_legacy_log_pairs_with_clear_and_sealed_resources_of_one_source() {
    const EMAIL: &str = "erin.private@example.org";
    let configuration = format!(
        "{}resource = [\"$.customer_email\", \"$.payment_id\"]\n",
        legacy_source("observe", "")
    );
    let app = spawn_app_with(&configuration).await;
    let by_payment = app
        .post_raw("legacy", refund("pay_clear", 500, Some("rr_clear")), &[])
        .await;
    assert_eq!(
        by_payment.json["decision"], "process",
        "{}",
        by_payment.json
    );
    let mut body: serde_json::Value =
        serde_json::from_slice(&refund("pay_other", 700, Some("rr_mail"))).unwrap();
    body["customer_email"] = EMAIL.into();
    let by_email = app
        .post_raw("legacy", serde_json::to_vec(&body).unwrap(), &[])
        .await;
    assert_eq!(by_email.json["decision"], "process", "{}", by_email.json);
    app.wait_applied(2).await;
    let log = format!(
        "reference,resource,amount,applied_at\n\
         lg_c1,pay_clear,500,2026-12-01T10:00:00Z\n\
         lg_c2,{EMAIL},700,2026-12-01T10:00:05Z\n"
    );
    assert_eq!(import(&app, &configuration, &log).await.unwrap(), 2);
    assert_eq!(app.journal_rows_containing(EMAIL).await, 0);
    app.settle().await;
    let settings = crate::support::app::test_settings(&app.database_url, &configuration);
    let source = settings
        .sources
        .iter()
        .find(|s| s.slug() == "legacy")
        .expect("legacy");
    let sealing = observe::Sealing::of(source, &settings.key_secret);
    let report = observe::report(&app.db, "legacy", &["*".to_owned()], Some(sealing))
        .await
        .unwrap();
    assert_eq!((report.legacy_effects, report.unicity_effects), (2, 2));
    assert!(report.applied_twice_by_legacy.is_empty(), "{report:?}");
    assert!(report.missed_by_legacy.is_empty(), "{report:?}");
    // The host's report says the same
    let dir = tempfile::tempdir().expect("temp dir");
    let mut command = crate::support::processes::cli(&app.database_url, &configuration, dir.path());
    command.args(["observe", "report", "--source", "legacy", "--json"]);
    let said: serde_json::Value =
        serde_json::from_str(&crate::support::processes::finished(command).await).expect("JSON");
    assert_eq!(
        said["applied_twice_by_legacy"],
        serde_json::json!([]),
        "{said}"
    );
    assert_eq!(said["missed_by_legacy"], serde_json::json!([]), "{said}");
}

/// A chargeback event type with a strategy of its own, so the source has a
/// second effect type beside refunds.
const CHARGEBACKS: &str = r#"
[[strategies]]
name = "norefid-chargeback-ref"
version = 1
provider = "norefid"
event_types = ["chargeback.*"]
kind = "business_reference"
strength = "strong"
horizon = "90d"
effect_type = "chargeback.open"
criticality = "critical"
description = "Payment + the chargeback's reference."
fields = [
  { name = "payment", path = "$.payment_id" },
  { name = "chargeback", path = "$.chargeback_reference" },
]
scope = [{ name = "resource_type", value = "payment" }]
discriminants = [{ name = "amount", path = "$.amount" }]

[[hierarchies]]
provider = "norefid"
event_type = "chargeback.*"
strategies = ["norefid-chargeback-ref"]
"#;

/// An enforced source observing the effect types `observed` (TOML array).
pub fn mixed_source(observed: &str, sink: &str) -> String {
    format!(
        r#"
{sink}
{CHARGEBACKS}
[[sources]]
slug = "mixed"
tenant = "acme"
provider = "norefid"
allow_unsigned = true
signature = {{ scheme = "none" }}
observe_effect_types = {observed}
"#
    )
}

/// Every `SourceModeSet` of `app`'s journal, as (effect type, mode, previous).
async fn modes_set(app: &crate::support::app::TestApp) -> Vec<(Option<String>, String, String)> {
    use unicity::domain::journal::JournalEvent;
    unicity::store::journal::without_delivery(&app.db, &["SourceModeSet"])
        .await
        .unwrap()
        .into_iter()
        .filter_map(|stored| match stored.event {
            JournalEvent::SourceModeSet(set) => Some((set.effect_type, set.mode, set.previous)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn an_observed_effect_type_is_recorded_only_while_the_same_sources_other_types_are_sent() {
    let downstream = Downstream::start(Behaviour::Apply { delay_ms: 0 }).await;
    let sink = downstream.sink_toml(2000);
    let app = spawn_app_with(&mixed_source(r#"["refund.*"]"#, &sink)).await;
    // Given a source that observes its refunds and enforces the rest, on the
    // record as such,
    assert_eq!(
        modes_set(&app).await,
        [(
            Some("refund.*".to_owned()),
            "observe".to_owned(),
            "enforce".to_owned()
        )]
    );
    // when a refund and a chargeback arrive,
    let refund_reply = app
        .post_raw("mixed", refund("pay_mx1", 500, Some("rr_mx1")), &[])
        .await;
    assert_eq!(
        refund_reply.json["decision"], "process",
        "{}",
        refund_reply.json
    );
    let chargeback = serde_json::json!({
        "type": "chargeback.created", "payment_id": "pay_mx1",
        "chargeback_reference": "cb_mx1", "amount": 500, "currency": "EUR",
    });
    let reply = app
        .post_raw("mixed", serde_json::to_vec(&chargeback).unwrap(), &[])
        .await;
    assert_eq!(reply.json["decision"], "process", "{}", reply.json);
    app.wait_applied(2).await;

    // then the chargeback is sent downstream, once, and the refund only
    // recorded.
    downstream.wait_calls(1).await;
    assert_eq!(downstream.calls().len(), 1, "{:?}", downstream.calls());
    let by = |effect_type: &str, sink: &str| {
        format!(
            "SELECT COUNT(*) FROM effects WHERE effect_type = '{effect_type}' AND sink = '{sink}'"
        )
    };
    assert_eq!(app.count(&by("refund.create", "record")).await, 1);
    assert_eq!(app.count(&by("chargeback.open", "http")).await, 1);
    // The observe report compares the observed refunds only.
    app.settle().await;
    let report = observe::report(&app.db, "mixed", &["refund.*".to_owned()], None)
        .await
        .unwrap();
    assert_eq!(report.unicity_effects, 1);

    // Restarted with refunds enforced too, the change is on the record once.
    let url = app.database_url.clone();
    let enforced = spawn_on(&url, &mixed_source("[]", &sink), None).await;
    let back = (
        Some("refund.*".to_owned()),
        "enforce".to_owned(),
        "observe".to_owned(),
    );
    assert_eq!(modes_set(&enforced).await.last(), Some(&back));
    let again = spawn_on(&url, &mixed_source("[]", &sink), None).await;
    assert_eq!(modes_set(&again).await.len(), 2);
}

#[tokio::test]
async fn a_source_observed_whole_cannot_also_name_observed_types() {
    let text = format!(
        "{}\nmode = \"observe\"\n",
        mixed_source(r#"["refund.*"]"#, "")
    );
    let refused = unicity::config::Settings::from_toml(
        &format!("{text}\n{}", crate::support::app::TEST_SOURCES),
        "127.0.0.1:0".to_owned(),
        "sqlite::memory:".to_owned(),
        |_| None,
        true,
    );
    let error = format!("{:#}", refused.expect_err("refused"));
    assert!(
        error.contains("observe_effect_types is for an enforced source"),
        "{error}"
    );
}
