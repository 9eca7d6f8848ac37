//! Taking a business key for an effect outside a delivery's decision: a case
//! processed as distinct and a failed effect sent again after a status
//! look-up. The claim is atomic (an insert that does nothing on conflict, or
//! a compare-and-set on the fencing token); what it journals is planned as
//! values (`plan::take`) and given back only when the claim took.

use chrono::{DateTime, Utc};
use sea_orm::DbErr;

use super::engine::Engine;
use crate::domain::delivery::DeliveryId;
use crate::domain::journal::{KeySummary, KeyTaken};
use crate::domain::plan::{self, Claim};
use crate::store::Tx;

/// Reserves `claim` for the effect `key` describes; `None` when the key is
/// taken (nothing was written). On `Some`, the caller journals the key taken
/// in the same transaction (`Tx::append_taken`) and runs its effect
/// (`plan::job_of`) once it has committed.
pub async fn reserve_effect(
    tx: &mut Tx<'_>,
    engine: &Engine,
    sink: &str,
    delivery_id: DeliveryId,
    key: &KeySummary,
    claim: Claim,
    at: DateTime<Utc>,
) -> Result<Option<KeyTaken>, DbErr> {
    let taken = plan::take(key, claim, sink, engine.lease(), delivery_id, at);
    Ok(tx.reserve(&taken, at).await?.then_some(taken))
}
