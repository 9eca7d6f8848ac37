//! Prometheus metrics: what Unicity counts as it works (deliveries, decisions,
//! effects, look-ups) and how long it takes, in a recorder of each engine's
//! own — never the process-global one, so that two engines in one process
//! (the tests, the benchmark) count apart — rendered in the text exposition
//! format. Gauges read from the projections at scrape time (open cases, the
//! headline share, breakers) are rendered by `services::watch` beside these.
//!
//! Labels are bounded: each names a configured source, provider, strategy
//! version or effect type, or one of a fixed set of codes. No id, key,
//! amount, payment reference or payload-controlled text is ever a label.

use metrics::{Counter, Histogram, Key, Label, Level, Metadata, Recorder, Unit};
use metrics_exporter_prometheus::{
    Matcher, PrometheusBuilder, PrometheusHandle, PrometheusRecorder,
};

/// Every metric this module records: name, kind, unit and help text.
pub const RECEIVED: &str = "unicity_deliveries_received_total";
pub const REFUSED: &str = "unicity_deliveries_refused_total";
pub const DECISIONS: &str = "unicity_decisions_total";
pub const EFFECTS: &str = "unicity_effects_total";
pub const LOOKUPS: &str = "unicity_lookups_total";
pub const DECISION_SECONDS: &str = "unicity_decision_seconds";
pub const BATCH_SIZE: &str = "unicity_group_commit_batch_size";
pub const BATCH_PHASE_SECONDS: &str = "unicity_group_commit_phase_seconds";
pub const DOWNSTREAM_SECONDS: &str = "unicity_downstream_seconds";
pub const LOOKUP_SECONDS: &str = "unicity_lookup_seconds";

const DESCRIBED: &[(&str, Option<Unit>, &str)] = &[
    (
        RECEIVED,
        None,
        "Deliveries that reached a source (signed or not), before any check.",
    ),
    (
        REFUSED,
        None,
        "Deliveries refused before a decision, by refusal code (signature, size, rate, storage...).",
    ),
    (
        DECISIONS,
        None,
        "Decisions durably journaled, by decision, reason, key strength, strategy version, effect type and whether the delivery was a provider's transport retry; re-decisions of deferred deliveries count again.",
    ),
    (
        EFFECTS,
        None,
        "Effect attempts settled, by effect type and outcome (applied, failed, unknown).",
    ),
    (
        LOOKUPS,
        None,
        "Questions put to a provider's API (kind=provider) or a downstream's status URL (kind=status), by verdict.",
    ),
    (
        DECISION_SECONDS,
        Some(Unit::Seconds),
        "From a delivery's arrival to its durable decision (the answer follows at once).",
    ),
    (
        BATCH_SIZE,
        Some(Unit::Count),
        "Jobs committed together by a group-commit writer.",
    ),
    (
        BATCH_PHASE_SECONDS,
        Some(Unit::Seconds),
        "One phase of a group-commit batch: begin (its transaction), own (its keys locked and read, PostgreSQL), jobs (decisions), rows (its rows written), commit (until durable).",
    ),
    (
        DOWNSTREAM_SECONDS,
        Some(Unit::Seconds),
        "One call to the downstream service that applies an effect.",
    ),
    (
        LOOKUP_SECONDS,
        Some(Unit::Seconds),
        "One question to a provider's API, answer read.",
    ),
];

const LATENCY_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];
const BATCH_BUCKETS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0];
/// A batch's phases take from microseconds to a slow disk's fsync.
const PHASE_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
];

const METADATA: Metadata<'static> = Metadata::new("unicity", Level::INFO, None);

/// One engine's recorder.
pub struct Metrics {
    recorder: PrometheusRecorder,
    handle: PrometheusHandle,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// What one decision is counted by.
#[derive(Debug, Clone, Copy)]
pub struct DecisionLabels<'a> {
    pub source: &'a str,
    pub provider: &'a str,
    /// `name@version`, or `none` for a delivery without a business key.
    pub strategy: &'a str,
    pub effect_type: &'a str,
    pub strength: &'a str,
    pub decision: &'a str,
    pub reason: &'a str,
    /// Whether the transport layer had seen the delivery before (the same
    /// delivery id or raw body): a provider's retry.
    pub retry: bool,
}

impl Metrics {
    pub fn new() -> Self {
        let recorder = buckets(PrometheusBuilder::new()).build_recorder();
        for (name, unit, help) in DESCRIBED {
            let described = metrics::SharedString::const_str(help);
            match name {
                n if n.ends_with("_total") => {
                    recorder.describe_counter((*n).into(), *unit, described)
                }
                n => recorder.describe_histogram((*n).into(), *unit, described),
            }
        }
        let handle = recorder.handle();
        Self { recorder, handle }
    }

    fn counter(&self, name: &'static str, labels: Vec<Label>) -> Counter {
        self.recorder
            .register_counter(&Key::from_parts(name, labels), &METADATA)
    }

    fn histogram(&self, name: &'static str, labels: Vec<Label>) -> Histogram {
        self.recorder
            .register_histogram(&Key::from_parts(name, labels), &METADATA)
    }

    pub fn received(&self, source: &str, provider: &str) {
        self.counter(
            RECEIVED,
            labels(&[("source", source), ("provider", provider)]),
        )
        .increment(1);
    }

    pub fn refused(&self, source: &str, code: &str) {
        self.counter(REFUSED, labels(&[("source", source), ("code", code)]))
            .increment(1);
    }

    pub fn decided(&self, d: DecisionLabels<'_>) {
        let labels = labels(&[
            ("source", d.source),
            ("provider", d.provider),
            ("strategy", d.strategy),
            ("effect_type", d.effect_type),
            ("strength", d.strength),
            ("decision", d.decision),
            ("reason", d.reason),
            ("transport_retry", if d.retry { "true" } else { "false" }),
        ]);
        self.counter(DECISIONS, labels).increment(1);
    }

    /// From arrival to durable decision.
    pub fn decision_latency(&self, seconds: f64) {
        self.histogram(DECISION_SECONDS, Vec::new()).record(seconds);
    }

    pub fn effect_settled(&self, effect_type: &str, outcome: &str) {
        let labels = labels(&[("effect_type", effect_type), ("outcome", outcome)]);
        self.counter(EFFECTS, labels).increment(1);
    }

    pub fn downstream_latency(&self, effect_type: &str, seconds: f64) {
        self.histogram(DOWNSTREAM_SECONDS, labels(&[("effect_type", effect_type)]))
            .record(seconds);
    }

    /// A question asked: `kind` is `provider` or `status`.
    pub fn looked_up(&self, kind: &str, verdict: &str) {
        self.counter(LOOKUPS, labels(&[("kind", kind), ("verdict", verdict)]))
            .increment(1);
    }

    pub fn lookup_latency(&self, provider: &str, seconds: f64) {
        self.histogram(LOOKUP_SECONDS, labels(&[("provider", provider)]))
            .record(seconds);
    }

    /// The histogram a group-commit writer records its batch sizes in.
    pub fn batch_sizes(&self) -> Histogram {
        self.histogram(BATCH_SIZE, Vec::new())
    }

    /// The histogram a group-commit writer records one of its batches'
    /// phases in (`store::writer::PHASES`).
    pub fn batch_phase(&self, phase: &'static str) -> Histogram {
        self.histogram(BATCH_PHASE_SECONDS, labels(&[("phase", phase)]))
    }

    /// Folds recorded samples into the histograms' buckets; run now and
    /// then (see `tasks`) so that samples do not pile up between scrapes.
    pub fn upkeep(&self) {
        self.handle.run_upkeep();
    }

    /// Everything recorded, in the text exposition format.
    pub fn render(&self) -> String {
        self.handle.render()
    }
}

fn buckets(builder: PrometheusBuilder) -> PrometheusBuilder {
    let latency = [DECISION_SECONDS, DOWNSTREAM_SECONDS, LOOKUP_SECONDS];
    let with_latency = latency.into_iter().fold(builder, |b, name| {
        b.set_buckets_for_metric(Matcher::Full(name.to_owned()), LATENCY_BUCKETS)
            .unwrap_or_else(|_| unreachable!("the buckets are not empty"))
    });
    with_latency
        .set_buckets_for_metric(Matcher::Full(BATCH_SIZE.to_owned()), BATCH_BUCKETS)
        .and_then(|b| {
            b.set_buckets_for_metric(Matcher::Full(BATCH_PHASE_SECONDS.to_owned()), PHASE_BUCKETS)
        })
        .unwrap_or_else(|_| unreachable!("the buckets are not empty"))
}

fn labels(pairs: &[(&'static str, &str)]) -> Vec<Label> {
    pairs
        .iter()
        .map(|(name, value)| Label::new(*name, (*value).to_owned()))
        .collect()
}

/// Gauges read at scrape time, rendered in the same format: a recorder made
/// for one scrape, so that a series whose value is gone is gone too.
pub struct Gauges {
    recorder: PrometheusRecorder,
}

impl Default for Gauges {
    fn default() -> Self {
        Self::new()
    }
}

impl Gauges {
    pub fn new() -> Self {
        Self {
            recorder: PrometheusBuilder::new().build_recorder(),
        }
    }

    /// Describes the gauge `name` (its `# HELP` line).
    pub fn describe(&self, name: &'static str, help: &'static str) {
        self.recorder
            .describe_gauge(name.into(), None, metrics::SharedString::const_str(help));
    }

    pub fn set(&self, name: &'static str, pairs: &[(&'static str, &str)], value: f64) {
        self.recorder
            .register_gauge(&Key::from_parts(name, labels(pairs)), &METADATA)
            .set(value);
    }

    pub fn render(&self) -> String {
        self.recorder.handle().render()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_engines_count_apart_and_a_counter_renders_with_its_labels() {
        let one = Metrics::new();
        let other = Metrics::new();
        one.refused("stripe", "signature");
        one.refused("stripe", "signature");
        let text = one.render();
        assert!(
            text.contains(
                r#"unicity_deliveries_refused_total{source="stripe",code="signature"} 2"#
            ),
            "{text}"
        );
        assert!(!other.render().contains("unicity_deliveries_refused_total{"));
    }

    #[test]
    fn a_label_value_is_escaped_not_allowed_to_break_the_line() {
        let gauges = Gauges::new();
        gauges.set("unicity_test", &[("source", "a\"b\nc")], 1.0);
        let text = gauges.render();
        assert!(
            text.contains(r#"unicity_test{source="a\"b\nc"} 1"#),
            "{text}"
        );
    }
}
