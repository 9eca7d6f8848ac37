//! The reconciliation report of a simulation, and its verdict.
//!
//! Per payment (each item of the scenario has its own): N refunds the
//! provider made, A effects the downstream applied for it (distinct
//! Idempotency-Keys), P cases about it still open — on one of its deliveries,
//! or a missing effect for one of its refunds. Then:
//! * **applied twice**: A > N;
//! * **left for a person**: min(N − A, P) when A < N — a person has a case
//!   in front of them that says so;
//! * **never applied**: N − A − P when positive — lost, and nobody knows.
//!
//! The run fails if any refund was applied twice or never.

use std::collections::BTreeMap;
use std::fmt;

use super::Answer;
use super::scenario::{Item, Kind};
use super::servers::Applied;
use crate::domain::journal::{DiscrepancyKind, ReconciliationRan};
use crate::domain::reconcile::case_id;
use crate::store::entities::case;

pub(super) struct Inputs<'a> {
    /// The provider whose missing effects count as cases about a refund.
    pub provider: &'a str,
    pub items: &'a [Item],
    pub answers: &'a [Vec<Answer>],
    pub applied: Vec<Applied>,
    pub downstream_calls: u64,
    /// The provider's API: (answered, refused during its outage).
    pub api: (u64, u64),
    pub operations: usize,
    pub cases: &'a [case::Model],
    /// Unicity's latest decision per delivery, counted.
    pub decided: &'a [(Option<String>, i64)],
    pub runs: &'a [ReconciliationRan],
    pub settled: bool,
}

/// Figures of one kind of item.
#[derive(Debug, Default, Clone, Copy)]
pub struct Line {
    pub items: usize,
    pub operations: usize,
    pub applied: usize,
    pub left: usize,
    pub twice: usize,
    pub never: usize,
}

#[derive(Debug)]
pub struct Report {
    pub operations: usize,
    pub deliveries: usize,
    /// What Unicity answered at once, per decision.
    pub decisions: BTreeMap<String, usize>,
    /// Unicity's decisions once settled (deferred deliveries re-decided).
    pub decided: BTreeMap<String, i64>,
    pub applied: usize,
    pub downstream_calls: u64,
    pub api: (u64, u64),
    /// Cases opened during the run: (reason, "resolved by look-up" | "resolved" | "open") → count.
    pub cases: BTreeMap<(String, &'static str), usize>,
    pub reconciliation: Vec<String>,
    pub kinds: BTreeMap<Kind, Line>,
    pub total: Line,
    pub settled: bool,
}

impl Report {
    /// True when no refund was applied twice or never.
    pub fn passed(&self) -> bool {
        self.total.twice == 0 && self.total.never == 0
    }
}

pub(super) fn build(input: Inputs<'_>) -> Report {
    let mut decisions = BTreeMap::new();
    for answer in input.answers.iter().flatten() {
        *decisions.entry(answer.decision.clone()).or_insert(0) += 1;
    }
    let mut cases = BTreeMap::new();
    for c in input.cases {
        let state = match (c.status.as_str(), c.resolved_by.as_deref()) {
            ("open", _) => "left for a person",
            (_, Some("look-up")) => "resolved by look-up",
            _ => "resolved",
        };
        *cases.entry((c.reason.clone(), state)).or_insert(0) += 1;
    }
    let open = |id: &str| {
        input
            .cases
            .iter()
            .any(|c| c.case_id == id && c.status == "open")
    };
    let mut kinds: BTreeMap<Kind, Line> = BTreeMap::new();
    let mut total = Line::default();
    for (item, answers) in input.items.iter().zip(input.answers) {
        let made = item.refunds.len();
        let applied = input
            .applied
            .iter()
            .filter(|a| a.payment == item.payment)
            .count();
        let mut waiting: Vec<String> = answers.iter().filter_map(|a| a.case_id.clone()).collect();
        for refund in &item.refunds {
            let subject = format!("{}/{refund}", input.provider);
            let id = case_id(DiscrepancyKind::MissingEffect.as_str(), &subject);
            waiting.push(id.to_string());
        }
        waiting.sort();
        waiting.dedup();
        let person = waiting.iter().filter(|id| open(id)).count();
        let short = made.saturating_sub(applied);
        let line = kinds.entry(item.kind).or_default();
        for l in [line, &mut total] {
            l.items += 1;
            l.operations += made;
            l.applied += applied;
            l.twice += applied.saturating_sub(made);
            l.left += short.min(person);
            l.never += short.saturating_sub(person);
        }
    }
    Report {
        operations: input.operations,
        deliveries: input.answers.iter().map(Vec::len).sum(),
        decisions,
        decided: input
            .decided
            .iter()
            .map(|(d, n)| (d.clone().unwrap_or_else(|| "none".to_owned()), *n))
            .collect(),
        applied: input.applied.len(),
        downstream_calls: input.downstream_calls,
        api: input.api,
        cases,
        reconciliation: input
            .runs
            .iter()
            .map(|r| match &r.error {
                Some(e) => format!("{}: not reconciled: {e}", r.provider),
                None => format!(
                    "{}: {} refunds listed, {} effects applied, {} matched, {} missing, {} unexpected",
                    r.provider, r.expected, r.applied, r.matched, r.missing, r.unexpected
                ),
            })
            .collect(),
        kinds,
        total,
        settled: input.settled,
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "reconciliation report")?;
        writeln!(f, "  refunds made by the provider   {}", self.operations)?;
        writeln!(f, "  deliveries sent                {}", self.deliveries)?;
        for (decision, n) in &self.decisions {
            let settled = self.decided.get(decision).copied().unwrap_or(0);
            writeln!(
                f,
                "    answered {decision:<12} {n:>5}   once settled {settled}"
            )?;
        }
        writeln!(
            f,
            "  duplicates ignored             {}",
            self.decided.get("ignore").copied().unwrap_or(0)
        )?;
        writeln!(
            f,
            "  effects applied (downstream)   {} ({} calls)",
            self.applied, self.downstream_calls
        )?;
        writeln!(
            f,
            "  provider API questions         {} answered, {} refused during its outage",
            self.api.0, self.api.1
        )?;
        writeln!(f, "  cases opened")?;
        for ((reason, state), n) in &self.cases {
            writeln!(f, "    {reason:<28} {state:<22} {n}")?;
        }
        for line in &self.reconciliation {
            writeln!(f, "  reconciliation: {line}")?;
        }
        writeln!(
            f,
            "  {:<20} {:>5} {:>7} {:>7} {:>6} {:>6} {:>6}",
            "kind", "items", "refunds", "applied", "person", "twice", "never"
        )?;
        let row = |f: &mut fmt::Formatter<'_>, name: &str, l: &Line| {
            writeln!(
                f,
                "  {name:<20} {:>5} {:>7} {:>7} {:>6} {:>6} {:>6}",
                l.items, l.operations, l.applied, l.left, l.twice, l.never
            )
        };
        for (kind, line) in &self.kinds {
            row(f, kind.name(), line)?;
        }
        row(f, "total", &self.total)?;
        if !self.settled {
            writeln!(f, "  (Unicity had not settled when the wait ran out)")?;
        }
        let verdict = if self.passed() {
            "PASS: every refund applied once or left for a person"
        } else {
            "FAIL: a refund was applied twice or never"
        };
        writeln!(f, "{verdict}")
    }
}
