//! Searching deliveries, for `GET /api/deliveries` and the search page alike:
//! the parameters as people type them, parsed once; pages newest first behind
//! an opaque cursor.
//!
//! `q` is matched exactly against the delivery id, the provider's event or
//! delivery id, the business key and the resource (a payment id), as typed and
//! in lower and upper case; a resource stored as its keyed hash (sensitive) is
//! matched by hashing each spelling the same way.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use serde::{Deserialize, Serialize};

use super::engine::Engine;
use crate::domain::identity::ResourcePaths;
use crate::store::entities::delivery;
use crate::store::search::{self, After, Filter, Query};

/// Rows per page unless asked otherwise, and the most a page holds.
pub const DEFAULT_LIMIT: u64 = 50;
pub const MAX_LIMIT: u64 = 200;

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
    #[serde(default)]
    pub cursor: Option<String>,
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

/// One page of results, and the cursor of the next one when there is more.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Page {
    pub deliveries: Vec<Found>,
    pub next_cursor: Option<String>,
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
    let filter = filter(engine, params)?;
    let limit = limit(params.limit.as_deref())?;
    let after = match present(&params.cursor) {
        Some(cursor) => Some(decode(cursor)?),
        None => None,
    };
    // One row more than shown says whether a next page exists.
    let mut rows = search::page(&engine.db, &filter, after.as_ref(), limit + 1).await?;
    let more = rows.len() as u64 > limit;
    rows.truncate(limit as usize);
    let next_cursor = match rows.last() {
        Some(last) if more => Some(encode(last)),
        _ => None,
    };
    Ok(Page {
        deliveries: rows.into_iter().map(found).collect(),
        next_cursor,
    })
}

fn filter(engine: &Engine, params: &Params) -> Result<Filter, SearchError> {
    let q = present(&params.q).map(|text| {
        let spellings = spellings(text);
        Query {
            resources: spellings
                .iter()
                .flat_map(|s| ResourcePaths::query(s, &engine.key_secret))
                .collect(),
            texts: spellings,
        }
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

/// What was typed, and the same in lower and in upper case (ASCII letters
/// only), each at most once: ids are stored in one case, and people type them
/// in another (`PAY_WALK_1` for `pay_walk_1`). Each is an equality on an
/// index, like the text itself; an id that mixes cases is found as pasted.
pub fn spellings(text: &str) -> Vec<String> {
    let mut spellings = vec![text.to_owned()];
    for other in [text.to_ascii_lowercase(), text.to_ascii_uppercase()] {
        if !spellings.contains(&other) {
            spellings.push(other);
        }
    }
    spellings
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
    // Nanoseconds: SQLite keeps a reception time to the nanosecond.
    let at = row
        .received_at
        .timestamp_nanos_opt()
        .unwrap_or_else(|| row.received_at.timestamp_micros().saturating_mul(1000));
    URL_SAFE_NO_PAD.encode(format!("{at}|{}", row.delivery_id))
}

fn decode(cursor: &str) -> Result<After, SearchError> {
    let invalid = || SearchError::Invalid("cursor is not one this search returned".to_owned());
    let bytes = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| invalid())?;
    let text = String::from_utf8(bytes).map_err(|_| invalid())?;
    let (at, id) = text.split_once('|').ok_or_else(invalid)?;
    let nanos = at.parse::<i64>().map_err(|_| invalid())?;
    Ok(After {
        received_at: DateTime::from_timestamp_nanos(nanos),
        delivery_id: id.to_owned(),
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
        assert_eq!(after.received_at, at);
        assert_eq!(after.delivery_id, row.delivery_id);
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
