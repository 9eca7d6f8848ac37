//! `GET /strategies`: for engineers, every strategy version — fingerprint,
//! first and last use, keys alive within the horizon, effects, open cases —
//! and why its collision breaker is or is not tripped, with the figures and
//! the minimum of deliveries it is judged from.

use actix_session::Session;
use actix_web::{HttpResponse, get, web};
use askama::Template;
use chrono::Utc;

use super::format::{Nav, Stamp};
use super::html;
use crate::auth::Principal;
use crate::routes::error::UiError;
use crate::services::strategy_list::{self, StrategyLine};
use crate::state::AppState;

/// One version as the page shows it.
pub struct Row {
    pub line: StrategyLine,
    pub state: &'static str,
    pub first_used: Option<Stamp>,
    pub last_used: Option<Stamp>,
}

/// `templates/strategies.html`.
#[derive(Template)]
#[template(path = "strategies.html")]
pub struct StrategiesPage {
    pub nav: Nav,
    /// Versions that keyed something, then the others.
    pub used: Vec<Row>,
    pub unused: Vec<Row>,
    /// May replay a candidate (the form is shown).
    pub can_replay: bool,
    /// The candidate form's fields, empty.
    pub candidate: &'static str,
    pub hours: i64,
}

#[get("/strategies")]
pub async fn show(
    state: web::Data<AppState>,
    session: Session,
    operator: Principal,
) -> Result<HttpResponse, UiError> {
    let now = Utc::now();
    let engine = &state.engine;
    crate::services::projector::before_reading(engine).await;
    let lines = strategy_list::list(&engine.db, &engine.catalog, &engine.config, now)
        .await
        .map_err(UiError::internal)?;
    let (used, unused): (Vec<Row>, Vec<Row>) = lines
        .into_iter()
        .map(|line| Row {
            state: if line.retired {
                "retired"
            } else if line.current {
                "current"
            } else {
                "older version"
            },
            first_used: line.first_used.map(|at| Stamp::new(at, now)),
            last_used: line.last_used.map(|at| Stamp::new(at, now)),
            line,
        })
        .partition(|row| row.line.deliveries > 0 || row.line.effects > 0);
    let page = StrategiesPage {
        nav: Nav::new(&session, &operator, "strategies")?,
        used,
        unused,
        can_replay: operator.may(crate::auth::Action::Replay),
        candidate: "",
        hours: 24,
    };
    Ok(html(HttpResponse::Ok(), &page))
}
