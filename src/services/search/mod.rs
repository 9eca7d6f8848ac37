//! Searching deliveries, for `GET /api/deliveries` and the search page alike:
//! the parameters as people type them, parsed once; pages newest first behind
//! opaque cursors, forward (`cursor`) and back (`before`); how many match,
//! counted up to `COUNT_CAP`; and when nothing matches, the stored ids near
//! what was typed (`suggest`).
//!
//! `q` is matched exactly against the delivery id, the provider's event or
//! delivery id, the business key and the resource (a payment id), as typed and
//! in lower and upper case; a resource stored as its keyed hash (sensitive) is
//! matched by hashing each spelling the same way. `q` ending in `*` finds the
//! values that start with it instead (`domain::search`), which a keyed hash
//! cannot do: a sensitive resource is found only whole.

mod suggest;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use serde::{Deserialize, Serialize};

pub use suggest::{Suggestion, near};

use super::engine::Engine;
use super::projector::Freshness;
use crate::domain::identity::ResourcePaths;
use crate::domain::search::{Text, spellings};
use crate::store::entities::delivery;
use crate::store::search::{self, After, Filter, Query, Window};

/// Rows per page unless asked otherwise, and the most a page holds.
pub const DEFAULT_LIMIT: u64 = 50;
pub const MAX_LIMIT: u64 = 200;
/// Matches are counted up to this many; past it a search says "more than".
pub const COUNT_CAP: u64 = 1000;

/// The query string, as sent (empty fields are absent).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct Params {
    #[serde(default)]
    pub q: Option<String>,
    #[serde(default)]
    pub source: Option<String>,
    #[serde(default)]
    pub event_type: Option<String>,
    #[serde(default)]
    pub decision: Option<String>,
    /// RFC 3339, `YYYY-MM-DDTHH:MM` (a browser's local-time field, read as
    /// UTC) or `YYYY-MM-DD`.
    #[serde(default)]
    pub from: Option<String>,
    #[serde(default)]
    pub to: Option<String>,
    #[serde(default)]
    pub limit: Option<String>,
    /// A page's `next_cursor`: the page after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// A page's `previous_cursor`: the page before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
}

/// One delivery found.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Found {
    pub delivery_id: String,
    pub received_at: DateTime<Utc>,
    pub source: String,
    pub provider: String,
    pub status: String,
    pub event_type: Option<String>,
    pub provider_event_id: Option<String>,
    pub business_key: Option<String>,
    pub strategy: Option<String>,
    pub strength: Option<String>,
    /// `hmac:…` when the resource is sensitive.
    pub resource: Option<String>,
    pub decision: Option<String>,
    pub reason: Option<String>,
    pub reference_delivery_id: Option<String>,
    pub case_id: Option<String>,
}

/// One page of results, the cursors of the pages beside it, how many match
/// in all, and what was meant when nothing does.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Page {
    pub deliveries: Vec<Found>,
    /// The next (older) page, as `cursor`; absent on the last page.
    pub next_cursor: Option<String>,
    /// The previous (newer) page, as `before`; absent on the first page.
    pub previous_cursor: Option<String>,
    pub total: Total,
    /// When nothing matches `q`: stored ids near it, nearest first (at most
    /// five); empty otherwise.
    pub suggestions: Vec<Suggestion>,
    /// How current the page is: deliveries follow the journal after their
    /// commit, and a page waits for them for a short while only.
    pub freshness: Freshness,
}

/// How many deliveries match the search, all pages together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Total {
    /// The number, up to 1,000.
    pub count: u64,
    /// More than `count` match: counting stopped there.
    pub more: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// A parameter that cannot be read; the message names it.
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Db(#[from] sea_orm::DbErr),
}

/// One page of deliveries matching `params`.
pub async fn search(engine: &Engine, params: &Params) -> Result<Page, SearchError> {
    let text = match present(&params.q) {
        Some(typed) => Some(Text::parse(typed).map_err(|e| SearchError::Invalid(e.to_string()))?),
        None => None,
    };
    let filter = filter(engine, text.as_ref(), params)?;
    let limit = limit(params.limit.as_deref())?;
    let after = cursor(&params.cursor)?;
    let before = cursor(&params.before)?;
    let window = match (&after, &before) {
        (Some(_), Some(_)) => {
            return Err(SearchError::Invalid(
                "cursor and before cannot be used together".to_owned(),
            ));
        }
        (Some(after), None) => Window::Older(after),
        (None, Some(before)) => Window::Newer(before),
        (None, None) => Window::Newest,
    };
    let freshness = super::projector::caught_up(engine, super::projector::READ_WAIT).await?;
    let (deliveries, next_cursor, previous_cursor) = rows(engine, &filter, window, limit).await?;
    let counted = search::count(&engine.db, &filter, COUNT_CAP).await?;
    let total = Total {
        count: counted.min(COUNT_CAP),
        more: counted > COUNT_CAP,
    };
    let suggestions = match &text {
        Some(text) if counted == 0 => suggest::near(&engine.db, text).await?,
        _ => Vec::new(),
    };
    Ok(Page {
        deliveries: deliveries.into_iter().map(found).collect(),
        next_cursor,
        previous_cursor,
        total,
        suggestions,
        freshness,
    })
}

/// The page in `window` and the cursors of the pages beside it. A page one
/// row more than `limit` says whether there is another in its direction; the
/// page before the first is the first.
async fn rows(
    engine: &Engine,
    filter: &Filter,
    mut window: Window<'_>,
    limit: u64,
) -> Result<(Vec<delivery::Model>, Option<String>, Option<String>), SearchError> {
    let mut rows = search::page(&engine.db, filter, window, limit + 1).await?;
    if matches!(window, Window::Newer(_)) && rows.len() as u64 <= limit {
        // Nothing newer past this page: it is the first page.
        window = Window::Newest;
        rows = search::page(&engine.db, filter, window, limit + 1).await?;
    }
    let more = rows.len() as u64 > limit;
    let (next, previous) = match window {
        Window::Newer(_) => {
            // The extra row is the newest, beyond this page.
            rows.remove(0);
            (true, true)
        }
        Window::Older(_) => (more, true),
        Window::Newest => (more, false),
    };
    rows.truncate(limit as usize);
    let next = rows.last().filter(|_| next).map(encode);
    let previous = rows.first().filter(|_| previous).map(encode);
    Ok((rows, next, previous))
}

fn filter(engine: &Engine, text: Option<&Text>, params: &Params) -> Result<Filter, SearchError> {
    let q = text.map(|text| match text {
        Text::Exact(text) => {
            let spellings = spellings(text);
            Query::Exact {
                resources: spellings
                    .iter()
                    .flat_map(|s| ResourcePaths::query(s, &engine.key_secret))
                    .collect(),
                texts: spellings,
            }
        }
        Text::Prefix(prefix) => Query::Prefix {
            spellings: spellings(prefix),
        },
    });
    Ok(Filter {
        q,
        source: present(&params.source).map(str::to_owned),
        event_type: present(&params.event_type).map(str::to_owned),
        decision: present(&params.decision).map(str::to_owned),
        from: instant("from", params.from.as_deref())?,
        to: instant("to", params.to.as_deref())?,
    })
}

fn cursor(value: &Option<String>) -> Result<Option<After>, SearchError> {
    present(value).map(decode).transpose()
}

/// A parameter with something in it, trimmed.
fn present(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

fn limit(text: Option<&str>) -> Result<u64, SearchError> {
    match text.map(str::trim).filter(|t| !t.is_empty()) {
        None => Ok(DEFAULT_LIMIT),
        Some(text) => match text.parse::<u64>() {
            Ok(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
            _ => Err(SearchError::Invalid(format!(
                "limit must be a number from 1 to {MAX_LIMIT}"
            ))),
        },
    }
}

/// A time as people and browsers write it, in UTC.
fn instant(name: &str, text: Option<&str>) -> Result<Option<DateTime<Utc>>, SearchError> {
    let Some(text) = text.map(str::trim).filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Ok(Some(at.with_timezone(&Utc)));
    }
    for format in ["%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M"] {
        if let Ok(at) = NaiveDateTime::parse_from_str(text, format) {
            return Ok(Some(at.and_utc()));
        }
    }
    if let Ok(day) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        return Ok(day.and_hms_opt(0, 0, 0).map(|at| at.and_utc()));
    }
    Err(SearchError::Invalid(format!(
        "{name} must be a time such as 2026-12-01T09:30:00Z or 2026-12-01"
    )))
}

/// The cursor after `row`: opaque to clients, its position to us.
fn encode(row: &delivery::Model) -> String {
    URL_SAFE_NO_PAD.encode(&row.delivery_id)
}

fn decode(cursor: &str) -> Result<After, SearchError> {
    let invalid = || SearchError::Invalid("cursor is not one this search returned".to_owned());
    let bytes = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| invalid())?;
    let text = String::from_utf8(bytes).map_err(|_| invalid())?;
    // Cursors made before 2026-12-03 lead with the reception time.
    let id = text.rsplit_once('|').map_or(text.as_str(), |(_, id)| id);
    let id: crate::domain::delivery::DeliveryId = id.parse().map_err(|_| invalid())?;
    Ok(After {
        delivery_id: id.to_string(),
    })
}

fn found(row: delivery::Model) -> Found {
    Found {
        delivery_id: row.delivery_id,
        received_at: row.received_at,
        source: row.source,
        provider: row.provider,
        status: row.status,
        event_type: row.event_type,
        provider_event_id: row.provider_event_id,
        business_key: row.business_key,
        strategy: row.strategy,
        strength: row.strength,
        resource: row.resource,
        decision: row.decision,
        reason: row.reason,
        reference_delivery_id: row.reference_delivery_id,
        case_id: row.case_id,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_comes_back_as_the_row_it_was_made_from() {
        let at = DateTime::from_timestamp_nanos(1_764_590_400_123_456_789);
        let row = crate::store::search::sample("0193a5f0-7c1e-7b3a-9d2e-4f5a6b7c8d9e", at);
        let after = decode(&encode(&row)).unwrap();
        assert_eq!(after.delivery_id, row.delivery_id);
        let earlier = URL_SAFE_NO_PAD.encode(format!("1764590400123456789|{}", row.delivery_id));
        assert_eq!(decode(&earlier).unwrap(), after);
        assert!(decode("not a cursor").is_err());
        assert!(decode(&URL_SAFE_NO_PAD.encode("x|y")).is_err());
    }

    #[test]
    fn times_read_as_people_and_browsers_write_them() {
        let parse = |t: &str| instant("from", Some(t)).unwrap().unwrap().to_rfc3339();
        assert_eq!(parse("2026-12-01T09:30:00Z"), "2026-12-01T09:30:00+00:00");
        assert_eq!(
            parse("2026-12-01T10:30:00+01:00"),
            "2026-12-01T09:30:00+00:00"
        );
        assert_eq!(parse("2026-12-01T09:30"), "2026-12-01T09:30:00+00:00");
        assert_eq!(parse("2026-12-01"), "2026-12-01T00:00:00+00:00");
        assert!(instant("from", Some("yesterday")).is_err());
        assert_eq!(instant("from", Some("  ")).unwrap(), None);
        assert!(limit(Some("0")).is_err());
        assert!(limit(Some("201")).is_err());
        assert_eq!(limit(None).unwrap(), DEFAULT_LIMIT);
    }
}
