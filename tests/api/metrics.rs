//! `/metrics`: read by a real Prometheus text parser, for operators only on
//! the main listener, counting what was decided, refused and applied, with
//! gauges read from the projections, and labels that stay bounded however
//! many payments go through.

use prometheus_parse::{Sample, Scrape, Value};

use crate::support::app::{TestApp, refund, spawn_app, spawn_app_with};
use crate::support::counts::Counts;
use crate::support::downstream::{Behaviour, Downstream};

/// A scrape with the app's admin token, parsed.
async fn scrape(app: &TestApp) -> Scrape {
    let response = app
        .client
        .get(format!("{}/metrics", app.address))
        .send()
        .await
        .expect("scraped");
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    let text = response.text().await.expect("text");
    Scrape::parse(text.lines().map(|line| Ok(line.to_owned()))).expect("the exposition format")
}

/// The samples of `metric` whose labels include `labels`.
fn samples<'s>(scrape: &'s Scrape, metric: &str, labels: &[(&str, &str)]) -> Vec<&'s Sample> {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == metric)
        .filter(|s| labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .collect()
}

/// The sum of `metric` over the samples whose labels include `labels`.
fn value(scrape: &Scrape, metric: &str, labels: &[(&str, &str)]) -> f64 {
    samples(scrape, metric, labels)
        .iter()
        .map(|s| match &s.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
            Value::Histogram(buckets) => buckets.iter().map(|b| b.count).fold(0.0, f64::max),
            Value::Summary(_) => 0.0,
        })
        .sum()
}

#[tokio::test]
async fn metrics_are_refused_to_anonymous_callers_on_the_main_listener() {
    let app = spawn_app().await;
    let anonymous = reqwest::Client::new()
        .get(format!("{}/metrics", app.address))
        .send()
        .await
        .expect("answered");
    assert_eq!(anonymous.status(), 401);
    let body: serde_json::Value = anonymous.json().await.expect("json");
    assert_eq!(body["code"], "unauthenticated");
    // A support token (the least role) may read them.
    let token = crate::support::app::issue_token(&app.db, unicity::auth::Role::Support).await;
    let support = reqwest::Client::new()
        .get(format!("{}/metrics", app.address))
        .bearer_auth(token)
        .send()
        .await
        .expect("answered");
    assert_eq!(support.status(), 200);
}

#[tokio::test]
async fn counters_move_with_each_decision_refusal_and_effect_and_gauges_follow_the_projections() {
    let app = spawn_app().await;
    // Given a strong-keyed refund and its provider retry (the same bytes),
    let body = refund("pay_m1", 1500, Some("rr_m1"));
    let first = app.post_signed("hmac", &body).await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    app.wait_applied(1).await;
    let retry = app.post_signed("hmac", &body).await;
    assert_eq!(
        retry.json["reason"], "duplicate_of_applied",
        "{}",
        retry.json
    );
    // two identical refunds without a reference (the second held for a person),
    let weak = app.post_signed("hmac", &refund("pay_m2", 700, None)).await;
    assert_eq!(weak.json["strength"], "weak", "{}", weak.json);
    app.wait_applied(2).await;
    let twin = app.post_signed("hmac", &refund("pay_m2", 700, None)).await;
    assert_eq!(twin.json["reason"], "weak_match_critical", "{}", twin.json);
    // and a forged delivery,
    let forged = app
        .post_signed_with(
            "hmac",
            "not-the-secret",
            "m",
            chrono::Utc::now().timestamp(),
            b"{}",
        )
        .await;
    assert_eq!(forged.status, 401, "{}", forged.json);
    let code = forged.json["code"].as_str().expect("code").to_owned();

    // when the metrics are scraped,
    app.settle().await;
    let m = scrape(&app).await;
    let hmac = ("source", "hmac");
    let strong = first.json["strategy"].as_str().unwrap();
    let fingerprint = weak.json["strategy"].as_str().unwrap();
    // then the forged one is no delivery of the last day's figures,
    assert_eq!(
        value(&m, "unicity_deliveries_24h", &[("strategy", "none")]),
        0.0,
        "{:?}",
        samples(&m, "unicity_deliveries_24h", &[])
    );
    // every delivery that reached the source is counted, the forged
    // one as refused by its code,
    assert_eq!(value(&m, "unicity_deliveries_received_total", &[hmac]), 5.0);
    assert_eq!(
        value(
            &m,
            "unicity_deliveries_refused_total",
            &[hmac, ("code", &code)]
        ),
        1.0
    );
    // each decision by its labels,
    let decided = |labels: &[(&str, &str)]| value(&m, "unicity_decisions_total", labels);
    let all = format!("{:?}", samples(&m, "unicity_decisions_total", &[]));
    assert_eq!(decided(&[hmac]), 4.0);
    assert_eq!(
        decided(&[
            hmac,
            ("provider", "norefid"),
            ("strategy", strong),
            ("effect_type", "refund.create"),
            ("strength", "strong"),
            ("decision", "process"),
            ("reason", "new_key"),
        ]),
        1.0,
        "{all}"
    );
    // the provider's retry as one, the first delivery as none,
    assert_eq!(
        decided(&[("strategy", strong), ("transport_retry", "true")]),
        1.0
    );
    assert_eq!(
        decided(&[("strategy", strong), ("transport_retry", "false")]),
        1.0
    );
    assert_eq!(
        decided(&[
            ("strategy", strong),
            ("decision", "ignore"),
            ("reason", "duplicate_of_applied")
        ]),
        1.0
    );
    assert_eq!(
        decided(&[
            ("strategy", fingerprint),
            ("strength", "weak"),
            ("decision", "reconcile")
        ]),
        1.0
    );
    // each effect by its outcome, each durable decision timed,
    assert_eq!(
        value(
            &m,
            "unicity_effects_total",
            &[("effect_type", "refund.create"), ("outcome", "applied")]
        ),
        2.0
    );
    assert_eq!(value(&m, "unicity_decision_seconds_count", &[]), 4.0);
    let batches = value(&m, "unicity_group_commit_batch_size_count", &[]);
    assert!(batches >= 1.0);
    // each batch's phases timed (a batch still running has not timed all),
    for phase in ["begin", "own", "jobs", "rows", "commit"] {
        let timed = |what| value(&m, what, &[("phase", phase)]);
        let count = timed("unicity_group_commit_phase_seconds_count");
        assert!(
            count >= 1.0 && count <= batches,
            "{phase}: {count} of {batches}"
        );
        assert!(timed("unicity_group_commit_phase_seconds_sum") >= 0.0);
    }
    assert!(
        value(
            &m,
            "unicity_group_commit_phase_seconds_sum",
            &[("phase", "commit")]
        ) > 0.0
    );
    // the held twin is an open case, less than an hour old,
    assert_eq!(
        value(
            &m,
            "unicity_open_cases",
            &[("reason", "weak_match_critical"), ("age", "under_1h")]
        ),
        1.0
    );
    // the headline share is 1 for the strong strategy, 0 for the weak one,
    let ratio = |strategy| {
        value(
            &m,
            "unicity_strong_or_existing_ratio",
            &[("strategy", strategy)],
        )
    };
    assert_eq!(ratio(strong), 1.0);
    assert_eq!(ratio(fingerprint), 0.0);
    // and every delivery is accounted for: two effects, a duplicate, a case,
    // nothing undocumented.
    let accounted = |what| {
        value(
            &m,
            "unicity_deliveries_accounted_24h",
            &[("accounted", what)],
        )
    };
    assert_eq!(accounted("effect"), 2.0);
    // The scrape read the deliveries read model caught up, and says so.
    assert_eq!(value(&m, "unicity_read_model_behind_rows", &[]), 0.0);
    assert_eq!(value(&m, "unicity_read_model_lag_seconds", &[]), 0.0);
    assert_eq!(accounted("duplicate"), 1.0);
    assert_eq!(accounted("held"), 1.0);
    assert_eq!(
        samples(
            &m,
            "unicity_deliveries_accounted_24h",
            &[("accounted", "undocumented")]
        )
        .len(),
        2,
        "the undocumented rest is shown for each strategy, at 0"
    );
    assert_eq!(accounted("undocumented"), 0.0);
    assert!(
        m.docs.contains_key("unicity_decisions_total"),
        "{:?}",
        m.docs
    );
}

/// A batch the provider sends again byte for byte is its retry: each of
/// its items, ignored, counts as a transport retry, as a single delivery
/// sent again does (the alert on duplicates without retries reads it).
#[tokio::test]
async fn the_items_of_a_batch_sent_again_count_as_the_providers_retries() {
    let (app, downstream) = crate::batches::start().await;
    let first = crate::batches::deliver_ids(&app, &["EV_R1", "EV_R2"]).await;
    assert_eq!(first.status, 202, "{}", first.json);
    crate::batches::settle(&downstream, 2).await;
    let again = crate::batches::deliver_ids(&app, &["EV_R1", "EV_R2"]).await;
    assert_eq!(again.json["decision"], "ignore", "{}", again.json);
    assert_eq!(ignored_by_retry(&app).await, (2.0, 0.0));
}

/// Deliveries ignored, those that came as a provider's retry and the others.
async fn ignored_by_retry(app: &TestApp) -> (f64, f64) {
    let m = scrape(app).await;
    let ignored = |retry: &str| {
        value(
            &m,
            "unicity_decisions_total",
            &[("decision", "ignore"), ("transport_retry", retry)],
        )
    };
    (ignored("true"), ignored("false"))
}

/// A refund the downstream refused was processed and has no effect to show:
/// the provider was answered, it sends nothing again, and no case says so.
/// It counts as undocumented, which the critical alert watches.
#[tokio::test]
async fn a_refund_the_downstream_refused_counts_as_undocumented() {
    let downstream = Downstream::start(Behaviour::Refuse(422)).await;
    let app = spawn_app_with(&downstream.sink_toml(2000)).await;
    let sent = app
        .post_signed("hmac", &refund("pay_refused", 700, None))
        .await;
    assert_eq!(sent.json["decision"], "process", "{}", sent.json);
    app.wait_journal("EffectFailed", 1).await;
    let m = scrape(&app).await;
    let accounted = |what: &str| {
        value(
            &m,
            "unicity_deliveries_accounted_24h",
            &[("accounted", what)],
        )
    };
    assert_eq!((accounted("undocumented"), accounted("effect")), (1.0, 0.0));
}

/// A provider's retry that came while the first delivery's effect was in
/// flight waits, then is ignored once it applied: still the provider's
/// retry, counted as one.
#[tokio::test]
async fn a_retry_deferred_while_its_effect_was_in_flight_counts_as_a_retry_once_decided() {
    let downstream = Downstream::start(Behaviour::Apply { delay_ms: 1_500 }).await;
    let app = spawn_app_with(&format!(
        "[engine]\nsweep_interval_ms = 100\n\n{}",
        downstream.sink_toml(5_000)
    ))
    .await;
    let body = refund("pay_waits", 700, Some("rr_waits"));
    let first = app.post_signed("hmac", &body).await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    downstream.wait_calls(1).await;
    let again = app.post_signed("hmac", &body).await;
    assert_eq!(again.json["decision"], "defer", "{}", again.json);
    // When it is decided again, once the effect applied
    let started = std::time::Instant::now();
    loop {
        let counted = ignored_by_retry(&app).await;
        if counted != (0.0, 0.0) {
            assert_eq!(counted, (1.0, 0.0));
            break;
        }
        assert!(started.elapsed().as_secs() < 20, "never decided again");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_settled_case_moves_from_open_to_settled_by_a_person() {
    let app = spawn_app().await;
    app.post_signed("hmac", &refund("pay_m3", 900, None)).await;
    app.wait_applied(1).await;
    let twin = app.post_signed("hmac", &refund("pay_m3", 900, None)).await;
    let case_id = twin.json["case_id"].as_str().expect("a case").to_owned();
    let before = scrape(&app).await;
    assert_eq!(value(&before, "unicity_open_cases", &[]), 1.0);
    let resolved = app
        .resolve(
            &case_id,
            serde_json::json!({
                "resolution": "confirm_duplicate",
                "note": "the provider retried",
            }),
        )
        .await;
    assert_eq!(resolved.status, 200, "{}", resolved.json);
    let after = scrape(&app).await;
    assert_eq!(value(&after, "unicity_open_cases", &[]), 0.0);
    assert_eq!(
        value(
            &after,
            "unicity_settled_cases",
            &[
                ("reason", "weak_match_critical"),
                ("resolution", "confirm_duplicate"),
                ("by", "person"),
            ]
        ),
        1.0
    );
}

#[tokio::test]
async fn the_number_of_series_stays_bounded_however_many_payments_go_through() {
    let app = spawn_app().await;
    let send = async |from: u64, to: u64| {
        for n in from..to {
            let payment = format!("pay_card_{n}");
            let reference = format!("rr_card_{n}");
            let reply = app
                .post_signed("hmac", &refund(&payment, 100 + n, Some(&reference)))
                .await;
            assert_eq!(reply.json["decision"], "process", "{}", reply.json);
        }
    };
    send(0, 3).await;
    app.wait_applied(3).await;
    let few = scrape(&app).await;
    send(3, 40).await;
    app.wait_applied(40).await;
    let many = scrape(&app).await;
    let series = |s: &Scrape| {
        let mut names: Vec<String> = s
            .samples
            .iter()
            .map(|x| {
                format!("{}{:?}", x.metric, {
                    let mut labels: Vec<_> = x.labels.iter().collect();
                    labels.sort();
                    labels
                })
            })
            .collect();
        names.sort();
        names
    };
    assert_eq!(series(&few), series(&many), "no series per payment");
    for sample in &many.samples {
        for (name, label) in sample.labels.iter() {
            assert!(
                !label.contains("pay_card") && !label.contains("rr_card"),
                "{}: {name}={label}",
                sample.metric
            );
        }
    }
}

/// The alert rules shipped in the repository are ones Prometheus accepts,
/// and they name only metrics a scrape shows.
#[tokio::test]
async fn the_shipped_alert_rules_pass_promtool_and_name_metrics_that_exist() {
    let rules = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/prometheus/unicity-rules.yml"
    );
    let text = std::fs::read_to_string(rules).expect("the rules file");
    // Every metric a rule names is one Unicity exports.
    let app = spawn_app().await;
    app.post_signed("hmac", &refund("pay_rule", 100, None))
        .await;
    app.wait_applied(1).await;
    let held = app
        .post_signed("hmac", &refund("pay_rule", 100, None))
        .await;
    assert_eq!(held.json["decision"], "reconcile", "{}", held.json);
    let exported = [
        "unicity_collision_rate",
        "unicity_breaker_threshold",
        "unicity_breaker_window_deliveries",
        "unicity_breaker_tripped",
        "unicity_decisions_total",
        "unicity_deliveries_accounted_24h",
        "unicity_open_cases",
        "unicity_effects_total",
        "unicity_read_model_lag_seconds",
    ];
    let named: std::collections::BTreeSet<&str> = text
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|word| word.starts_with("unicity_"))
        .collect();
    for name in &named {
        assert!(exported.contains(name), "{name} is not an exported metric");
    }
    let help = scrape(&app).await.docs;
    for name in exported {
        assert!(help.contains_key(name), "{name} has no HELP line: {help:?}");
    }
    // promtool, where installed (CI installs it), accepts the file, and its
    // rules fire as their tests say on the series of two processes.
    let tests = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/prometheus/unicity-rules.test.yml"
    );
    promtool(&["check", "rules", rules]);
    promtool(&["test", "rules", tests]);
}

/// Runs promtool with `args`, which must succeed; where it is not installed
/// the check is skipped, except in CI.
fn promtool(args: &[&str]) {
    match std::process::Command::new("promtool").args(args).output() {
        Ok(output) => assert!(
            output.status.success(),
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
        Err(_) if std::env::var_os("CI").is_some() => panic!("promtool is missing in CI"),
        Err(_) => eprintln!("promtool not installed: the rules were not checked by it"),
    }
}
