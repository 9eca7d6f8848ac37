//! Strategy versions against late retries, through real HTTP with an HTTP
//! sink counting refunds: a version bump must never turn a retry into a
//! second effect, and a match through an older version is judged on that
//! version's discriminating fields.

use serde_json::{Value, json};

use crate::support::downstream::{Behaviour, Downstream};
use sea_orm::ConnectionTrait;

use crate::support::app::{Reply, TestApp, fresh_database, spawn_on, test_settings};
use crate::support::counts::Counts;

/// A refund strategy version: its number, horizon, discriminating fields and
/// criticality.
pub struct Version {
    pub number: u32,
    pub horizon: &'static str,
    pub discriminants: Vec<&'static str>,
    pub retired: bool,
    pub effect: (&'static str, &'static str),
}

const REFUND: (&str, &str) = ("refund.create", "critical");
const NOTICE: (&str, &str) = ("refund.notify", "reversible");

pub fn version(number: u32, horizon: &'static str, discriminants: &[&'static str]) -> Version {
    Version {
        number,
        horizon,
        discriminants: discriminants.to_vec(),
        retired: false,
        effect: REFUND,
    }
}

/// The configuration of a server knowing `versions` of `vref`, its effects
/// sent to `downstream`.
fn config(downstream: &Downstream, versions: &[Version]) -> String {
    let mut text = format!(
        "[engine]\nsweep_interval_ms = 100\nlease_secs = 30\n\n{}\n",
        downstream.sink_toml(2000)
    );
    for v in versions {
        text.push_str(&refund_strategy("vref", v));
    }
    text.push_str(&refund_hierarchy("vref"));
    text
}

/// One version of a strong refund strategy keyed on payment + refund reference.
pub fn refund_strategy(name: &str, v: &Version) -> String {
    let discriminants: Vec<String> = v
        .discriminants
        .iter()
        .map(|d| format!("{{ name = \"{d}\", path = \"$.{d}\" }}"))
        .collect();
    format!(
        r#"
[[strategies]]
name = "{name}"
version = {}
retired = {}
provider = "norefid"
event_types = ["refund.*"]
kind = "business_reference"
strength = "strong"
horizon = "{}"
effect_type = "{}"
criticality = "{}"
fields = [
  {{ name = "payment", path = "$.payment_id" }},
  {{ name = "refund_reference", path = "$.refund_reference" }},
]
discriminants = [{}]
"#,
        v.number,
        v.retired,
        v.horizon,
        v.effect.0,
        v.effect.1,
        discriminants.join(", ")
    )
}

/// The norefid refund hierarchy with `name` alone.
pub fn refund_hierarchy(name: &str) -> String {
    format!(
        "\n[[hierarchies]]\nprovider = \"norefid\"\nevent_type = \"refund.*\"\nstrategies = [\"{name}\"]\n"
    )
}

/// One refund, sent again on every retry with a new send time (volatile).
fn refund(amount: u64) -> Vec<u8> {
    refund_of("rr_v", amount)
}

fn refund_of(reference: &str, amount: u64) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "type": "refund.created",
        "payment_id": "pay_v",
        "refund_reference": reference,
        "amount": amount,
        "currency": "EUR",
        "status": "succeeded",
        "sent_at": chrono::Utc::now().to_rfc3339(),
    }))
    .expect("json")
}

/// A database, a downstream, and servers started on them one after the
/// other as the configuration changes (each a restart).
struct Scenario {
    url: String,
    _dir: Option<tempfile::TempDir>,
    downstream: Downstream,
    app: Option<TestApp>,
    /// More configuration every server of the scenario has (a look-up).
    extra: String,
}

impl Scenario {
    async fn start(versions: &[Version]) -> Self {
        Self::start_with(versions, String::new()).await
    }

    async fn start_with(versions: &[Version], extra: String) -> Self {
        let (url, dir) = fresh_database().await;
        let downstream = Downstream::start(Behaviour::Apply { delay_ms: 0 }).await;
        let mut scenario = Self {
            url,
            _dir: dir,
            downstream,
            app: None,
            extra,
        };
        scenario.restart(versions).await;
        scenario
    }

    fn config(&self, versions: &[Version]) -> String {
        format!("{}{}", config(&self.downstream, versions), self.extra)
    }

    async fn restart(&mut self, versions: &[Version]) {
        let config = self.config(versions);
        self.app = Some(spawn_on(&self.url, &config, None).await);
    }

    fn settings(&self, versions: &[Version]) -> unicity::config::Settings {
        test_settings(&self.url, &self.config(versions))
    }

    fn app(&self) -> &TestApp {
        self.app.as_ref().expect("a running server")
    }

    /// `unicity strategies migrate vref@1` with `versions` configured.
    async fn migrate_v1(&self, versions: &[Version]) -> unicity::domain::journal::StrategyMigrated {
        migrated(self.app(), &self.url, &self.config(versions), "vref@1").await
    }

    async fn send(&self, amount: u64) -> Reply {
        self.app().post_signed("hmac", &refund(amount)).await
    }

    /// The first refund, applied downstream.
    async fn first_refund(&self) -> Reply {
        let first = self.send(1500).await;
        assert_eq!(first.json["decision"], "process", "{}", first.json);
        self.downstream.wait_calls(1).await;
        self.app().wait_applied(1).await;
        first
    }

    /// Retention removes the body of the delivery `reply` answered.
    async fn drop_body(&self, reply: &Reply) {
        let shown = self
            .app()
            .delivery(reply.json["delivery_id"].as_str().unwrap())
            .await;
        let sha = shown.json["body_ref"]["sha256"]
            .as_str()
            .unwrap()
            .to_owned();
        self.app()
            .db
            .execute_unprepared(&format!("DELETE FROM raw_bodies WHERE sha256 = '{sha}'"))
            .await
            .unwrap();
    }

    /// Past the horizon the sweeper purges the key from the fast index.
    async fn wait_for_purge(&self) {
        self.app().wait_reservations(0).await;
    }

    /// Exactly one refund reached the downstream, however long we look.
    async fn assert_one_refund(&self) {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert_eq!(self.downstream.calls().len(), 1, "a second refund was sent");
        assert_eq!(self.app().effects().await, 1);
    }
}

fn assert_ignored(reply: &Reply, reason: &str, first: &Reply, through: Option<&str>) {
    assert_eq!(reply.status, 200, "{}", reply.json);
    assert_eq!(reply.json["decision"], "ignore", "{}", reply.json);
    assert_eq!(reply.json["reason"], reason, "{}", reply.json);
    assert_eq!(
        reply.json["reference_delivery_id"],
        first.json["delivery_id"]
    );
    let expected = through.map_or(Value::Null, |s| Value::String(s.to_owned()));
    assert_eq!(reply.json["matched_strategy"], expected, "{}", reply.json);
}

#[tokio::test]
async fn a_version_bump_after_the_key_was_purged_finds_the_refund_in_the_ledger() {
    let mut s = Scenario::start(&[version(1, "2s", &["amount", "currency"])]).await;
    let first = s.first_refund().await;
    s.wait_for_purge().await;
    let late = s.send(1500).await;
    assert_ignored(&late, "late_replay_found_effect", &first, None);

    // v2 drops a discriminant; v1 stays in force.
    s.restart(&[
        version(1, "2s", &["amount", "currency"]),
        version(2, "2s", &["amount"]),
    ])
    .await;
    let later = s.send(1500).await;
    assert_eq!(later.json["strategy"], "vref@2");
    assert_ignored(&later, "late_replay_found_effect", &first, Some("vref@1"));
    s.assert_one_refund().await;
}

#[tokio::test]
async fn a_match_through_an_older_version_is_judged_on_that_versions_discriminants() {
    let mut s = Scenario::start(&[version(1, "90d", &["amount", "currency"])]).await;
    let first = s.first_refund().await;
    // v2 adds `status`, which v1 never recorded.
    s.restart(&[
        version(1, "90d", &["amount", "currency"]),
        version(2, "90d", &["amount", "currency", "status"]),
    ])
    .await;
    let retry = s.send(1500).await;
    assert_ignored(&retry, "duplicate_of_applied", &first, Some("vref@1"));
    assert!(
        retry.json["summary"]
            .as_str()
            .is_some_and(|t| t.contains("vref@1")),
        "{}",
        retry.json
    );
    // The delivery's page says the same.
    let shown = s
        .app()
        .delivery(retry.json["delivery_id"].as_str().unwrap())
        .await;
    assert_eq!(shown.json["matched_strategy"], "vref@1");

    // What v1 discriminates on is still checked: another amount collides.
    let other = s.send(1600).await;
    assert_eq!(other.json["decision"], "quarantine", "{}", other.json);
    assert_eq!(other.json["reason"], "discriminants_differ");
    let fields: Vec<&str> = other.json["differences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["amount"], "{}", other.json);
    s.assert_one_refund().await;
}

#[tokio::test]
async fn a_bump_before_the_purge_still_finds_the_refund_past_the_horizon() {
    let mut s = Scenario::start(&[version(1, "2s", &["amount", "currency"])]).await;
    let first = s.first_refund().await;
    s.restart(&[
        version(1, "2s", &["amount", "currency"]),
        version(2, "2s", &["amount", "currency", "status"]),
    ])
    .await;
    s.wait_for_purge().await;
    let late = s.send(1500).await;
    assert_ignored(&late, "late_replay_found_effect", &first, Some("vref@1"));
    s.assert_one_refund().await;
}

#[tokio::test]
async fn two_bumps_still_find_the_refund_keyed_by_the_first_version() {
    // Two restarts must fit inside the horizon before the retry: on a loaded
    // PostgreSQL run they took more than two seconds.
    const HORIZON: &str = "6s";
    let mut s = Scenario::start(&[version(1, HORIZON, &["amount", "currency"])]).await;
    let first = s.first_refund().await;
    s.restart(&[
        version(1, HORIZON, &["amount", "currency"]),
        version(2, HORIZON, &["amount"]),
    ])
    .await;
    s.restart(&[
        version(1, HORIZON, &["amount", "currency"]),
        version(2, HORIZON, &["amount"]),
        version(3, HORIZON, &["amount", "status"]),
    ])
    .await;
    let retry = s.send(1500).await;
    assert_ignored(&retry, "duplicate_of_applied", &first, Some("vref@1"));
    s.wait_for_purge().await;
    let late = s.send(1500).await;
    assert_ignored(&late, "late_replay_found_effect", &first, Some("vref@1"));
    s.assert_one_refund().await;
}

#[tokio::test]
async fn a_reversible_effect_past_the_horizon_after_a_bump_is_never_resent_unflagged() {
    let reversible = |number, discriminants| Version {
        effect: NOTICE,
        ..version(number, "2s", discriminants)
    };
    let mut s = Scenario::start(&[reversible(1, &["amount"])]).await;
    let first = s.first_refund().await;
    s.wait_for_purge().await;
    s.restart(&[
        reversible(1, &["amount"]),
        reversible(2, &["amount", "status"]),
    ])
    .await;
    let late = s.send(1500).await;
    // The ledger still knows the notice: found, not sent again. A second
    // effect would be allowed here only flagged for correction.
    assert_ignored(&late, "late_replay_found_effect", &first, Some("vref@1"));
    s.assert_one_refund().await;
}

#[tokio::test]
async fn retiring_a_version_first_migrates_its_keys_and_a_purged_body_asks_for_approval() {
    let v1 = || version(1, "2s", &["amount", "currency"]);
    let v2 = || version(2, "2s", &["amount"]);
    let mut s = Scenario::start(&[v1()]).await;
    let kept = s.first_refund().await;
    let gone = s.app().post_signed("hmac", &refund_of("rr_w", 700)).await;
    assert_eq!(gone.json["decision"], "process", "{}", gone.json);
    s.downstream.wait_calls(2).await;
    s.wait_for_purge().await;
    // Retention drops the second refund's body.
    s.drop_body(&gone).await;

    // Retiring v1 before its keys were migrated is refused.
    let retired = || {
        vec![
            Version {
                retired: true,
                ..v1()
            },
            v2(),
        ]
    };
    let refused = unicity::startup::Application::build(s.settings(&retired())).await;
    let error = format!(
        "{:#}",
        refused.err().expect("retiring unmigrated is refused")
    );
    assert!(error.contains("strategies migrate vref@1"), "{error}");

    let done = s.migrate_v1(&[v1(), v2()]).await;
    assert_eq!((done.migrated, done.unmigrated), (1, 1));
    assert_eq!(s.app().journal_count("KeyMigrated").await, 2);

    s.restart(&retired()).await;
    // The kept refund is found under its migrated key...
    let late = s.send(1500).await;
    assert_eq!(late.json["strategy"], "vref@2");
    assert_ignored(&late, "late_replay_found_effect", &kept, Some("vref@1"));
    // ...the one whose body is gone needs an approval, never a second refund.
    let unproven = s.app().post_signed("hmac", &refund_of("rr_w", 700)).await;
    assert_eq!(unproven.json["decision"], "reconcile", "{}", unproven.json);
    assert_eq!(unproven.json["reason"], "evidence_purged");
    // A new refund under v2 is processed as usual.
    let fresh = s.app().post_signed("hmac", &refund_of("rr_x", 900)).await;
    assert_eq!(fresh.json["decision"], "process", "{}", fresh.json);
    s.downstream.wait_calls(3).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(s.downstream.calls().len(), 3, "a refund was sent twice");
}

/// A strategy added above one that already keyed deliveries: `refund-ref`
/// now comes first, `refund-event` (strong) stays below it.
const EVENT_KEYED: &str = r#"
[[strategies]]
name = "refund-event"
version = 1
provider = "norefid"
event_types = ["refund.*"]
kind = "provider_event_id"
strength = "strong"
horizon = "30d"
effect_type = "refund.create"
criticality = "critical"
fields = [{ name = "event_id", path = "$.event_id" }]
discriminants = [{ name = "amount", path = "$.amount" }]
"#;

const REFERENCE_KEYED: &str = r#"
[[strategies]]
name = "refund-ref"
version = 1
provider = "norefid"
event_types = ["refund.*"]
kind = "business_reference"
strength = "strong"
horizon = "30d"
effect_type = "refund.create"
criticality = "critical"
fields = [
  { name = "payment", path = "$.payment_id" },
  { name = "refund_reference", path = "$.refund_reference" },
]
discriminants = [{ name = "amount", path = "$.amount" }]
"#;

fn hierarchy(strategies: &str) -> String {
    format!(
        "\n[[hierarchies]]\nprovider = \"norefid\"\nevent_type = \"refund.*\"\nstrategies = [{strategies}]\n"
    )
}

#[tokio::test]
async fn a_strategy_added_above_another_in_the_hierarchy_never_reprocesses_what_the_other_keyed() {
    let before = format!("{EVENT_KEYED}{}", hierarchy("\"refund-event\""));
    let after = format!(
        "{EVENT_KEYED}{REFERENCE_KEYED}{}",
        hierarchy("\"refund-ref\", \"refund-event\"")
    );
    retried_after_a_change(&before, &after, "refund-event@1").await;
}

#[tokio::test]
async fn a_version_with_an_unsettled_effect_is_not_retired_and_its_plan_writes_nothing() {
    let v1 = || version(1, "1h", &["amount"]);
    let v2 = || version(2, "1h", &["amount", "currency"]);
    let (url, _dir) = fresh_database().await;
    // Given v1 keyed a refund whose downstream applied it but never answered
    // in time: its outcome is unknown,
    let downstream = Downstream::start(Behaviour::ApplyThenHang).await;
    let app = spawn_on(&url, &config(&downstream, &[v1()]), None).await;
    let sent = app.post_signed("hmac", &refund(1500)).await;
    assert_eq!(sent.json["strategy"], "vref@1", "{}", sent.json);
    app.wait_journal("EffectOutcomeUnknown", 1).await;
    let settings = test_settings(&url, &config(&downstream, &[v1(), v2()]));
    let plan = || {
        unicity::services::strategies::plan(
            &app.db,
            &settings.catalog,
            &settings.sources,
            &settings.key_secret,
            "vref@1",
        )
    };
    // when retiring v1 is planned, the plan names its key, re-derived under
    // v2, and the reservation not settled,
    let planned = plan().await.expect("a plan");
    assert_eq!(planned.to, "vref@2");
    assert_eq!(planned.keys.len(), 1);
    assert!(
        planned.keys[0]
            .to_key
            .as_deref()
            .is_some_and(|k| k.starts_with("vref@2:"))
    );
    assert_eq!(planned.unsettled, 1);
    // and planning wrote nothing;
    assert_eq!(app.journal_count("KeyMigrated").await, 0);
    // then the migration is refused while the outcome is unknown.
    let refused = unicity::services::strategies::migrate(
        &app.db,
        &settings.catalog,
        &settings.sources,
        &settings.key_secret,
        "vref@1",
    )
    .await
    .expect_err("refused");
    assert!(refused.to_string().contains("not settled"), "{refused}");
    assert_eq!(app.journal_count("KeyMigrated").await, 0);
    assert_eq!(app.journal_count("StrategyMigrated").await, 0);
}

#[tokio::test]
async fn two_retirements_of_one_version_at_once_retire_it_once() {
    // Given v1 keyed a refund, applied and settled,
    let v1 = || version(1, "1h", &["amount"]);
    let v2 = || version(2, "1h", &["amount", "currency"]);
    let s = Scenario::start(&[v1()]).await;
    s.first_refund().await;
    let settings = s.settings(&[v1(), v2()]);
    let plan = || {
        unicity::services::strategies::plan(
            &s.app().db,
            &settings.catalog,
            &settings.sources,
            &settings.key_secret,
            "vref@1",
        )
    };
    // when two engineers retire it at once, both plans read before either
    // is applied,
    let (first, second) = (plan().await.expect("a plan"), plan().await.expect("a plan"));
    let (one, other) = tokio::join!(
        unicity::services::strategies::apply(&s.app().db, first),
        unicity::services::strategies::apply(&s.app().db, second),
    );

    // then one retires it and the other is told it already is,
    let refused = match (one, other) {
        (Ok(_), Err(refused)) | (Err(refused), Ok(_)) => refused.to_string(),
        (one, other) => panic!("exactly one retirement takes: {one:?}, {other:?}"),
    };
    assert!(refused.contains("already"), "{refused}");
    // and the journal says so once.
    assert_eq!(s.app().journal_count("StrategyMigrated").await, 1);
    assert_eq!(s.app().journal_count("KeyMigrated").await, 1);
}

#[tokio::test]
async fn a_reservation_taken_after_the_plan_makes_the_retirement_refuse() {
    let v1 = || version(1, "1h", &["amount"]);
    let v2 = || version(2, "1h", &["amount", "currency"]);
    let (url, _dir) = fresh_database().await;
    let downstream = Downstream::start(Behaviour::ApplyThenHang).await;
    let app = spawn_on(&url, &config(&downstream, &[v1()]), None).await;
    // Given retiring v1 was planned while nothing of it was unsettled,
    let settings = test_settings(&url, &config(&downstream, &[v1(), v2()]));
    let planned = unicity::services::strategies::plan(
        &app.db,
        &settings.catalog,
        &settings.sources,
        &settings.key_secret,
        "vref@1",
    )
    .await
    .expect("a plan");
    assert_eq!(planned.unsettled, 0);
    // when v1 then keys a refund whose outcome stays unknown,
    let sent = app.post_signed("hmac", &refund(1500)).await;
    assert_eq!(sent.json["strategy"], "vref@1", "{}", sent.json);
    app.wait_journal("EffectOutcomeUnknown", 1).await;

    // then applying the plan is refused, and nothing is journaled.
    let refused = unicity::services::strategies::apply(&app.db, planned)
        .await
        .expect_err("refused");
    assert!(refused.to_string().contains("not settled"), "{refused}");
    assert_eq!(app.journal_count("KeyMigrated").await, 0);
    assert_eq!(app.journal_count("StrategyMigrated").await, 0);
}

#[tokio::test]
async fn an_effect_keyed_and_settled_after_the_plan_makes_the_retirement_refuse() {
    let v1 = || version(1, "1h", &["amount"]);
    let v2 = || version(2, "1h", &["amount", "currency"]);
    let s = Scenario::start(&[v1()]).await;
    // Given retiring v1 was planned before it keyed anything,
    let settings = s.settings(&[v1(), v2()]);
    let planned = unicity::services::strategies::plan(
        &s.app().db,
        &settings.catalog,
        &settings.sources,
        &settings.key_secret,
        "vref@1",
    )
    .await
    .expect("a plan");
    assert!(planned.keys.is_empty());
    // when v1 then keys a refund, applied and settled before the plan is,
    s.first_refund().await;

    // then the plan, which would leave that refund's key unmigrated, is
    // refused, and nothing is journaled.
    let refused = unicity::services::strategies::apply(&s.app().db, planned)
        .await
        .expect_err("refused");
    assert!(
        refused.to_string().contains("plan its retirement again"),
        "{refused}"
    );
    assert_eq!(s.app().journal_count("KeyMigrated").await, 0);
    assert_eq!(s.app().journal_count("StrategyMigrated").await, 0);
}

/// A retry that waits on a reservation taken under an older version's key
/// (a server of the version before still holds it) is woken when that
/// reservation settles — its deferral is filed under the key it waits on,
/// not under its own newest key, which nothing settling ever names.
#[tokio::test]
async fn a_retry_waiting_on_an_older_versions_reservation_is_woken_when_it_settles() {
    let (url, _dir) = fresh_database().await;
    let downstream = Downstream::start(Behaviour::Apply { delay_ms: 1500 }).await;
    // Sweeps far apart: only a settlement's wake-up re-decides in time.
    let slow = |versions: &[Version]| {
        config(&downstream, versions)
            .replace("sweep_interval_ms = 100", "sweep_interval_ms = 60000")
    };
    let v1 = version(1, "1h", &["amount"]);
    let v2 = version(2, "1h", &["amount", "currency"]);
    let old = spawn_on(&url, &slow(&[version(1, "1h", &["amount"])]), None).await;
    let new = spawn_on(&url, &slow(&[v1, v2]), None).await;
    let first = old.post_signed("hmac", &refund(1500)).await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    let retry = new.post_signed("hmac", &refund(1500)).await;
    assert_eq!(retry.json["decision"], "defer", "{}", retry.json);
    // Woken by the settlement, well before any sweep
    downstream.wait_calls(1).await;
    new.wait_decided("defer", 0).await;
    new.wait_decided("ignore", 1).await;
    assert_eq!(downstream.calls().len(), 1);
}

/// A refund whose body retention removed before its version was retired is
/// held for approval when the provider retries it; the provider's API,
/// asked, lists that one refund. The look-up counts the effect the retired
/// version keyed, as the decision found it: never paid a second time.
#[tokio::test]
async fn a_look_up_after_a_retirement_counts_the_refund_the_retired_version_keyed() {
    let provider = crate::support::provider::ProviderApi::start(
        200,
        crate::lookups::refunds_of(&[("re_w", "pay_v", 700)]),
    )
    .await;
    let lookup = provider.config_with("/payments/{payment_id}/refunds", "amount = \"amount\"\n");
    let v1 = || version(1, "2s", &["amount"]);
    let v2 = || version(2, "2s", &["amount"]);
    let mut s = Scenario::start_with(&[v1()], lookup).await;
    // Given a refund keyed by v1, applied, its key purged and its body gone
    let gone = s.app().post_signed("hmac", &refund_of("rr_w", 700)).await;
    assert_eq!(gone.json["decision"], "process", "{}", gone.json);
    s.downstream.wait_calls(1).await;
    s.app().wait_applied(1).await;
    s.wait_for_purge().await;
    s.drop_body(&gone).await;
    // and v1 retired for v2, its unmigrated key left in the ledger
    s.migrate_v1(&[v1(), v2()]).await;
    s.restart(&[
        Version {
            retired: true,
            ..v1()
        },
        v2(),
    ])
    .await;
    // When the provider retries it and its API is asked
    let retry = s.app().post_signed("hmac", &refund_of("rr_w", 700)).await;
    assert_eq!(retry.json["reason"], "evidence_purged", "{}", retry.json);
    let case_id = retry.json["case_id"].as_str().expect("a case").to_owned();
    s.app().wait_journal("LookupPerformed", 1).await;
    // Then the one refund it lists is counted as the one already made: the
    // case is not settled as a second operation (with no effect linked to
    // confirm it a duplicate of, it stays for a person)
    let case = s.app().get(&format!("/api/cases/{case_id}")).await.json;
    assert_eq!(case["status"], "open", "{case}");
    assert_eq!(
        s.app()
            .journal_count_containing("LookupPerformed", "process_as_distinct")
            .await,
        0
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(s.downstream.calls().len(), 1, "a second refund was sent");
}

/// A version edited in place under a new number, its old table gone: the
/// refund the old one keyed would be found by nothing, and its late retry
/// processed again. The server refuses to start, naming the version.
#[tokio::test]
async fn a_version_that_keyed_a_refund_cannot_leave_the_configuration() {
    let mut s = Scenario::start(&[version(1, "30d", &["amount"])]).await;
    s.first_refund().await;
    let refused =
        unicity::startup::Application::build(s.settings(&[version(2, "30d", &["amount"])])).await;
    let error = format!("{:#}", refused.err().expect("the start is refused"));
    assert!(error.contains("vref@1"), "{error}");
    assert!(error.contains("retired = true"), "{error}");
    // Kept, retired once its keys are migrated, it starts and finds it
    s.migrate_v1(&[
        version(1, "30d", &["amount"]),
        version(2, "30d", &["amount"]),
    ])
    .await;
    s.restart(&[
        Version {
            retired: true,
            ..version(1, "30d", &["amount"])
        },
        version(2, "30d", &["amount"]),
    ])
    .await;
    let late = s.send(1500).await;
    assert_eq!(late.json["decision"], "ignore", "{}", late.json);
    s.assert_one_refund().await;
}

/// `refund-event` version 2: the same event id, judged on the currency too.
fn event_keyed_v2() -> String {
    EVENT_KEYED.replace("version = 1", "version = 2").replace(
        r#"discriminants = [{ name = "amount", path = "$.amount" }]"#,
        r#"discriminants = [{ name = "amount", path = "$.amount" }, { name = "currency", path = "$.currency" }]"#,
    )
}

/// `refund-ref` version 2: keyed on a refund line too, which deliveries
/// sent before it existed do not carry.
fn reference_keyed_v2() -> String {
    REFERENCE_KEYED
        .replace("version = 1", "version = 2")
        .replace(
            r#"{ name = "refund_reference", path = "$.refund_reference" },"#,
            r#"{ name = "refund_reference", path = "$.refund_reference" },
  { name = "line", path = "$.refund_line" },"#,
        )
}

/// A refund keyed under `before`, then retried once the server runs
/// `after`: the retry must be ignored through `through`, and one refund
/// sent in all.
async fn retried_after_a_change(before: &str, after: &str, through: &str) {
    let downstream = Downstream::start(Behaviour::Apply { delay_ms: 0 }).await;
    let (url, _dir) = fresh_database().await;
    let sink = downstream.sink_toml(2000);
    let app = spawn_on(&url, &format!("{sink}{before}"), None).await;
    let body = serde_json::to_vec(&json!({
        "type": "refund.created",
        "event_id": "ev_2",
        "payment_id": "pay_c",
        "refund_reference": "rr_c",
        "amount": 500,
        "currency": "EUR",
    }))
    .unwrap();
    let first = app.post_signed("hmac", &body).await;
    assert_eq!(first.json["strategy"], through, "{}", first.json);
    downstream.wait_calls(1).await;
    app.wait_applied(1).await;

    let upgraded = spawn_on(&url, &format!("{sink}{after}"), None).await;
    let retry = upgraded.post_signed("hmac", &body).await;
    assert_ignored(&retry, "duplicate_of_applied", &first, Some(through));
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(
        downstream.calls().len(),
        1,
        "refunded twice after the change"
    );
}

#[tokio::test]
async fn a_strategy_added_above_one_bumped_since_still_finds_what_its_older_version_keyed() {
    let before = format!("{EVENT_KEYED}{}", hierarchy("\"refund-event\""));
    let after = format!(
        "{EVENT_KEYED}{}{REFERENCE_KEYED}{}",
        event_keyed_v2(),
        hierarchy("\"refund-ref\", \"refund-event\"")
    );
    retried_after_a_change(&before, &after, "refund-event@1").await;
}

#[tokio::test]
async fn a_version_that_no_longer_keys_a_retry_still_finds_what_the_older_one_keyed() {
    let fallback = "\"refund-ref\", \"norefid-refund-fingerprint\"";
    let before = format!("{REFERENCE_KEYED}{}", hierarchy(fallback));
    let after = format!(
        "{REFERENCE_KEYED}{}{}",
        reference_keyed_v2(),
        hierarchy(fallback)
    );
    retried_after_a_change(&before, &after, "refund-ref@1").await;
}

/// `vpay` version 1: medium, one refund per payment and amount.
const PAYMENT_KEYED_MEDIUM: &str = r#"
[[strategies]]
name = "vpay"
version = 1
provider = "norefid"
event_types = ["refund.*"]
kind = "semantic"
strength = "medium"
horizon = "30d"
effect_type = "refund.create"
criticality = "critical"
fields = [
  { name = "payment", path = "$.payment_id" },
  { name = "amount", path = "$.amount" },
  { name = "currency", path = "$.currency" },
]
"#;

/// A server knowing only the medium `vpay@1`, which keyed and applied one
/// refund of 500 under `reference`: its downstream, database and app.
async fn refunded_by_medium_v1(
    reference: &str,
) -> (Downstream, String, Option<tempfile::TempDir>, TestApp) {
    let downstream = Downstream::start(Behaviour::Apply { delay_ms: 0 }).await;
    let (url, dir) = fresh_database().await;
    let sink = downstream.sink_toml(2000);
    let before = format!("{sink}{PAYMENT_KEYED_MEDIUM}{}", hierarchy("\"vpay\""));
    let app = spawn_on(&url, &before, None).await;
    let first = app.post_signed("hmac", &refund_of(reference, 500)).await;
    assert_eq!(first.json["strategy"], "vpay@1", "{}", first.json);
    downstream.wait_calls(1).await;
    app.wait_applied(1).await;
    (downstream, url, dir, app)
}

/// A second refund of the same payment and amount, with a reference of
/// its own, matches the first only through the medium version 1: on money
/// that match waits for the provider or a person, as version 1 would have
/// judged it, and is never ignored as version 2's strong key would be.
#[tokio::test]
async fn a_match_through_an_older_medium_version_is_judged_medium_not_as_the_newer_strong_one() {
    let (downstream, url, _dir, _app) = refunded_by_medium_v1("rr_m1").await;
    let sink = downstream.sink_toml(2000);

    let after = format!(
        "{sink}{PAYMENT_KEYED_MEDIUM}{}{}",
        refund_strategy("vpay", &version(2, "30d", &["amount"])),
        hierarchy("\"vpay\"")
    );
    let upgraded = spawn_on(&url, &after, None).await;
    let second = upgraded.post_signed("hmac", &refund_of("rr_m2", 500)).await;
    assert_eq!(second.json["strategy"], "vpay@2", "{}", second.json);
    assert_eq!(second.json["matched_strategy"], "vpay@1", "{}", second.json);
    assert_eq!(second.json["decision"], "reconcile", "{}", second.json);
    assert_eq!(
        second.json["reason"], "medium_match_critical",
        "{}",
        second.json
    );
}

/// A refund keyed by `vref@1`; then `refund-ref` is added above `vref`, and
/// `vref@1` retired: its migration carries the refund to the key the
/// hierarchy now gives it, `refund-ref`'s, which the retry must find.
#[tokio::test]
async fn a_version_retired_after_a_strategy_was_added_above_it_still_finds_what_it_keyed() {
    let v1 = || version(1, "30d", &["amount", "currency"]);
    let v2 = || version(2, "30d", &["amount"]);
    let mut s = Scenario::start(&[v1()]).await;
    let first = s.first_refund().await;
    assert_eq!(first.json["strategy"], "vref@1", "{}", first.json);

    s.extra = format!("{REFERENCE_KEYED}{}", hierarchy("\"refund-ref\", \"vref\""));
    let done = s.migrate_v1(&[v1(), v2()]).await;
    assert_eq!((done.migrated, done.unmigrated), (1, 0));
    let retired = Version {
        retired: true,
        ..v1()
    };
    s.restart(&[retired, v2()]).await;

    let late = s.send(1500).await;
    assert_eq!(late.json["strategy"], "refund-ref@1", "{}", late.json);
    assert_eq!(late.json["decision"], "ignore", "{}", late.json);
    s.assert_one_refund().await;
}

/// As above with a medium version retired: the key its migration carried
/// the refund to is an exact key in force, whatever the retired version's
/// strength.
#[tokio::test]
async fn a_medium_version_retired_after_a_strategy_was_added_above_it_still_finds_what_it_keyed() {
    let (downstream, url, _dir, app) = refunded_by_medium_v1("rr_r").await;
    let sink = downstream.sink_toml(2000);

    let v2 = refund_strategy("vpay", &version(2, "30d", &["amount"]));
    let above = hierarchy("\"refund-ref\", \"vpay\"");
    let migrating = format!("{sink}{PAYMENT_KEYED_MEDIUM}{v2}{REFERENCE_KEYED}{above}");
    let done = migrated(&app, &url, &migrating, "vpay@1").await;
    assert_eq!((done.migrated, done.unmigrated), (1, 0));
    let retired_v1 = PAYMENT_KEYED_MEDIUM.replace("version = 1", "version = 1\nretired = true");
    let retired = format!("{sink}{retired_v1}{v2}{REFERENCE_KEYED}{above}");
    let upgraded = spawn_on(&url, &retired, None).await;

    let late = upgraded.post_signed("hmac", &refund_of("rr_r", 500)).await;
    assert_eq!(late.json["strategy"], "refund-ref@1", "{}", late.json);
    assert_eq!(late.json["decision"], "ignore", "{}", late.json);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(
        downstream.calls().len(),
        1,
        "refunded twice after the change"
    );
}

/// `vref@1` retired and its keys migrated to `vref@2`; then a strategy
/// judged on other fields is added above `vref`. The retry, keyed by that
/// one, finds the migrated key among its keys in force and is judged on
/// `vref@2`'s fields, as migrated: a retry, not a collision.
#[tokio::test]
async fn a_key_migrated_before_a_strategy_was_added_above_is_judged_on_its_own_versions_fields() {
    let v1 = || version(1, "30d", &["amount", "currency"]);
    let v2 = || version(2, "30d", &["amount"]);
    let mut s = Scenario::start(&[v1()]).await;
    let first = s.first_refund().await;
    let done = s.migrate_v1(&[v1(), v2()]).await;
    assert_eq!((done.migrated, done.unmigrated), (1, 0));

    let judged_on_status = REFERENCE_KEYED.replace(
        r#"discriminants = [{ name = "amount", path = "$.amount" }]"#,
        r#"discriminants = [{ name = "state", path = "$.status" }]"#,
    );
    assert_ne!(judged_on_status, REFERENCE_KEYED);
    s.extra = format!(
        "{judged_on_status}{}",
        hierarchy("\"refund-ref\", \"vref\"")
    );
    let retired = Version {
        retired: true,
        ..v1()
    };
    s.restart(&[retired, v2()]).await;

    let late = s.send(1500).await;
    assert_eq!(late.json["strategy"], "refund-ref@1", "{}", late.json);
    assert_ignored(&late, "late_replay_found_effect", &first, Some("vref@1"));
    s.assert_one_refund().await;
}

/// `unicity strategies migrate strategy` on `app`'s database `url`, with
/// `config` configured.
async fn migrated(
    app: &TestApp,
    url: &str,
    config: &str,
    strategy: &str,
) -> unicity::domain::journal::StrategyMigrated {
    let settings = test_settings(url, config);
    unicity::services::strategies::migrate(
        &app.db,
        &settings.catalog,
        &settings.sources,
        &settings.key_secret,
        strategy,
    )
    .await
    .expect("migration runs")
}

/// `mref`, version `number`, keyed on payment + reference and, when
/// `merchant`, on the merchant's reference too; retired when `retired`.
fn merchant_keyed(number: u32, merchant: bool, retired: bool) -> String {
    let reference = "  { name = \"refund_reference\", path = \"$.refund_reference\" },\n";
    let fields = match merchant {
        true => format!("{reference}  {{ name = \"merchant_ref\", path = \"$.merchant_ref\" }},\n"),
        false => reference.to_owned(),
    };
    REFERENCE_KEYED
        .replace(
            "name = \"refund-ref\"\nversion = 1",
            &format!("name = \"mref\"\nversion = {number}\nretired = {retired}"),
        )
        .replace(reference, &fields)
}

#[tokio::test]
async fn a_retry_keyed_only_by_the_version_its_key_was_migrated_to_finds_the_refund() {
    let (url, _dir) = fresh_database().await;
    let downstream = Downstream::start(Behaviour::Apply { delay_ms: 0 }).await;
    let config = |strategies: String| {
        format!(
            "{}\n{strategies}{}",
            downstream.sink_toml(2000),
            hierarchy("\"mref\"")
        )
    };
    let app = spawn_on(&url, &config(merchant_keyed(1, true, false)), None).await;
    let mut body = json!({
        "type": "refund.created", "payment_id": "pay_m", "refund_reference": "rr_m",
        "merchant_ref": "m_1", "amount": 1500, "currency": "EUR",
    });
    let first = app
        .post_signed("hmac", &serde_json::to_vec(&body).unwrap())
        .await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    downstream.wait_calls(1).await;
    app.wait_applied(1).await;
    // v2 no longer reads the merchant's reference; v1's keys are migrated
    // to v2's, then v1 is retired.
    let both = config(merchant_keyed(1, true, false) + &merchant_keyed(2, false, false));
    let done = migrated(&app, &url, &both, "mref@1").await;
    assert_eq!((done.migrated, done.unmigrated), (1, 0));
    drop(app);
    let retired = config(merchant_keyed(1, true, true) + &merchant_keyed(2, false, false));
    let app = spawn_on(&url, &retired, None).await;
    // The provider's retry lacks the merchant's reference: v1 cannot key
    // it, v2 keys it under the key v1's effect was carried to.
    body.as_object_mut().unwrap().remove("merchant_ref");
    let retry = app
        .post_signed("hmac", &serde_json::to_vec(&body).unwrap())
        .await;
    assert_eq!(retry.json["strategy"], "mref@2", "{}", retry.json);
    assert_eq!(retry.json["decision"], "ignore", "{}", retry.json);
    assert_eq!(retry.json["reason"], "late_replay_found_effect");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(downstream.calls().len(), 1, "a second refund was sent");
}

/// As above, the retry without the currency only the retired version read:
/// no retired version keys it, and its own strategy, added above, has one
/// version; the key the migration carried the refund to still finds it.
#[tokio::test]
async fn a_retry_no_retired_version_keys_finds_the_refund_migrated_to_a_strategy_above() {
    let (downstream, url, _dir, app) = refunded_by_medium_v1("rr_c").await;
    let sink = downstream.sink_toml(2000);
    // Medium as v1, without the currency: not a strong key below.
    let v2 = PAYMENT_KEYED_MEDIUM
        .replace("version = 1", "version = 2")
        .replace("  { name = \"currency\", path = \"$.currency\" },\n", "");
    let above = hierarchy("\"refund-ref\", \"vpay\"");
    let migrating = format!("{sink}{PAYMENT_KEYED_MEDIUM}{v2}{REFERENCE_KEYED}{above}");
    let done = migrated(&app, &url, &migrating, "vpay@1").await;
    assert_eq!((done.migrated, done.unmigrated), (1, 0));
    let retired_v1 = PAYMENT_KEYED_MEDIUM.replace("version = 1", "version = 1\nretired = true");
    let upgraded = spawn_on(
        &url,
        &format!("{sink}{retired_v1}{v2}{REFERENCE_KEYED}{above}"),
        None,
    )
    .await;
    let mut retry: Value = serde_json::from_slice(&refund_of("rr_c", 500)).unwrap();
    retry.as_object_mut().unwrap().remove("currency");
    let late = upgraded
        .post_signed("hmac", &serde_json::to_vec(&retry).unwrap())
        .await;
    assert_eq!(late.json["strategy"], "refund-ref@1", "{}", late.json);
    assert_ne!(late.json["decision"], "process", "{}", late.json);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(
        downstream.calls().len(),
        1,
        "refunded twice after the change"
    );
}
