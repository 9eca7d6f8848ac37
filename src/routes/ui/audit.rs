//! `GET /audit`: the audit trail for engineers and admins — who signed in
//! (or was refused), changed an operator or a token, resolved or commented
//! on a case, read a raw body, exported a fixture, reset a breaker — newest
//! first, filtered by who and by kind, 100 a page, each entry with its
//! journal position and links to its case or delivery.

use actix_session::Session;
use actix_web::{HttpResponse, get, web};
use askama::Template;
use chrono::Utc;
use serde::{Deserialize, Serialize};

use super::format::{Nav, Stamp, filters};
use super::html;
use crate::auth::Principal;
use crate::routes::error::UiError;
use crate::services::audit::{self, Filter, KINDS};
use crate::state::AppState;

/// Entries a page shows.
const PAGE: usize = 100;

/// The query string, as sent.
#[derive(Debug, Default, Deserialize, Serialize)]
pub struct Query {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub who: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<i64>,
}

/// One entry as the page shows it.
pub struct Line {
    pub position: i64,
    pub at: Stamp,
    pub who: String,
    pub kind: &'static str,
    pub what: String,
    pub case: Option<String>,
    pub delivery: Option<String>,
}

/// `templates/audit.html`.
#[derive(Template)]
#[template(path = "audit.html")]
pub struct AuditPage {
    pub nav: Nav,
    pub who: String,
    pub kind: String,
    pub kinds: &'static [&'static str],
    pub lines: Vec<Line>,
    /// The next (older) page's address, when there may be one.
    pub older: Option<String>,
    pub filtered: bool,
}

#[get("/audit")]
pub async fn show(
    state: web::Data<AppState>,
    session: Session,
    operator: Principal,
    query: web::Query<Query>,
) -> Result<HttpResponse, UiError> {
    let query = query.into_inner();
    let who = query.who.trim().to_owned();
    let kind = query.kind.trim().to_owned();
    let filter = Filter {
        who: (!who.is_empty()).then(|| who.clone()),
        kind: (!kind.is_empty()).then(|| kind.clone()),
        before: query.before,
    };
    let page = audit::page(state.db(), &state.engine.key_secret, &filter, PAGE)
        .await
        .map_err(UiError::internal)?;
    let now = Utc::now();
    let older = page.older.map(|before| {
        let next = Query {
            who: who.clone(),
            kind: kind.clone(),
            before: Some(before),
        };
        format!(
            "/audit?{}",
            serde_urlencoded::to_string(&next).unwrap_or_default()
        )
    });
    let lines = page
        .entries
        .into_iter()
        .map(|e| Line {
            position: e.position,
            at: Stamp::new(e.at, now),
            who: e.who,
            kind: e.kind,
            what: e.what,
            case: e.case_id.map(|id| id.to_string()),
            delivery: e.delivery_id.map(|id| id.to_string()),
        })
        .collect();
    let page = AuditPage {
        nav: Nav::new(&session, &operator, "audit")?,
        filtered: filter.who.is_some() || filter.kind.is_some() || filter.before.is_some(),
        who,
        kind,
        kinds: &KINDS,
        lines,
        older,
    };
    Ok(html(HttpResponse::Ok(), &page))
}
