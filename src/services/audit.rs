//! The audit trail, for `GET /audit`: every operator action the journal
//! holds (sign-ins and refusals, operators and tokens changed, cases resolved
//! and commented, raw bodies read, fixtures exported, breakers reset), newest
//! first, who did what, filtered by who and by kind; each entry names its
//! journal position.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sea_orm::{DatabaseConnection, DbErr};
use serde_json::Value;
use uuid::Uuid;

use crate::domain::delivery::DeliveryId;
use crate::domain::identity::{KeySecret, is_sealed, mask};
use crate::domain::journal::audit::{self, Who};
use crate::store::access;
use crate::store::journal;

/// Journal rows read per step while looking for a filter's matches.
const STEP: u64 = 500;
/// Most journal rows one page reads, matches or not: a filter matching
/// nothing recent answers with a link further back instead of reading the
/// whole trail at once.
const MOST_READ: usize = 20_000;

/// What to show: whose actions, of which kind, before which position.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// An operator's or API token's name, exactly.
    pub who: Option<String>,
    /// An entry kind (`case_resolved`, `signed_in`, ...).
    pub kind: Option<String>,
    /// Older than this journal position.
    pub before: Option<i64>,
}

/// One operator action.
#[derive(Debug, Clone)]
pub struct Entry {
    pub position: i64,
    pub at: DateTime<Utc>,
    pub who: String,
    pub kind: &'static str,
    pub what: String,
    pub case_id: Option<Uuid>,
    pub delivery_id: Option<DeliveryId>,
}

/// A page of the trail, and where the next (older) one starts.
#[derive(Debug, Clone)]
pub struct Page {
    pub entries: Vec<Entry>,
    pub older: Option<i64>,
}

/// Up to `limit` entries matching `filter`, newest first.
pub async fn page(
    db: &DatabaseConnection,
    secret: &KeySecret,
    filter: &Filter,
    limit: usize,
) -> Result<Page, DbErr> {
    let names = names(db).await?;
    // A name typed at a refused sign-in is shown as its tag: the filter
    // finds it by the name as typed too.
    let typed = filter.who.as_deref().map(|w| unknown_name(secret, w));
    let mut entries = Vec::new();
    let mut before = filter.before;
    let mut read = 0;
    loop {
        let rows = journal::newest_audited(db, before, STEP)
            .await
            .map_err(|e| DbErr::Custom(e.to_string()))?;
        let Some(last) = rows.last() else {
            return Ok(Page {
                entries,
                older: None,
            });
        };
        before = Some(last.position);
        read += rows.len();
        for stored in rows {
            let Some(audited) = audit::audited(&stored.event) else {
                continue;
            };
            let (who, tagged) = match audited.who {
                Who::Named(name) => (name, false),
                Who::Id(id) => (names.get(&id).cloned().unwrap_or(id), false),
                Who::System(what) => (what.to_owned(), false),
                Who::Unknown(name) => (unknown_name(secret, &name), true),
            };
            let wanted = |w: &String| *w == who || (tagged && typed.as_ref() == Some(&who));
            if filter.who.as_ref().is_some_and(|w| !wanted(w))
                || filter.kind.as_deref().is_some_and(|k| k != audited.kind)
            {
                continue;
            }
            entries.push(Entry {
                position: stored.position,
                at: stored.recorded_at,
                who,
                kind: audited.kind,
                what: audited.what,
                case_id: audited.case_id,
                delivery_id: stored.delivery_id,
            });
            if entries.len() == limit {
                return Ok(Page {
                    older: Some(stored.position),
                    entries,
                });
            }
        }
        if read >= MOST_READ {
            return Ok(Page {
                entries,
                older: before,
            });
        }
    }
}

/// How a name no operator has is shown: its tag, abbreviated
/// (`hmac:3f2a9c1e…`). A refusal journaled before names were tagged holds
/// what was typed; it is tagged here, so it is never shown either.
fn unknown_name(secret: &KeySecret, journaled: &str) -> String {
    let sealed = if is_sealed(journaled) {
        journaled.to_owned()
    } else {
        crate::services::access::unknown_name(secret, journaled)
    };
    mask(&Value::String(sealed))
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Operators' and API tokens' names by id, for the events that keep ids.
async fn names(db: &DatabaseConnection) -> Result<HashMap<String, String>, DbErr> {
    let mut names: HashMap<String, String> = access::operators(db)
        .await?
        .into_iter()
        .map(|o| (o.id, o.name))
        .collect();
    for token in access::tokens(db).await? {
        names.insert(token.id, format!("token {}", token.name));
    }
    Ok(names)
}

/// The kinds an entry may have, for the filter's choices.
pub const KINDS: [&str; 19] = [
    "signed_in",
    "sign_in_refused",
    "signed_out",
    "operator_added",
    "operator_disabled",
    "role_changed",
    "password_changed",
    "password_link_issued",
    "token_issued",
    "token_revoked",
    "setup_completed",
    "case_resolved",
    "case_commented",
    "case_assigned",
    "raw_body_read",
    "fixture_exported",
    "provider_asked",
    "breaker_reset",
    "legacy_effects_imported",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_journaled_before_tags_is_shown_as_the_tag_it_would_have_had() {
        let secret = KeySecret::from_bytes(b"a secret of sixteen bytes").unwrap();
        let typed = "Correct-Horse-7319";
        let now = crate::services::access::unknown_name(&secret, typed);
        let shown = unknown_name(&secret, typed);
        assert!(!shown.contains(typed));
        assert_eq!(shown, unknown_name(&secret, &now));
        assert!(
            shown.starts_with("hmac:") && shown.ends_with('…'),
            "{shown}"
        );
    }
}
