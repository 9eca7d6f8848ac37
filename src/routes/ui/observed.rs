//! `GET /strategies/observe?source=S`: for engineers, the observe report
//! (`services::observe`, `unicity observe report`) as a page — where a
//! source's legacy handler and Unicity disagree: what the legacy applied
//! more often than Unicity would have, what Unicity would have applied that
//! the legacy never did, what Unicity would have sent to a person, and its
//! collisions, each with links to the deliveries.

use actix_session::Session;
use actix_web::http::StatusCode;
use actix_web::{HttpResponse, get, web};
use askama::Template;
use serde::Deserialize;

use super::format::{Nav, filters, json_text};
use super::html;
use crate::auth::Principal;
use crate::config::SourceMode;
use crate::routes::error::UiError;
use crate::services::observe::{self, Disagreement, ObserveReport};
use crate::state::AppState;

#[derive(Debug, Default, Deserialize)]
pub struct Query {
    #[serde(default)]
    pub source: String,
}

/// A configured source and the mode it runs in.
pub struct SourceLine {
    pub slug: String,
    pub mode: String,
}

/// One resource and amount the two sides applied a different number of times.
pub struct Line {
    pub resource: String,
    /// The search for the resource, as a query string.
    pub search: String,
    pub amount: String,
    pub legacy: usize,
    pub unicity: usize,
    pub deliveries: Vec<String>,
}

impl From<&Disagreement> for Line {
    fn from(d: &Disagreement) -> Self {
        Self {
            search: serde_urlencoded::to_string([("q", &d.resource)]).unwrap_or_default(),
            resource: d.resource.clone(),
            amount: d.amount.as_ref().map_or("—".to_owned(), json_text),
            legacy: d.legacy,
            unicity: d.unicity,
            deliveries: d.deliveries.clone(),
        }
    }
}

/// `templates/observed.html`.
#[derive(Template)]
#[template(path = "observed.html")]
pub struct ObservedPage {
    pub nav: Nav,
    pub sources: Vec<SourceLine>,
    pub source: String,
    pub error: Option<String>,
    pub report: Option<ObserveReport>,
    pub twice: Vec<Line>,
    pub missed: Vec<Line>,
}

#[get("/strategies/observe")]
pub async fn show(
    state: web::Data<AppState>,
    session: Session,
    operator: Principal,
    query: web::Query<Query>,
) -> Result<HttpResponse, UiError> {
    let source = query.into_inner().source.trim().to_owned();
    let mut sources: Vec<SourceLine> = state
        .sources
        .values()
        .map(|s| SourceLine {
            slug: s.slug().to_owned(),
            mode: match s.mode {
                SourceMode::Enforce if !s.observe_effect_types.is_empty() => {
                    format!("observe {}", s.observe_effect_types.join(", "))
                }
                mode => mode.as_str().to_owned(),
            },
        })
        .collect();
    sources.sort_by(|a, b| a.slug.cmp(&b.slug));
    let mut page = ObservedPage {
        nav: Nav::new(&session, &operator, "strategies")?,
        sources,
        source,
        error: None,
        report: None,
        twice: Vec::new(),
        missed: Vec::new(),
    };
    if page.source.is_empty() {
        return Ok(html(HttpResponse::Ok(), &page));
    }
    let Some(configured) = state.sources.get(&page.source) else {
        page.error = Some(format!("No source is configured as “{}”.", page.source));
        return Ok(html(HttpResponse::build(StatusCode::BAD_REQUEST), &page));
    };
    let observed = configured.observed_effect_types();
    crate::services::projector::before_reading(&state.engine).await;
    let sealing = observe::Sealing::of(configured, &state.engine.key_secret);
    let report = observe::report(state.db(), &page.source, &observed, Some(sealing))
        .await
        .map_err(UiError::internal)?;
    page.twice = report
        .applied_twice_by_legacy
        .iter()
        .map(Line::from)
        .collect();
    page.missed = report.missed_by_legacy.iter().map(Line::from).collect();
    page.report = Some(report);
    Ok(html(HttpResponse::Ok(), &page))
}
