//! `GET /dashboard`: is Unicity deciding well? Deliveries per hour by
//! decision, decisions by reason, key strengths per strategy, how old the
//! open cases are, and each strategy's collision rate against its breaker's
//! threshold — as SVG drawn on the server (`charts`), no script. Tripped
//! breakers are listed, with a reset form for those allowed to reset them
//! (`POST /dashboard/breakers/reset`, reason required, journaled).

use std::collections::BTreeMap;

use actix_session::Session;
use actix_web::{HttpResponse, get, post, web};
use askama::Template;
use chrono::{Duration, Utc};
use serde::Deserialize;

use super::charts::{self, Bar, Chart};
use super::csrf::CsrfForm;
use super::format::{Nav, Stamp};
use super::{html, see_other};
use crate::auth::{Action, Principal};
use crate::routes::error::UiError;
use crate::services::breakers::{self, PersonsReset};
use crate::services::dashboard::{self, AGE_BUCKETS, Dashboard, PairCount, WINDOW_HOURS};
use crate::services::reconcile;
use crate::state::AppState;

/// A tripped breaker as the page lists it.
pub struct BreakerLine {
    pub strategy: String,
    pub deliveries: i64,
    pub collisions: i64,
    pub tripped: Stamp,
}

/// The latest reconciliation of one provider as the page lists it.
pub struct ReconciliationLine {
    pub provider: String,
    pub window: String,
    pub ran: Stamp,
    pub expected: i64,
    pub applied: i64,
    pub missing: i64,
    pub unexpected: i64,
    pub error: Option<String>,
}

/// The headline figure of one strategy, as the page shows it.
pub struct HeadlineLine {
    pub strategy: String,
    pub share: String,
    pub sure: i64,
    pub deliveries: i64,
}

/// `templates/dashboard.html`.
#[derive(Template)]
#[template(path = "dashboard.html")]
pub struct DashboardPage {
    pub nav: Nav,
    /// Per strategy, the share decided on a strong key or an existing result.
    pub headline: Vec<HeadlineLine>,
    pub charts: Vec<Chart>,
    pub threshold: String,
    pub window: String,
    pub breakers: Vec<BreakerLine>,
    pub can_reset: bool,
    /// Expected (the provider's operations) against applied, per provider.
    pub reconciliations: Vec<ReconciliationLine>,
    pub open_missing: i64,
    pub open_unexpected: i64,
    pub notice: Option<&'static str>,
    /// Said when the delivery figures are behind the journal.
    pub stale: Option<String>,
}

#[derive(Deserialize)]
pub struct Done {
    done: Option<String>,
}

const NOTICES: [(&str, &str); 3] = [
    (
        "reset",
        "The breaker is reset: auto-ignore resumes for its strategy.",
    ),
    (
        "reason_required",
        "A reset needs a reason saying why it is safe.",
    ),
    ("not_tripped", "That strategy's breaker was not tripped."),
];

#[get("/dashboard")]
pub async fn show(
    state: web::Data<AppState>,
    session: Session,
    operator: Principal,
    done: web::Query<Done>,
) -> Result<HttpResponse, UiError> {
    let now = Utc::now();
    let figures = dashboard::dashboard(&state.engine, now)
        .await
        .map_err(UiError::internal)?;
    let reconciled = reconcile::figures(&state.engine)
        .await
        .map_err(UiError::internal)?;
    let utc = |at: chrono::DateTime<Utc>| at.format("%Y-%m-%d %H:%M UTC").to_string();
    let page = DashboardPage {
        nav: Nav::new(&session, &operator, "dashboard")?,
        reconciliations: reconciled
            .runs
            .into_iter()
            .map(|r| ReconciliationLine {
                window: format!("{} → {}", utc(r.window_from), utc(r.window_to)),
                ran: Stamp::new(r.ran_at, now),
                provider: r.provider,
                expected: r.expected,
                applied: r.applied,
                missing: r.missing,
                unexpected: r.unexpected,
                error: r.error,
            })
            .collect(),
        headline: figures
            .headline
            .iter()
            .map(|h| HeadlineLine {
                strategy: h.strategy.clone(),
                share: format!("{:.1} %", h.share() * 100.0),
                sure: h.sure,
                deliveries: h.deliveries,
            })
            .collect(),
        open_missing: reconciled.open_missing,
        open_unexpected: reconciled.open_unexpected,
        charts: charts_of(&figures),
        threshold: percent(figures.threshold),
        window: format!("{} min", figures.breaker_window_secs / 60),
        breakers: figures
            .tripped
            .iter()
            .map(|t| BreakerLine {
                strategy: t.strategy.clone(),
                deliveries: t.deliveries,
                collisions: t.collisions,
                tripped: Stamp::new(t.tripped_at, now),
            })
            .collect(),
        can_reset: operator.may(Action::ResetBreakers),
        notice: done
            .done
            .as_deref()
            .and_then(|d| NOTICES.iter().find(|(c, _)| *c == d))
            .map(|(_, n)| *n),
        stale: figures.freshness.note(),
    };
    Ok(html(HttpResponse::Ok(), &page))
}

fn percent(rate: f64) -> String {
    format!("{:.2} %", rate * 100.0)
}

fn charts_of(d: &Dashboard) -> Vec<Chart> {
    vec![
        per_hour(d),
        pairs(
            "reasons",
            format!("Decisions by reason, last {WINDOW_HOURS} h"),
            &d.per_reason,
            |p| format!("{} · {}", p.first, p.second),
            |p| p.first.clone(),
        ),
        pairs(
            "strengths",
            format!("Key strength per strategy, last {WINDOW_HOURS} h"),
            &d.per_strength,
            |p| p.first.clone(),
            |p| p.second.clone(),
        ),
        open_cases(d),
        collision_rates(d),
    ]
}

/// One column per hour of the window, stacked by decision.
fn per_hour(d: &Dashboard) -> Chart {
    let mut series: Vec<String> = d.per_hour.iter().map(|h| h.decision.clone()).collect();
    series.sort();
    series.dedup();
    let bars: Vec<Bar> = (0..WINDOW_HOURS)
        .map(|i| {
            let hour = d.since + Duration::hours(i);
            let label = hour.format("%H:00").to_string();
            let parts = series
                .iter()
                .filter_map(|decision| {
                    let n: i64 = d
                        .per_hour
                        .iter()
                        .filter(|h| h.hour == hour && &h.decision == decision)
                        .map(|h| h.deliveries)
                        .sum();
                    if n == 0 {
                        return None;
                    }
                    let title = format!("{decision} at {} UTC: {n}", hour.format("%Y-%m-%d %H:00"));
                    Some((decision.clone(), n as f64, title))
                })
                .collect();
            Bar { label, parts }
        })
        .collect();
    charts::columns(
        "per-hour",
        format!("Deliveries per hour by decision, last {WINDOW_HOURS} h (UTC)"),
        &series,
        &bars,
        3,
    )
}

/// One row per `row(p)`, stacked by `series(p)`.
fn pairs(
    id: &'static str,
    title: String,
    counts: &[PairCount],
    row: impl Fn(&PairCount) -> String,
    series_of: impl Fn(&PairCount) -> String,
) -> Chart {
    let mut series: Vec<String> = counts.iter().map(&series_of).collect();
    series.sort();
    series.dedup();
    let mut rows: BTreeMap<String, Vec<(String, f64, String)>> = BTreeMap::new();
    for p in counts {
        let label = row(p);
        let part = series_of(p);
        let title = format!("{label} ({part}): {}", p.deliveries);
        rows.entry(label)
            .or_default()
            .push((part, p.deliveries as f64, title));
    }
    let bars: Vec<Bar> = rows
        .into_iter()
        .map(|(label, parts)| Bar { label, parts })
        .collect();
    charts::rows(id, title, &series, &bars, None, None)
}

fn open_cases(d: &Dashboard) -> Chart {
    let series = vec!["open cases".to_owned()];
    let bars: Vec<Bar> = AGE_BUCKETS
        .iter()
        .zip(&d.open_by_age)
        .map(|((label, _), n)| Bar {
            label: (*label).to_owned(),
            parts: vec![(series[0].clone(), *n as f64, format!("{label}: {n}"))],
        })
        .collect();
    let mut chart = charts::rows(
        "open-cases",
        "Open cases by age".to_owned(),
        &series,
        &bars,
        None,
        None,
    );
    chart.empty = d.open_by_age.iter().all(|n| *n == 0);
    chart
}

fn collision_rates(d: &Dashboard) -> Chart {
    let series = vec!["collision rate".to_owned(), "tripped".to_owned()];
    let bars: Vec<Bar> = d
        .collisions
        .iter()
        .map(|c| Bar {
            label: c.strategy.clone(),
            parts: vec![(
                series[usize::from(c.tripped)].clone(),
                c.rate(),
                format!(
                    "{}: {} ({} collisions in {} deliveries){}",
                    c.strategy,
                    percent(c.rate()),
                    c.collisions,
                    c.deliveries,
                    if c.tripped { ", breaker tripped" } else { "" }
                ),
            )],
        })
        .collect();
    charts::rows(
        "collisions",
        format!(
            "Collision rate per strategy, last {} min, against the breaker threshold",
            d.breaker_window_secs / 60
        ),
        &series,
        &bars,
        Some(d.threshold * 2.0),
        Some((
            d.threshold,
            format!("breaker threshold: {}", percent(d.threshold)),
        )),
    )
}

#[derive(Deserialize)]
pub struct ResetForm {
    strategy: String,
    #[serde(default)]
    reason: String,
}

#[post("/dashboard/breakers/reset")]
pub async fn reset(
    state: web::Data<AppState>,
    operator: Principal,
    form: CsrfForm<ResetForm>,
) -> Result<HttpResponse, UiError> {
    let ResetForm { strategy, reason } = form.0;
    if reason.trim().is_empty() {
        return Ok(see_other("/dashboard?done=reason_required"));
    }
    let reset = breakers::reset_by(state.db(), &strategy, &operator, reason)
        .await
        .map_err(UiError::internal)?;
    breakers::refresh(&state.engine)
        .await
        .map_err(UiError::internal)?;
    Ok(see_other(match reset {
        PersonsReset::Reset => "/dashboard?done=reset",
        PersonsReset::NotTripped => "/dashboard?done=not_tripped",
        PersonsReset::Forbidden => return Err(UiError::forbidden()),
    }))
}
