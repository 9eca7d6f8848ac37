//! `GET /strategies/fields?source=S&type=T`: for engineers, the
//! field-stability report (`services::corpus`, `unicity corpus report`) as a
//! page — which body fields change across one event's retries (candidates
//! for `volatile`), which come and go, which stay, and which tell apart
//! distinct effects on one resource (candidates for discriminants), each
//! with example deliveries. It reads the journal of the filter, like the
//! command, but at most `MOST` deliveries' bodies (the command has no
//! limit); it suggests and changes nothing.

use actix_session::Session;
use actix_web::http::StatusCode;
use actix_web::{HttpResponse, get, web};
use askama::Template;
use serde::Deserialize;

use super::format::{Nav, filters};
use super::html;
use crate::auth::Principal;
use crate::routes::error::UiError;
use crate::services::corpus::{self, CorpusReport, Stability};
use crate::state::AppState;

/// Most deliveries a page reads the bodies of, all held at once.
const MOST: usize = 5_000;

/// The query string, as sent: empty means all.
#[derive(Debug, Default, Deserialize)]
pub struct Query {
    #[serde(default)]
    pub source: String,
    #[serde(default, rename = "type")]
    pub event_type: String,
}

/// `templates/fields.html`.
#[derive(Template)]
#[template(path = "fields.html")]
pub struct FieldsPage {
    pub nav: Nav,
    /// The configured sources, sorted.
    pub sources: Vec<String>,
    pub source: String,
    pub event_type: String,
    pub error: Option<String>,
    pub report: Option<CorpusReport>,
}

impl FieldsPage {
    /// How the page names a field's behaviour, and its row's class.
    pub fn label(&self, stability: &Stability) -> (&'static str, &'static str) {
        match stability {
            Stability::Volatile => ("volatile: changes between retries", "volatile"),
            Stability::Conditional => ("conditional: missing from some", "conditional"),
            Stability::Stable => ("stable", "stable"),
        }
    }
}

#[get("/strategies/fields")]
pub async fn show(
    state: web::Data<AppState>,
    session: Session,
    operator: Principal,
    query: web::Query<Query>,
) -> Result<HttpResponse, UiError> {
    let Query { source, event_type } = query.into_inner();
    let (source, event_type) = (source.trim().to_owned(), event_type.trim().to_owned());
    let mut sources: Vec<String> = state.sources.keys().cloned().collect();
    sources.sort();
    let mut page = FieldsPage {
        nav: Nav::new(&session, &operator, "strategies")?,
        sources,
        source,
        event_type,
        error: None,
        report: None,
    };
    if !page.source.is_empty() && !state.sources.contains_key(&page.source) {
        page.error = Some(format!("No source is configured as “{}”.", page.source));
        return Ok(html(HttpResponse::build(StatusCode::BAD_REQUEST), &page));
    }
    let (source, event_type) = (page.source.clone(), page.event_type.clone());
    crate::services::projector::before_reading(&state.engine).await;
    let chosen = corpus::Chosen {
        source: Some(source.as_str()).filter(|s| !s.is_empty()),
        event_type: Some(event_type.as_str()).filter(|t| !t.is_empty()),
        most: Some(MOST),
    };
    match corpus::report(state.db(), &state.engine.catalog, chosen).await {
        Ok(report) => page.report = Some(report),
        Err(error) if error.is::<corpus::TooMany>() => {
            page.error = Some(error.to_string());
            return Ok(html(HttpResponse::build(StatusCode::BAD_REQUEST), &page));
        }
        Err(error) => return Err(UiError::internal(error)),
    }
    Ok(html(HttpResponse::Ok(), &page))
}
