//! `GET /deliveries`: one search box and filters (a plain GET form), how many
//! deliveries match, those found newest first, links to the pages before and
//! after; when nothing matches, links to the ids near what was typed.
//! `GET /deliveries/{id}`: the support page of one delivery (`delivery_page`).

use actix_session::Session;
use actix_web::http::StatusCode;
use actix_web::{HttpResponse, get, web};
use askama::Template;
use chrono::Utc;

use super::delivery_page::DeliveryPage;
use super::format::{Nav, ShortId, Stamp, filters, from_visible};
use super::html;
use crate::auth::Principal;
use crate::domain::decision::Action;
use crate::domain::delivery::DeliveryId;
use crate::routes::error::UiError;
use crate::services::deliveries::{self, ShowError};
use crate::services::search::{self, COUNT_CAP, Found, Params, SearchError, Suggestion, Total};
use crate::state::AppState;

/// An option of a `<select>`.
pub struct Choice {
    pub value: String,
    pub selected: bool,
}

/// One delivery found.
pub struct Row {
    pub received: Stamp,
    pub source: String,
    pub event_type: String,
    pub decision: String,
    pub reason: String,
    /// What it is about (a payment id), `sealed` when stored as its keyed hash.
    pub resource: String,
    /// `name@version`, `—` without a business key.
    pub strategy: String,
    pub key: Option<ShortId>,
    pub id: ShortId,
    pub link: String,
}

/// `templates/search.html`.
#[derive(Template)]
#[template(path = "search.html")]
pub struct SearchPage {
    pub nav: Nav,
    pub q: String,
    pub event_type: String,
    pub from: String,
    pub to: String,
    pub sources: Vec<Choice>,
    pub decisions: Vec<Choice>,
    pub rows: Vec<Row>,
    /// "37 deliveries match", when something was asked and answered.
    pub total: Option<String>,
    /// The next and the previous page's addresses, when there are.
    pub next: Option<String>,
    pub previous: Option<String>,
    /// Whether anything was asked (an empty result then says so).
    pub asked: bool,
    /// Ids near `q` when nothing matches it.
    pub suggestions: Vec<Near>,
    pub error: Option<String>,
    /// Said when the list is behind the journal.
    pub stale: Option<String>,
}

/// An id proposed instead of what was typed, and its search.
pub struct Near {
    pub text: String,
    /// What it is: "payment id", "business key"…
    pub field: &'static str,
    pub link: String,
}

fn near(suggestion: Suggestion) -> Near {
    Near {
        link: address(&Params {
            q: Some(suggestion.text.clone()),
            ..Params::default()
        }),
        field: match suggestion.field {
            "delivery_id" => "delivery id",
            "provider_event_id" => "provider id",
            "business_key" => "business key",
            _ => "payment id",
        },
        text: suggestion.text,
    }
}

/// The search page's address for `params`, every value encoded.
fn address(params: &Params) -> String {
    format!(
        "/deliveries?{}",
        serde_urlencoded::to_string(params).unwrap_or_default()
    )
}

/// "1 delivery matches", "37 deliveries match", "More than 1,000 …".
fn total_line(total: Total) -> String {
    match (total.count, total.more) {
        (_, true) => format!(
            "More than {},{:03} deliveries match.",
            COUNT_CAP / 1000,
            COUNT_CAP % 1000
        ),
        (1, false) => "1 delivery matches.".to_owned(),
        (n, false) => format!("{n} deliveries match."),
    }
}

fn choices<'a>(values: impl Iterator<Item = &'a str>, current: Option<&str>) -> Vec<Choice> {
    values
        .map(|v| Choice {
            value: v.to_owned(),
            selected: current == Some(v),
        })
        .collect()
}

fn row(found: Found, now: chrono::DateTime<Utc>) -> Row {
    Row {
        received: Stamp::new(found.received_at, now),
        link: format!("/deliveries/{}", found.delivery_id),
        id: ShortId::new(found.delivery_id),
        source: found.source,
        event_type: found.event_type.unwrap_or_else(|| "—".to_owned()),
        decision: found.decision.unwrap_or_else(|| found.status.clone()),
        reason: found.reason.unwrap_or_default(),
        resource: match found.resource {
            Some(r) if r.starts_with("hmac:") => "sealed".to_owned(),
            Some(r) => r,
            None => "—".to_owned(),
        },
        strategy: found.strategy.unwrap_or_else(|| "—".to_owned()),
        key: found.business_key.map(ShortId::new),
    }
}

#[get("/deliveries")]
pub async fn list(
    state: web::Data<AppState>,
    session: Session,
    operator: Principal,
    params: web::Query<Params>,
) -> Result<HttpResponse, UiError> {
    let mut params = params.into_inner();
    // An id copied from a page holds its bidirectional controls written out
    // (`<U+202E>`): searched for, it means the control itself.
    for field in [&mut params.q, &mut params.event_type] {
        if let Some(value) = field.as_mut() {
            *value = from_visible(value).into_owned();
        }
    }
    let now = Utc::now();
    let field = |v: &Option<String>| v.clone().unwrap_or_default();
    let mut page = SearchPage {
        nav: Nav::new(&session, &operator, "deliveries")?,
        asked: [
            &params.q,
            &params.source,
            &params.event_type,
            &params.decision,
            &params.from,
            &params.to,
        ]
        .iter()
        .any(|p| p.as_deref().is_some_and(|v| !v.trim().is_empty())),
        q: field(&params.q),
        event_type: field(&params.event_type),
        from: field(&params.from),
        to: field(&params.to),
        sources: Vec::new(),
        decisions: choices(
            Action::ALL.iter().map(|a| a.as_str()),
            params.decision.as_deref(),
        ),
        rows: Vec::new(),
        total: None,
        next: None,
        previous: None,
        suggestions: Vec::new(),
        error: None,
        stale: None,
    };
    let mut status = StatusCode::OK;
    match search::search(&state.engine, &params).await {
        Ok(found) => {
            let beside = |cursor: Option<String>, before: Option<String>| Params {
                cursor,
                before,
                ..params.clone()
            };
            page.next = found.next_cursor.map(|c| address(&beside(Some(c), None)));
            page.previous = found
                .previous_cursor
                .map(|c| address(&beside(None, Some(c))));
            page.total = page.asked.then(|| total_line(found.total));
            page.suggestions = found.suggestions.into_iter().map(near).collect();
            page.rows = found.deliveries.into_iter().map(|f| row(f, now)).collect();
            page.stale = found.freshness.note();
        }
        Err(SearchError::Invalid(message)) => {
            status = StatusCode::BAD_REQUEST;
            page.error = Some(message);
        }
        Err(SearchError::Db(error)) => return Err(UiError::internal(error)),
    };
    let mut sources: Vec<&str> = state.sources.keys().map(String::as_str).collect();
    sources.sort_unstable();
    page.sources = choices(sources.into_iter(), params.source.as_deref());
    Ok(html(HttpResponse::build(status), &page))
}

#[get("/deliveries/{id}")]
pub async fn show(
    state: web::Data<AppState>,
    session: Session,
    operator: Principal,
    id: web::Path<String>,
) -> Result<HttpResponse, UiError> {
    let not_found = || UiError::new(StatusCode::NOT_FOUND, "No delivery has this id.");
    let id: DeliveryId = id.parse().map_err(|_| not_found())?;
    let view = match deliveries::show(&state.engine, &state.sources, id).await {
        Ok(view) => view,
        Err(ShowError::NotFound) => return Err(not_found()),
        Err(error) => return Err(UiError::internal(error)),
    };
    let nav = Nav::new(&session, &operator, "deliveries")?;
    Ok(html(
        HttpResponse::Ok(),
        &DeliveryPage::new(nav, view, Utc::now()),
    ))
}
