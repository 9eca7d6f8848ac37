//! "Did you mean": when nothing matches what was typed, the values stored
//! just below and just above it in each searched column's index (one row
//! each, read in index order: a few steps, whatever the table's size), kept
//! when near enough (`domain::search::is_close`). A typo in an id's first
//! characters sends it elsewhere in the index: that is not found.

use serde::Serialize;

use crate::domain::search::{Text, distance, is_close, spellings};
use crate::store::search;

/// Proposals shown at most.
const MOST: usize = 5;

/// A stored value near what was typed, and the column it is stored in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Suggestion {
    /// The value, whole: search for it as it is.
    pub text: String,
    /// `delivery_id`, `provider_event_id`, `business_key` or `resource`.
    pub field: &'static str,
}

/// Stored values near `text`, nearest first.
pub async fn near<C: sea_orm::ConnectionTrait>(
    conn: &C,
    text: &Text,
) -> Result<Vec<Suggestion>, sea_orm::DbErr> {
    let typed = text.as_str();
    let mut near: Vec<(usize, Suggestion)> = Vec::new();
    for spelling in spellings(typed) {
        for (field, value) in search::neighbours(conn, &spelling).await? {
            // A keyed hash is near nothing anyone types.
            let sealed = field == "resource" && value.starts_with("hmac:");
            if sealed || !is_close(typed, &value) || near.iter().any(|(_, s)| s.text == value) {
                continue;
            }
            near.push((distance(typed, &value), Suggestion { text: value, field }));
        }
    }
    near.sort_by(|(a, x), (b, y)| a.cmp(b).then_with(|| x.text.cmp(&y.text)));
    Ok(near.into_iter().take(MOST).map(|(_, s)| s).collect())
}
