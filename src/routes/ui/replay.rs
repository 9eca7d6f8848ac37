//! `POST /strategies/replay`: for engineers, a candidate strategy set pasted
//! into the Strategies page, replayed over a window of the journal on
//! scratch databases (`services::shadow`), and its report as a page — the
//! live set's own noise, then the candidate's changes, merges first, each
//! with links to example deliveries. Nothing is written to the live
//! database. A page replays at most `MOST` deliveries; `unicity replay` has
//! no limit.

use actix_session::Session;
use actix_web::http::StatusCode;
use actix_web::{HttpResponse, post, web};
use askama::Template;
use chrono::{DateTime, Duration, Utc};
use serde::Deserialize;

use super::csrf::CsrfForm;
use super::format::{Nav, filters};
use super::html;
use crate::auth::Principal;
use crate::routes::error::UiError;
use crate::services::shadow::{self, Change, ShadowReport, Window};
use crate::state::AppState;

/// Most deliveries a page replays.
const MOST: usize = 5_000;

#[derive(Deserialize)]
pub struct ReplayForm {
    candidate: String,
    /// How many hours back the window starts (default 24).
    #[serde(default)]
    hours: Option<String>,
    #[serde(default)]
    source: Option<String>,
}

/// One group of changes as the page lists it.
pub struct ChangeLine {
    pub label: &'static str,
    pub merge: bool,
    pub strategy: String,
    pub event_type: String,
    pub transition: String,
    pub deliveries: usize,
    pub examples: Vec<String>,
}

/// `templates/replay.html`.
#[derive(Template)]
#[template(path = "replay.html")]
pub struct ReplayPage {
    pub nav: Nav,
    pub candidate: String,
    pub hours: i64,
    pub error: Option<String>,
    pub report: Option<ShadowReport>,
    pub changes: Vec<ChangeLine>,
}

#[post("/strategies/replay")]
pub async fn replay(
    state: web::Data<AppState>,
    session: Session,
    operator: Principal,
    form: CsrfForm<ReplayForm>,
) -> Result<HttpResponse, UiError> {
    let ReplayForm {
        candidate,
        hours,
        source,
    } = form.0;
    let hours = hours
        .as_deref()
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map_or(Ok(24), str::parse::<i64>)
        .ok()
        .filter(|h| (1..=24 * 90).contains(h));
    let nav = Nav::new(&session, &operator, "strategies")?;
    let Some(hours) = hours else {
        let page = ReplayPage {
            nav,
            candidate,
            hours: 24,
            error: Some("The window is a number of hours, from 1 to 2160.".to_owned()),
            report: None,
            changes: Vec::new(),
        };
        return Ok(html(HttpResponse::build(StatusCode::BAD_REQUEST), &page));
    };
    let from: DateTime<Utc> = Utc::now() - Duration::hours(hours);
    let window = Window {
        from: Some(from),
        to: None,
        source: source.filter(|s| !s.trim().is_empty()),
        most: Some(MOST),
    };
    let base = &state.config_text;
    // Removed when dropped: also when the request is, mid-replay.
    let scratch = shadow::scratch_dir().map_err(UiError::internal)?;
    let replayed = shadow::shadow(state.db(), base, &candidate, &window, scratch.path()).await;
    drop(scratch);
    let (status, error, report) = match replayed {
        Ok(report) => (StatusCode::OK, None, Some(report)),
        Err(error) => (StatusCode::BAD_REQUEST, Some(format!("{error:#}")), None),
    };
    let changes = report
        .iter()
        .flat_map(|r| &r.changes)
        .map(|c| ChangeLine {
            label: match c.change {
                Change::Merge => "merge: effects may be lost",
                Change::Split => "split: an effect may run twice",
                Change::ToQuarantine => "to quarantine",
                Change::ToReconcile => "to reconciliation",
                Change::Other => "other",
            },
            merge: c.change == Change::Merge,
            strategy: c.strategy.clone(),
            event_type: c.event_type.clone(),
            transition: c.transition.clone(),
            deliveries: c.deliveries,
            examples: c.examples.clone(),
        })
        .collect();
    let page = ReplayPage {
        nav,
        candidate,
        hours,
        error,
        report,
        changes,
    };
    Ok(html(HttpResponse::build(status), &page))
}
