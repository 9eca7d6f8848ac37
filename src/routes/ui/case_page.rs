//! The page of one case (`templates/case.html`), built from the masked
//! `CaseView`: both deliveries side by side, the figures and the field diff,
//! the effects, the history, the notices a post comes back with. Every
//! value shown came from a webhook or from it: the template escapes all of
//! them (no `|safe`).

use askama::Template;
use chrono::Utc;
use serde_json::Value;

use super::format::{Nav, ShortId, Stamp, filters, json_text};
use crate::services::case_view::{CaseEvent, CaseView, EffectState, Figure};
use crate::services::deliveries::DeliveryView;

/// One delivery of the side-by-side view.
pub struct Side {
    pub id: ShortId,
    pub link: String,
    pub received: Stamp,
    pub source: String,
    pub provider: String,
    pub summary: String,
    pub headers: Vec<(String, String)>,
    /// The masked body, pretty-printed (empty when unparseable or redacted).
    pub body: String,
}

/// One discriminating value of both sides (amount, currency, ...).
pub struct FigureLine {
    pub name: String,
    pub delivery: String,
    pub reference: String,
    pub differs: bool,
}

/// One differing field.
pub struct ChangeLine {
    pub path: String,
    pub change: &'static str,
    pub old: String,
    pub new: String,
    pub discriminating: bool,
    pub volatile: Option<String>,
}

pub struct EffectLine {
    pub id: ShortId,
    pub status: String,
    pub key: ShortId,
    pub provider_ref: String,
    pub downstream_ref: String,
}

/// One step of the case's history.
pub struct HistoryLine {
    pub at: Stamp,
    pub what: String,
    pub by: String,
    pub note: String,
    pub details: Vec<String>,
}

/// `templates/case.html`.
#[derive(Template)]
#[template(path = "case.html")]
pub struct CasePage {
    pub nav: Nav,
    pub id: String,
    pub short: ShortId,
    pub open: bool,
    pub reason: String,
    pub action: String,
    pub critical: bool,
    pub opened: Stamp,
    pub resolved: Option<Stamp>,
    pub resolution: String,
    pub resolved_by: String,
    pub strategy: String,
    pub strength: String,
    pub effect_type: String,
    pub key: Option<ShortId>,
    pub figures: Vec<FigureLine>,
    /// This delivery, then the reference delivery (when there is one).
    /// (title, the delivery, what to say when there is none).
    pub sides: Vec<(&'static str, Option<Side>, &'static str)>,
    pub operation: Option<OperationLine>,
    pub has_reference: bool,
    pub changes: Vec<ChangeLine>,
    pub existing_effect: Option<EffectLine>,
    pub applied_effect: Option<EffectLine>,
    pub history: Vec<HistoryLine>,
    pub notice: Option<&'static str>,
    /// The resolution form's one-time token, when the operator may resolve.
    pub form_token: Option<String>,
    /// Why the operator sees no resolution form on an open case.
    pub cannot_resolve: Option<&'static str>,
    pub can_comment: bool,
    pub can_look_up: bool,
    pub fixture: Option<String>,
    /// Who the case was given to.
    pub assignee: Option<String>,
    /// Enabled operators' names, to give an open case to.
    pub assignable: Vec<String>,
    /// A reconciliation finding: the form offers closing it with a reason.
    pub close_only: bool,
    /// A missing effect: the form also offers recording it as made by hand.
    pub missing_effect: bool,
    /// The delivery looks like an operation made by hand: processed as
    /// distinct, it must cite the operation it is.
    pub cite_required: bool,
}

const NOTICES: [(&str, &str); 28] = [
    ("resolved", "The case is resolved."),
    (
        "case_already_resolved",
        "This case was already resolved: nothing more was applied. Its resolution is below.",
    ),
    (
        "used",
        "This form was already submitted: nothing more was applied. The case as it stands is below.",
    ),
    ("commented", "Your comment is in the case's history."),
    ("assigned", "The case is assigned as shown."),
    (
        "no_such_operator",
        "No enabled operator has that name: the case was not assigned.",
    ),
    (
        "assign_resolved",
        "A resolved case keeps who had it: it was not assigned.",
    ),
    ("comment_empty", "A comment needs some text."),
    (
        "asked_settled",
        "The provider was asked and its answer settled the case: the resolution is below.",
    ),
    (
        "asked_unsettled",
        "The provider was asked; its answer does not settle the case, which stays for a person. Why is in the history.",
    ),
    (
        "not_asked_breaker",
        "The provider was not asked: its circuit breaker is open after repeated failures. The case stays open and is asked again once the breaker closes.",
    ),
    (
        "close_only",
        "This case is a reconciliation finding: it can only be closed, with the reason it is settled (a missing effect applied outside Unicity: as made by hand).",
    ),
    (
        "operation_consumed",
        "The provider operation cited already justified another effect: nothing was applied. Cite another operation, or confirm the duplicate.",
    ),
    (
        "cite_an_operation",
        "Another case under this key was already processed as distinct without citing the provider's operation: nothing was applied. Cite the operation this delivery is (its id in the provider's dashboard), or confirm the duplicate.",
    ),
    (
        "not_asked",
        "There was nothing to ask the provider about this case.",
    ),
    ("note_required", "A resolution needs a note saying why."),
    ("unknown_resolution", "Choose how to resolve the case."),
    (
        "nothing_to_apply",
        "This delivery has no business key or body to apply an effect with: it cannot be processed as distinct.",
    ),
    (
        "outcome_unknown",
        "The existing effect's outcome is unknown: verify it before applying another.",
    ),
    (
        "nothing_to_confirm",
        "There is no existing effect to confirm this delivery as a duplicate of.",
    ),
    (
        "not_a_missing_effect",
        "Only a missing effect's operation can be recorded as made by hand.",
    ),
    (
        "cite_the_operation",
        "This delivery looks like an operation made by hand: it is processed as distinct only citing the provider's operation it is (its id in the provider's dashboard). Nothing was applied.",
    ),
    (
        "operation_paid",
        "An effect that may have moved money already stands for this operation, or has its payment, amount and currency and was made since: its late webhook may have paid it (or more effects look like it than are read). Nothing was recorded: check it, then close it with a reason.",
    ),
    (
        "read_model_behind",
        "The deliveries read model is behind the journal: whether the operation was paid meanwhile cannot be checked yet. Nothing was recorded; try again in a moment.",
    ),
    (
        "look_alike_arrived",
        "A delivery that looks like this operation arrived while it was being recorded as made by hand: its late webhook may have been applied. Nothing was recorded; look at it, then try again.",
    ),
    (
        "reference_too_long",
        "A provider's operation id has at most 200 characters: cite the id the provider's dashboard shows. Nothing was resolved.",
    ),
    (
        "reference_not_an_id",
        "A provider's operation id is printable ASCII with no space: this one holds a character no id holds (a zero-width space, a letter from another alphabet that looks Latin, a space inside). Cite the id the provider's dashboard shows. Nothing was resolved.",
    ),
    (
        "nothing_to_hold_by",
        "The provider listed this operation without a resource, an amount and a currency: nothing could recognise its webhook. Close it with a reason.",
    ),
];

/// The sentence of a notice code.
pub fn notice(code: &str) -> Option<&'static str> {
    NOTICES.iter().find(|(c, _)| *c == code).map(|(_, n)| *n)
}

/// What the page offers the operator.
pub(super) struct Forms {
    pub(super) notice: Option<&'static str>,
    pub(super) assignable: Vec<String>,
    pub(super) form_token: Option<String>,
    pub(super) cannot_resolve: Option<&'static str>,
    pub(super) can_comment: bool,
    pub(super) can_look_up: bool,
    pub(super) fixture: Option<String>,
    pub(super) cite_required: bool,
}

pub(super) fn page(view: CaseView, nav: Nav, forms: Forms) -> CasePage {
    let now = Utc::now();
    let strategy = view.strategy.as_ref();
    CasePage {
        nav,
        short: ShortId::new(view.case_id.clone()),
        id: view.case_id,
        open: view.status == "open",
        close_only: crate::services::cases::closes_only(&view.reason),
        missing_effect: view.reason
            == crate::domain::journal::DiscrepancyKind::MissingEffect.as_str(),
        reason: view.reason,
        action: view.action,
        critical: view.critical,
        opened: Stamp::new(view.opened_at, now),
        resolved: view.resolved_at.map(|at| Stamp::new(at, now)),
        resolution: view.resolution.unwrap_or_default(),
        resolved_by: view.resolved_by.unwrap_or_default(),
        strategy: strategy.map(|s| s.strategy.clone()).unwrap_or_default(),
        strength: strategy.map(|s| s.strength.clone()).unwrap_or_default(),
        effect_type: strategy.map(|s| s.effect_type.clone()).unwrap_or_default(),
        key: view.business_key.map(ShortId::new),
        figures: figure_lines(&view.figures),
        sides: vec![
            (
                "This delivery",
                view.delivery.as_ref().map(|d| side(d, now)),
                "None: the provider made this operation, and no delivery of it arrived.",
            ),
            (
                "Reference delivery",
                view.reference.as_ref().map(|r| side(r, now)),
                "None: this case has no reference delivery.",
            ),
        ],
        has_reference: view.reference.is_some(),
        changes: view
            .changes
            .into_iter()
            .map(|c| ChangeLine {
                path: c.change.path,
                change: match c.change.change {
                    crate::domain::diff::Change::Added => "added",
                    crate::domain::diff::Change::Removed => "removed",
                    crate::domain::diff::Change::Changed => "changed",
                },
                old: shown(c.change.old.as_ref()),
                new: shown(c.change.new.as_ref()),
                discriminating: c.discriminating,
                volatile: c.volatile,
            })
            .collect(),
        existing_effect: view.existing_effect.as_ref().map(effect),
        applied_effect: view.applied_effect.as_ref().map(effect),
        history: folded(view.history.into_iter().map(|e| history(e, now))),
        notice: forms.notice,
        form_token: forms.form_token,
        cannot_resolve: forms.cannot_resolve,
        can_comment: forms.can_comment,
        can_look_up: forms.can_look_up,
        fixture: forms.fixture,
        cite_required: forms.cite_required,
        assignee: view.assignee,
        assignable: forms.assignable,
        operation: view.operation.map(|o| OperationLine {
            id: o.id,
            amount: money(o.amount.as_ref(), o.currency.as_ref()),
            status: o.status.unwrap_or_default(),
            resource: o.resource.unwrap_or_default(),
            created_at: o
                .created_at
                .map(|at| Stamp::new(at, now).utc)
                .unwrap_or_default(),
        }),
    }
}

/// The provider's operation a reconciliation case is about.
pub struct OperationLine {
    pub id: String,
    /// With its currency: `7.00 EUR`.
    pub amount: String,
    pub status: String,
    pub resource: String,
    pub created_at: String,
}

/// The history with repeated look-ups folded: consecutive questions to the
/// provider that came to the same conclusion read as one line with their
/// count, the latest one's answer and time kept.
fn folded(lines: impl Iterator<Item = HistoryLine>) -> Vec<HistoryLine> {
    let mut out: Vec<(HistoryLine, usize)> = Vec::new();
    for line in lines {
        match out.last_mut() {
            Some((last, count))
                if last.what == line.what
                    && last.by == line.by
                    && last.note == line.note
                    && line.what.contains("look-up") =>
            {
                *last = line;
                *count += 1;
            }
            _ => out.push((line, 1)),
        }
    }
    out.into_iter()
        .map(|(mut line, count)| {
            if count > 1 {
                line.what = format!("{} ×{count}", line.what);
            }
            line
        })
        .collect()
}

/// The discriminating figures of both sides; an `amount` beside a
/// `currency` reads as money (`7.00 EUR`), each side in its own currency.
fn figure_lines(figures: &[Figure]) -> Vec<FigureLine> {
    let currency = figures.iter().find(|f| f.name == "currency");
    figures
        .iter()
        .map(|f| {
            let (delivery, reference) = match currency.filter(|_| f.name == "amount") {
                Some(c) => (
                    money(f.delivery.as_ref(), c.delivery.as_ref()),
                    money(f.reference.as_ref(), c.reference.as_ref()),
                ),
                None => (shown(f.delivery.as_ref()), shown(f.reference.as_ref())),
            };
            FigureLine {
                name: f.name.clone(),
                delivery,
                reference,
                differs: f.delivery != f.reference,
            }
        })
        .collect()
}

/// An amount in minor units with its currency, as money (`7.00 EUR`, `700
/// JPY`); what is not money in a known currency is shown as it came, the
/// currency unquoted; `—` when there is no amount.
fn money(amount: Option<&Value>, currency: Option<&Value>) -> String {
    let Some(amount) = amount else {
        return "—".to_owned();
    };
    if let Some(text) = currency.and_then(|c| crate::domain::money::minor_units(amount, c)) {
        return text;
    }
    match currency {
        Some(Value::String(code)) => format!("{} {code}", json_text(amount)),
        Some(other) => format!("{} {}", json_text(amount), json_text(other)),
        None => json_text(amount),
    }
}

/// A JSON value as one line of text; `—` when absent.
fn shown(value: Option<&Value>) -> String {
    value.map(json_text).unwrap_or_else(|| "—".to_owned())
}

fn side(d: &DeliveryView, now: chrono::DateTime<Utc>) -> Side {
    Side {
        id: ShortId::new(d.delivery_id.to_string()),
        link: format!("/deliveries/{}", d.delivery_id),
        received: Stamp::new(d.received_at, now),
        source: d.origin.source.clone(),
        provider: d.origin.provider.clone(),
        summary: d
            .decision
            .as_ref()
            .and_then(|v| v.get("summary"))
            .and_then(Value::as_str)
            .unwrap_or("not decided")
            .to_owned(),
        headers: d.headers.clone(),
        body: d
            .body
            .as_ref()
            .and_then(|b| serde_json::to_string_pretty(b).ok())
            .unwrap_or_default(),
    }
}

fn effect(e: &EffectState) -> EffectLine {
    EffectLine {
        id: ShortId::new(e.effect_id.clone()),
        status: e.status.clone(),
        key: ShortId::new(e.key.clone()),
        provider_ref: e.provider_ref.clone().unwrap_or_default(),
        downstream_ref: e.downstream_ref.clone().unwrap_or_default(),
    }
}

fn history(event: CaseEvent, now: chrono::DateTime<Utc>) -> HistoryLine {
    match event {
        CaseEvent::Opened { at, summary } => HistoryLine {
            at: Stamp::new(at, now),
            what: "Opened".to_owned(),
            by: "Unicity".to_owned(),
            note: summary,
            details: Vec::new(),
        },
        CaseEvent::Commented { at, by, note } => HistoryLine {
            at: Stamp::new(at, now),
            what: "Comment".to_owned(),
            by,
            note,
            details: Vec::new(),
        },
        CaseEvent::LookedUp {
            at,
            url,
            status,
            latency_ms,
            operations,
            error,
            verdict,
            why,
        } => {
            let mut details = vec![format!(
                "asked {url}: {} in {latency_ms} ms",
                status.map_or_else(|| "no answer".to_owned(), |s| format!("HTTP {s}"))
            )];
            details.extend(operations.iter().map(|op| {
                format!(
                    "operation {}: {} ({})",
                    op.id,
                    money(op.amount.as_ref(), op.currency.as_ref()),
                    op.status.as_deref().unwrap_or("no status")
                )
            }));
            details.extend(error.map(|e| format!("error: {e}")));
            HistoryLine {
                at: Stamp::new(at, now),
                what: "Provider look-up".to_owned(),
                by: "look-up".to_owned(),
                note: match why {
                    Some(why) => format!("verdict: {verdict} ({why})"),
                    None => format!("verdict: {verdict}"),
                },
                details,
            }
        }
        CaseEvent::Resolved {
            at,
            resolution,
            by,
            note,
            authoritative_ref,
            effect_id,
        } => HistoryLine {
            at: Stamp::new(at, now),
            what: format!("Resolved: {resolution}"),
            by,
            note,
            details: authoritative_ref
                .map(|r| format!("provider's operation: {r}"))
                .into_iter()
                .chain(effect_id.map(|e| format!("effect: {e}")))
                .collect(),
        },
    }
}
