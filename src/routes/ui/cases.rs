//! `GET /cases`: the ambiguity queue — open cases oldest first, how many wait
//! per reason, and a plain GET form of filters (status, reason, source,
//! provider, event type, effect type, critical or not, age), paginated. The
//! status is open unless asked (`resolved`, `all`), and the page says which.

use actix_session::Session;
use actix_web::{HttpResponse, get, web};
use askama::Template;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::format::{Nav, ShortId, Stamp, filters};
use super::html;
use crate::auth::Principal;
use crate::domain::cases::CaseStatus;
use crate::routes::error::UiError;
use crate::services::queue::{self, CaseFilter, QueueFilter};
use crate::state::AppState;
use crate::store::cases::ANY_STATUS;

const PAGE: u64 = 50;

/// The ages the queue filters on: (form value, label, seconds).
const AGES: [(&str, &str, i64); 4] = [
    ("1h", "older than 1 hour", 3_600),
    ("1d", "older than 1 day", 86_400),
    ("7d", "older than 7 days", 7 * 86_400),
    ("30d", "older than 30 days", 30 * 86_400),
];

/// The queue's form, as submitted (an empty field is no filter).
#[derive(Debug, Default, Clone, Deserialize, Serialize)]
pub struct QueueForm {
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub source: String,
    #[serde(default)]
    pub provider: String,
    #[serde(default)]
    pub event_type: String,
    #[serde(default)]
    pub effect_type: String,
    /// `yes` (critical only), `no` (the others), or empty.
    #[serde(default)]
    pub critical: String,
    /// One of `AGES`, or empty.
    #[serde(default)]
    pub age: String,
    /// An operator's name: the cases given to them.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub assignee: String,
    /// `open` (also when empty), `resolved` or `all`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// What a bulk resolution came to (`done`, or a refusal's code), and
    /// its counts; never carried into the page's links.
    #[serde(default, skip_serializing)]
    pub bulk: String,
    #[serde(default, skip_serializing)]
    pub resolved: usize,
    #[serde(default, skip_serializing)]
    pub money: usize,
    #[serde(default, skip_serializing)]
    pub already: usize,
    #[serde(default, skip_serializing)]
    pub refused: usize,
}

impl QueueForm {
    /// The sentence saying what the last bulk resolution did.
    fn bulk_notice(&self) -> Option<String> {
        let said = match self.bulk.as_str() {
            "" => return None,
            "done" => {
                let mut said = format!(
                    "{} case{} resolved.",
                    self.resolved,
                    if self.resolved == 1 { "" } else { "s" }
                );
                if self.money > 0 {
                    said.push_str(&format!(
                        " {} money case{} left open: money cases are resolved one at a time.",
                        self.money,
                        if self.money == 1 { "" } else { "s" }
                    ));
                }
                if self.already > 0 {
                    said.push_str(&format!(" {} had been resolved already.", self.already));
                }
                if self.refused > 0 {
                    said.push_str(&format!(
                        " {} could not be resolved that way: open each to see why.",
                        self.refused
                    ));
                }
                said
            }
            "none" => "No case was ticked: nothing was resolved.".to_owned(),
            "too_many_cases" => format!(
                "More than {} cases were ticked: nothing was resolved. Resolve at most {} at a time.",
                crate::services::cases::BULK_MOST,
                crate::services::cases::BULK_MOST
            ),
            "note_required" => {
                "A bulk resolution needs a note saying why: nothing was resolved.".to_owned()
            }
            _ => "That resolution is not one a person makes: nothing was resolved.".to_owned(),
        };
        Some(said)
    }
}

fn given(value: &str) -> Option<String> {
    let value = value.trim();
    (!value.is_empty()).then(|| value.to_owned())
}

impl QueueForm {
    /// The status listed: open unless `resolved` or `all` was asked.
    fn status(&self) -> &'static str {
        match CaseStatus::parse(self.status.trim()) {
            Some(status) => status.as_str(),
            None if self.status.trim() == ANY_STATUS => ANY_STATUS,
            None => CaseStatus::Open.as_str(),
        }
    }

    fn filter(&self, now: DateTime<Utc>) -> CaseFilter {
        let age = AGES.iter().find(|(value, _, _)| *value == self.age);
        CaseFilter {
            queue: QueueFilter {
                status: Some(self.status().to_owned()),
                reason: given(&self.reason),
                source: given(&self.source),
                provider: given(&self.provider),
                event_type: given(&self.event_type),
                opened_before: age.map(|(_, _, secs)| now - chrono::Duration::seconds(*secs)),
                assignee: given(&self.assignee),
                keys: None,
            },
            effect_type: given(&self.effect_type),
            critical: match self.critical.as_str() {
                "yes" => Some(true),
                "no" => Some(false),
                _ => None,
            },
        }
    }

    /// `/cases?…` with these filters, at `offset`.
    fn link(&self, offset: Option<u64>) -> String {
        let form = QueueForm {
            offset,
            ..self.clone()
        };
        format!(
            "/cases?{}",
            serde_urlencoded::to_string(&form).unwrap_or_default()
        )
    }
}

/// A choice of a `<select>`.
pub struct Choice {
    pub value: String,
    pub label: String,
    pub selected: bool,
}

fn choices<'a>(
    options: impl IntoIterator<Item = (&'a str, &'a str)>,
    current: &str,
) -> Vec<Choice> {
    options
        .into_iter()
        .map(|(value, label)| Choice {
            value: value.to_owned(),
            label: label.to_owned(),
            selected: value == current,
        })
        .collect()
}

/// How many cases wait for one reason, and the link that lists them.
pub struct ReasonCount {
    pub reason: String,
    pub cases: i64,
    pub link: String,
    pub current: bool,
}

/// One case as the queue shows it.
pub struct QueueLine {
    pub case: ShortId,
    pub link: String,
    pub reason: String,
    pub effect_type: String,
    pub critical: bool,
    pub source: String,
    pub provider: String,
    pub event_type: String,
    /// None for a reconciliation finding no delivery arrived for.
    pub delivery: Option<ShortId>,
    pub delivery_link: String,
    pub opened: Stamp,
    /// `open`, or the resolution of a resolved case.
    pub state: String,
    /// The provider's reference the resolution recorded.
    pub reference: Option<ShortId>,
    /// Open and not about money: may be ticked for a bulk resolution.
    pub bulk: bool,
    /// Who the case was given to.
    pub assignee: Option<String>,
}

/// `templates/queue.html`.
#[derive(Template)]
#[template(path = "queue.html")]
pub struct QueuePage {
    pub nav: Nav,
    pub form: QueueForm,
    /// The status listed (`open`, `resolved`, `all`).
    pub status: &'static str,
    /// The heading: "Open cases", "Resolved cases", "All cases".
    pub heading: &'static str,
    /// `/cases` with the status and no other filter.
    pub unfiltered: String,
    pub statuses: Vec<Choice>,
    pub counts: Vec<ReasonCount>,
    pub total: i64,
    pub reasons: Vec<Choice>,
    pub sources: Vec<Choice>,
    pub providers: Vec<Choice>,
    pub effect_types: Vec<Choice>,
    pub critical: Vec<Choice>,
    pub ages: Vec<Choice>,
    pub cases: Vec<QueueLine>,
    pub previous: Option<String>,
    pub next: Option<String>,
    /// The session's CSRF token when the operator may resolve non-money
    /// cases in bulk from this page.
    pub bulk_csrf: Option<String>,
    pub bulk_notice: Option<String>,
    /// The operator's own cases (`/cases?assignee=<name>`).
    pub mine: String,
}

#[get("/cases")]
pub async fn list(
    state: web::Data<AppState>,
    session: Session,
    operator: Principal,
    form: web::Query<QueueForm>,
) -> Result<HttpResponse, UiError> {
    let form = form.into_inner();
    let now = Utc::now();
    let offset = form.offset.unwrap_or(0);
    let page = queue::queue(&state.engine, &form.filter(now), PAGE, offset)
        .await
        .map_err(UiError::internal)?;
    let counts: Vec<ReasonCount> = page
        .counts
        .iter()
        .map(|(reason, cases)| ReasonCount {
            link: QueueForm {
                reason: reason.clone(),
                status: form.status.clone(),
                ..QueueForm::default()
            }
            .link(None),
            current: *reason == form.reason,
            reason: reason.clone(),
            cases: *cases,
        })
        .collect();
    let mut sources: Vec<&str> = state.sources.keys().map(String::as_str).collect();
    sources.sort_unstable();
    let mut providers: Vec<&str> = state
        .sources
        .values()
        .map(|s| s.origin.provider.as_str())
        .collect();
    providers.sort_unstable();
    providers.dedup();
    let effect_types = queue::effect_types(&state.engine.catalog);
    let any = [("", "any")];
    let cases = page
        .cases
        .into_iter()
        .map(|c| QueueLine {
            link: format!("/cases/{}", c.case_id),
            case: ShortId::new(c.case_id),
            reason: c.reason,
            effect_type: c.effect_type.unwrap_or_else(|| "unknown".to_owned()),
            critical: c.critical,
            source: c.source.unwrap_or_default(),
            provider: c.provider.unwrap_or_default(),
            event_type: c.event_type.unwrap_or_default(),
            delivery_link: format!("/deliveries/{}", c.delivery_id),
            delivery: (!c.delivery_id.is_empty()).then(|| ShortId::new(c.delivery_id)),
            opened: Stamp::new(c.opened_at, now),
            bulk: !c.critical && c.resolution.is_none() && c.status == "open",
            assignee: c.assignee,
            reference: c.resolution_reference.map(ShortId::new),
            state: match (c.resolution, c.resolved_by, c.resolved_at) {
                (Some(resolution), Some(by), Some(at)) => format!(
                    "{}: {resolution}, by {by}, {}",
                    c.status,
                    Stamp::new(at, now).age
                ),
                (Some(resolution), _, _) => format!("{}: {resolution}", c.status),
                (None, _, _) => c.status,
            },
        })
        .collect();
    let status = form.status();
    let unfiltered = match status {
        "open" => "/cases".to_owned(),
        other => format!("/cases?status={other}"),
    };
    let nav = Nav::new(&session, &operator, "cases")?;
    let bulk_csrf = (operator.may(crate::services::cases::resolving(false)) && status == "open")
        .then(|| nav.csrf.clone());
    let mine = QueueForm {
        assignee: operator.name.clone(),
        ..QueueForm::default()
    }
    .link(None);
    let page = QueuePage {
        mine,
        bulk_csrf,
        bulk_notice: form.bulk_notice(),
        nav,
        status,
        heading: match status {
            "resolved" => "Resolved cases",
            "open" => "Open cases",
            _ => "All cases",
        },
        unfiltered,
        statuses: choices(
            [
                ("open", "open"),
                ("resolved", "resolved"),
                (ANY_STATUS, "all (open and resolved)"),
            ],
            status,
        ),
        total: page.counts.iter().map(|(_, n)| n).sum(),
        reasons: choices(
            any.into_iter()
                .chain(page.counts.iter().map(|(r, _)| (r.as_str(), r.as_str()))),
            &form.reason,
        ),
        sources: choices(
            any.into_iter().chain(sources.iter().map(|s| (*s, *s))),
            &form.source,
        ),
        providers: choices(
            any.into_iter().chain(providers.iter().map(|p| (*p, *p))),
            &form.provider,
        ),
        effect_types: choices(
            any.into_iter()
                .chain(effect_types.iter().map(|t| (t.as_str(), t.as_str()))),
            &form.effect_type,
        ),
        critical: choices(
            any.into_iter().chain([
                ("yes", "critical (money, rights, stock)"),
                ("no", "not critical"),
            ]),
            &form.critical,
        ),
        ages: choices(
            any.into_iter().chain(AGES.iter().map(|(v, l, _)| (*v, *l))),
            &form.age,
        ),
        previous: (offset > 0).then(|| form.link(Some(offset.saturating_sub(PAGE)))),
        next: page.next_offset.map(|o| form.link(Some(o))),
        counts,
        cases,
        form,
    };
    Ok(html(HttpResponse::Ok(), &page))
}
