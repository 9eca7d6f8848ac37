//! Observe mode: a source with `mode = "observe"` is received, decided and
//! journaled as usual, its effects recorded in the ledger and never sent to
//! a sink, while the legacy handler it is to replace still applies them. The
//! legacy handler's log is imported (`import`), and `report` shows where the
//! two disagree: what the legacy applied twice that Unicity applied once,
//! what Unicity would have applied that the legacy never did, what Unicity
//! would have sent to a person, and its collisions. The mode a source starts
//! in is journaled when it changes (`record_modes`), so the switch to
//! `enforce` is on the record.

use std::collections::BTreeMap;

use anyhow::{Context, bail};
use sea_orm::DatabaseConnection;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::engine::{SharedEngine, WriteEvent};
use crate::config::{Source, SourceMode};
use crate::domain::identity::{KeySecret, ResourcePaths, pattern};
use crate::domain::journal::{JournalEvent, LegacyEffect, LegacyEffectsImported, SourceModeSet};
use crate::domain::reservation::ReservationState;
use crate::store::{journal, observe};

/// Journals `SourceModeSet` for each source, and each of its observed
/// effect types, whose mode is not the one last recorded (`enforce` when
/// none was). Returns how many changed.
pub async fn record_modes(engine: &SharedEngine, sources: &[&Source]) -> anyhow::Result<usize> {
    let recorded = journal::without_delivery(&engine.db, &["SourceModeSet"])
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut last: Modes = BTreeMap::new();
    for stored in recorded {
        if let JournalEvent::SourceModeSet(set) = stored.event {
            last.insert((set.source, set.effect_type), set.mode);
        }
    }
    let mut changed = 0;
    for source in sources {
        for set in mode_changes(&last, source) {
            tracing::warn!(
                source = set.source.as_str(),
                effect_type = set.effect_type.as_deref().unwrap_or("*"),
                mode = set.mode.as_str(),
                "source mode changed"
            );
            let event = JournalEvent::SourceModeSet(set);
            engine
                .writer
                .submit(WriteEvent::record(None, event))
                .await?;
            changed += 1;
        }
    }
    Ok(changed)
}

/// The mode last recorded for each source (`None`) and effect type.
type Modes = BTreeMap<(String, Option<String>), String>;

/// What to journal for `source` given the modes `last` recorded: the
/// source's mode when it changed; an observed effect type the first time,
/// its previous mode the one the source last ran in; and one observed before
/// and no longer, back to the source's mode.
fn mode_changes(last: &Modes, source: &Source) -> Vec<SourceModeSet> {
    let slug = source.slug();
    let enforce = SourceMode::Enforce.as_str();
    let whole = source.mode.as_str();
    let whole_before = last
        .get(&(slug.to_owned(), None))
        .map_or(enforce, String::as_str);
    let set = |effect_type: Option<&str>, mode: &str, previous: &str| SourceModeSet {
        source: slug.to_owned(),
        mode: mode.to_owned(),
        previous: previous.to_owned(),
        effect_type: effect_type.map(str::to_owned),
    };
    let mut changes = Vec::new();
    if whole != whole_before {
        changes.push(set(None, whole, whole_before));
    }
    let observed = SourceMode::Observe.as_str();
    for effect_type in &source.observe_effect_types {
        let before = last.get(&(slug.to_owned(), Some(effect_type.clone())));
        if before.map(String::as_str) != Some(observed) {
            let previous = before.map_or(whole_before, String::as_str);
            changes.push(set(Some(effect_type), observed, previous));
        }
    }
    for ((of, effect_type), before) in last {
        let Some(effect_type) = effect_type.as_deref().filter(|_| of == slug) else {
            continue;
        };
        if !source.observe_effect_types.iter().any(|t| t == effect_type) && before != whole {
            changes.push(set(Some(effect_type), whole, before));
        }
    }
    changes
}

/// The amount among an effect's discriminants: `amount`, else the one
/// discriminant that names an amount of a kind (`amount_paid`,
/// `amount_due`, `amount_total`: Stripe's invoices and Checkout sessions).
fn amount_of(discriminants: &Value) -> Option<&Value> {
    let map = discriminants.as_object()?;
    if let Some(amount) = map.get("amount") {
        return Some(amount);
    }
    let mut kinds = map
        .iter()
        .filter(|(name, _)| name.starts_with("amount_"))
        .map(|(_, value)| value);
    match (kinds.next(), kinds.next()) {
        (Some(amount), None) => Some(amount),
        _ => None,
    }
}

/// Reads a legacy handler's log: JSON lines (one object per line) or CSV
/// with a header row (quoted cells as RFC 4180 writes them), each naming
/// `resource` and optionally `reference`, `amount` and `applied_at`; a
/// leading byte-order mark is skipped. An error names the line, never a
/// value of it.
pub fn parse_legacy(text: &str) -> anyhow::Result<Vec<LegacyEffect>> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim_start().starts_with('{') {
        return text
            .lines()
            .enumerate()
            .filter(|(_, line)| !line.trim().is_empty())
            .map(|(n, line)| {
                serde_json::from_str::<LegacyEffect>(line).map_err(|e| {
                    anyhow::anyhow!(
                        "line {}: not a legacy effect ({:?} error at column {})",
                        n + 1,
                        e.classify(),
                        e.column()
                    )
                })
            })
            .collect();
    }
    let mut reader = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .flexible(true)
        .from_reader(text.as_bytes());
    let columns: Vec<String> = reader
        .headers()
        .context("the CSV header cannot be read")?
        .iter()
        .map(str::to_lowercase)
        .collect();
    if columns.iter().all(String::is_empty) {
        return Ok(Vec::new());
    }
    let at = |name: &str| columns.iter().position(|c| c == name);
    let Some(resource) = at("resource") else {
        // Its cells are not shown: a log without a header starts with a
        // row of data.
        bail!(
            "the CSV's first line names no `resource` column ({} columns): it must be the \
             header (resource, reference, amount, applied_at)",
            columns.len()
        );
    };
    let (reference, amount, applied_at) = (at("reference"), at("amount"), at("applied_at"));
    let mut effects = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| {
            let line = e.position().map_or(0, csv::Position::line);
            anyhow::anyhow!("line {line}: not a CSV row")
        })?;
        if record.iter().all(str::is_empty) {
            continue;
        }
        let line = record.position().map_or(0, csv::Position::line);
        let cell = |i: Option<usize>| {
            i.and_then(|i| record.get(i))
                .filter(|c| !c.is_empty())
                .map(str::to_owned)
        };
        let resource = cell(Some(resource)).with_context(|| format!("line {line}: no resource"))?;
        effects.push(LegacyEffect {
            reference: cell(reference),
            resource,
            amount: cell(amount)
                .map(|a| serde_json::from_str::<Value>(&a).unwrap_or(Value::String(a))),
            applied_at: cell(applied_at),
        });
    }
    Ok(effects)
}

/// Journals the legacy effects of `source` read from `text`, in a
/// transaction of its own (`unicity observe import` opens no engine);
/// returns how many. Each resource is journaled as Unicity stores the
/// source's: sealed with `secret` when the source's resource is sensitive,
/// so the log's clear values are never kept and still compare. A file
/// already imported for the source is refused (the report would count it
/// once all the same).
pub async fn import(
    db: &DatabaseConnection,
    source: &Source,
    secret: &KeySecret,
    text: &str,
) -> anyhow::Result<usize> {
    let mut effects = parse_legacy(text)?;
    for effect in &mut effects {
        effect.resource = source.resource.stored(&effect.resource, secret);
    }
    let file_sha256 = hex::encode(Sha256::digest(text.as_bytes()));
    let slug = source.slug();
    for stored in imported(db).await? {
        if let JournalEvent::LegacyEffectsImported(batch) = stored.event
            && batch.source == slug
            && batch.file_sha256 == file_sha256
        {
            bail!(
                "this file was imported for `{slug}` already, at {}",
                stored.recorded_at.to_rfc3339()
            );
        }
    }
    let count = effects.len();
    let event = JournalEvent::LegacyEffectsImported(LegacyEffectsImported {
        source: slug.to_owned(),
        file_sha256,
        effects,
    });
    crate::store::transaction(db, async |tx| {
        tx.record(None, event, chrono::Utc::now()).await
    })
    .await?;
    Ok(count)
}

/// Every legacy log imported, oldest first.
async fn imported(db: &DatabaseConnection) -> anyhow::Result<Vec<journal::StoredEvent>> {
    journal::without_delivery(db, &["LegacyEffectsImported"])
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))
}

/// The legacy effects of `source` across every imported log. Logs may
/// overlap (an export re-run, yesterday's rows again): a row that names its
/// effect (a reference or a time) counts as many times as the log that holds
/// it most; a row that does not counts in every log.
fn legacy_effects(imported: Vec<journal::StoredEvent>, source: &str) -> Vec<LegacyEffect> {
    let mut most: BTreeMap<String, (LegacyEffect, usize)> = BTreeMap::new();
    let mut anonymous = Vec::new();
    for stored in imported {
        let JournalEvent::LegacyEffectsImported(batch) = stored.event else {
            continue;
        };
        if batch.source != source {
            continue;
        }
        let mut in_batch: BTreeMap<String, (LegacyEffect, usize)> = BTreeMap::new();
        for effect in batch.effects {
            if effect.reference.is_none() && effect.applied_at.is_none() {
                anonymous.push(effect);
                continue;
            }
            let row = serde_json::to_string(&effect).unwrap_or_default();
            in_batch.entry(row).or_insert((effect, 0)).1 += 1;
        }
        for (row, (effect, n)) in in_batch {
            let entry = most.entry(row).or_insert((effect, 0));
            entry.1 = entry.1.max(n);
        }
    }
    most.into_values()
        .flat_map(|(effect, n)| std::iter::repeat_n(effect, n))
        .chain(anonymous)
        .collect()
}

/// Effects on one resource for one amount, by each side.
#[derive(Debug, Clone, Serialize)]
pub struct Disagreement {
    pub resource: String,
    pub amount: Option<Value>,
    pub legacy: usize,
    pub unicity: usize,
    /// The first delivery of each effect Unicity would have applied.
    pub deliveries: Vec<String>,
}

/// A delivery Unicity held (for a person, or as a collision).
#[derive(Debug, Clone, Serialize)]
pub struct HeldDelivery {
    pub delivery_id: String,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct ObserveReport {
    pub source: String,
    pub legacy_effects: usize,
    pub unicity_effects: usize,
    /// The legacy handler applied more than Unicity would have: a double
    /// effect Unicity would have prevented.
    pub applied_twice_by_legacy: Vec<Disagreement>,
    /// Unicity would have applied more: an effect the legacy lost.
    pub missed_by_legacy: Vec<Disagreement>,
    /// Deliveries whose effect Unicity would have applied but that name no
    /// resource: compared with nothing, so a legacy line for the same
    /// effect reads as applied by the legacy handler alone.
    pub without_resource: Vec<String>,
    pub for_a_person: Vec<HeldDelivery>,
    pub collisions: Vec<HeldDelivery>,
}

/// How the configured source's resources are stored: a legacy log's are
/// journaled as `import` seals them, and Unicity's are compared in that
/// form (a resource read at a path that is not sensitive is stored clear,
/// its legacy twin sealed when any of the source's paths is).
pub struct Sealing<'a> {
    pub resources: &'a ResourcePaths,
    pub secret: &'a KeySecret,
}

impl<'a> Sealing<'a> {
    pub fn of(source: &'a Source, secret: &'a KeySecret) -> Self {
        Self {
            resources: &source.resource,
            secret,
        }
    }
}

/// Where Unicity's decisions for `source` and the legacy handler's log
/// disagree, per resource and amount, and the deliveries it held. `observed`
/// names the effect types the source observes (patterns, `*` all; none: all,
/// a source that observes nothing now being compared whole): effects and
/// held deliveries of the others are Unicity's alone, enforced, and left out.
/// `sealing`: the source as configured (`None`: no longer configured, its
/// resources compared as stored).
pub async fn report(
    db: &DatabaseConnection,
    source: &str,
    observed: &[String],
    sealing: Option<Sealing<'_>>,
) -> anyhow::Result<ObserveReport> {
    let legacy = legacy_effects(imported(db).await?, source);
    let legacy_effects = legacy.len();
    let mut counts: BTreeMap<(String, String), Counted> = BTreeMap::new();
    for effect in legacy {
        let amount = effect.amount.as_ref().map(normalized);
        let entry = counts
            .entry((
                effect.resource,
                amount.as_ref().map(Value::to_string).unwrap_or_default(),
            ))
            .or_insert_with(|| Counted::new(amount));
        entry.legacy += 1;
    }
    let mut unicity_effects = 0;
    let mut without_resource = Vec::new();
    for recorded in observe::recorded(db, source).await? {
        let live = ReservationState::parse(&recorded.status) != Some(ReservationState::Failed)
            && observes(observed, Some(&recorded.effect_type));
        if !live {
            continue;
        }
        let Some(resource) = recorded.resource else {
            unicity_effects += 1;
            without_resource.push(recorded.delivery_id);
            continue;
        };
        let resource = match &sealing {
            Some(sealing) => sealing.resources.comparable(&resource, sealing.secret),
            None => resource,
        };
        unicity_effects += 1;
        let amount = serde_json::from_str::<Value>(&recorded.discriminants)
            .ok()
            .and_then(|d| amount_of(&d).map(normalized));
        let entry = counts
            .entry((
                resource,
                amount.as_ref().map(Value::to_string).unwrap_or_default(),
            ))
            .or_insert_with(|| Counted::new(amount));
        entry.deliveries.push(recorded.delivery_id);
    }
    let mut applied_twice_by_legacy = Vec::new();
    let mut missed_by_legacy = Vec::new();
    for ((resource, _), counted) in counts {
        let (legacy, unicity) = (counted.legacy, counted.deliveries.len());
        let mut deliveries = counted.deliveries;
        deliveries.sort();
        let line = Disagreement {
            resource,
            amount: counted.amount,
            legacy,
            unicity,
            deliveries,
        };
        if legacy > unicity {
            applied_twice_by_legacy.push(line);
        } else if unicity > legacy {
            missed_by_legacy.push(line);
        }
    }
    let effect_types = effect_types(db).await?;
    let held = |rows: Vec<observe::Held>| {
        rows.into_iter()
            .filter(|h| {
                let effect_type = h.strategy.as_ref().and_then(|s| effect_types.get(s));
                observes(observed, effect_type.map(String::as_str))
            })
            .map(|h| HeldDelivery {
                delivery_id: h.delivery_id,
                reason: h.reason,
            })
            .collect()
    };
    Ok(ObserveReport {
        source: source.to_owned(),
        legacy_effects,
        unicity_effects,
        applied_twice_by_legacy,
        missed_by_legacy,
        without_resource: {
            without_resource.sort();
            without_resource
        },
        for_a_person: held(observe::for_a_person(db, source).await?),
        collisions: held(observe::collisions(db, source).await?),
    })
}

/// Whether `observed` (patterns; none: every type) covers `effect_type`. A
/// delivery no strategy keyed asks for no effect type: it belongs to the
/// comparison only when the whole source is observed (`*`).
fn observes(observed: &[String], effect_type: Option<&str>) -> bool {
    match effect_type {
        _ if observed.is_empty() => true,
        Some(effect_type) => observed.iter().any(|p| pattern::matches(p, effect_type)),
        None => observed.iter().any(|p| p == "*"),
    }
}

/// The effect type each strategy version asks for (`name@version` to
/// type), from the registry of every version ever used: a held delivery's
/// strategy may be an older version than the configuration's.
async fn effect_types(db: &DatabaseConnection) -> anyhow::Result<BTreeMap<String, String>> {
    Ok(crate::store::strategy_versions::all(db)
        .await?
        .into_iter()
        .filter_map(|record| {
            let effect_type = record.definition.get("effect_type")?.as_str()?.to_owned();
            Some((format!("{}@{}", record.name, record.version), effect_type))
        })
        .collect())
}

/// One resource and amount, as both sides applied it.
struct Counted {
    amount: Option<Value>,
    legacy: usize,
    /// Unicity's: one delivery per effect.
    deliveries: Vec<String>,
}

impl Counted {
    fn new(amount: Option<Value>) -> Self {
        Self {
            amount,
            legacy: 0,
            deliveries: Vec::new(),
        }
    }
}

/// An amount as both sides compare it: a number written as text is read as
/// the number, and a whole float (`15.0`) is the integer.
fn normalized(amount: &Value) -> Value {
    let number = match amount {
        Value::String(text) => serde_json::from_str::<Value>(text).unwrap_or(amount.clone()),
        other => other.clone(),
    };
    match number.as_f64() {
        Some(f) if f.fract() == 0.0 && f.abs() < 9e15 => Value::from(f as i64),
        _ => number,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_type_is_compared_when_observed_and_an_unkeyed_delivery_only_when_all_are() {
        let some = ["refund.*".to_owned()];
        let all = ["*".to_owned()];
        assert!(observes(&some, Some("refund.create")));
        assert!(!observes(&some, Some("chargeback.open")));
        assert!(!observes(&some, None));
        assert!(observes(&all, None));
        assert!(observes(&[], Some("chargeback.open")));
        assert!(observes(&[], None));
    }

    #[test]
    fn an_effects_amount_is_its_amount_or_its_one_amount_of_a_kind() {
        use serde_json::json;
        let read = |d: Value| amount_of(&d).cloned();
        assert_eq!(
            read(json!({"amount": 700, "currency": "eur"})),
            Some(json!(700))
        );
        // Stripe's invoices and Checkout sessions
        assert_eq!(
            read(json!({"amount_paid": 12000, "currency": "usd"})),
            Some(json!(12000))
        );
        assert_eq!(read(json!({"amount_total": 2000})), Some(json!(2000)));
        assert_eq!(read(json!({"amount": 5, "amount_due": 7})), Some(json!(5)));
        // Two of a kind name no one amount; none names none.
        assert_eq!(read(json!({"amount_due": 7, "amount_paid": 7})), None);
        assert_eq!(read(json!({"charge": "ch_1"})), None);
    }

    #[test]
    fn a_log_without_its_header_is_refused_without_showing_its_first_row() {
        let error = parse_legacy("pay_secret_1,4111111111111111,700\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("3 columns"), "{error}");
        assert!(!error.contains("4111"), "{error}");
        assert!(!error.contains("pay_secret_1"), "{error}");
    }

    #[test]
    fn a_legacy_log_reads_as_csv_or_json_lines_alike() {
        let csv = "reference,resource,amount,applied_at\nre_1,pay_1,700,2026-12-01T10:00:00Z\n,pay_2,15.0,\n";
        let jsonl = "{\"reference\":\"re_1\",\"resource\":\"pay_1\",\"amount\":700,\"applied_at\":\"2026-12-01T10:00:00Z\"}\n{\"resource\":\"pay_2\",\"amount\":15.0}\n";
        let (a, b) = (parse_legacy(csv).unwrap(), parse_legacy(jsonl).unwrap());
        assert_eq!(a, b);
        assert_eq!(a[0].reference.as_deref(), Some("re_1"));
        assert_eq!(a[1].reference, None);
        assert_eq!(normalized(a[1].amount.as_ref().unwrap()), Value::from(15));
        assert!(parse_legacy("reference,amount\nre_1,5\n").is_err());
    }

    #[test]
    fn quoted_cells_a_byte_order_mark_and_a_bad_line_read_as_a_spreadsheet_writes_them() {
        let csv = "\u{feff}Reference,Resource,Amount\n\"re,1\",\"pay_1\",\"1,000\"\n";
        let read = parse_legacy(csv).unwrap();
        assert_eq!(read.len(), 1);
        assert_eq!(read[0].reference.as_deref(), Some("re,1"));
        assert_eq!(read[0].resource, "pay_1");
        assert_eq!(read[0].amount, Some(Value::String("1,000".to_owned())));
        let jsonl = "\u{feff}{\"resource\":\"pay_1\"}\n";
        assert_eq!(parse_legacy(jsonl).unwrap()[0].resource, "pay_1");
        // An error names the line, never what it holds.
        let bad = parse_legacy("{\"resource\":\"pay_1\"}\n{\"resource\": 4111111111111111}\n")
            .unwrap_err()
            .to_string();
        assert!(bad.starts_with("line 2: not a legacy effect"), "{bad}");
        assert!(!bad.contains("4111111111111111"), "{bad}");
    }
}
