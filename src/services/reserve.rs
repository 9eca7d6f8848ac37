//! Taking a business key for an effect: the one way a reservation is made,
//! for a delivery's decision, a case processed as distinct and a failed
//! effect sent again alike. The claim is atomic (an insert that does nothing
//! on conflict, or a compare-and-set on the fencing token): the caller that
//! loses it decides again against the winner's row, never applies.
//!
//! What a claim journals is planned here as values (`planned`) and given
//! back only when the claim took (`Reserved::Won`); the caller records it.

use chrono::{DateTime, Utc};
use sea_orm::DbErr;
use uuid::Uuid;

use super::engine::Engine;
use crate::domain::delivery::DeliveryId;
use crate::domain::journal::{EffectSettled, KeyReserved, KeySummary, KeyTaken, SettlementOutcome};
use crate::providers::sinks::{self, SinkKind};
use crate::store::Tx;

/// An effect to apply once the transaction that reserved it has committed.
#[derive(Debug, Clone)]
pub struct EffectJob {
    pub key: String,
    pub effect_id: Uuid,
    pub fencing_token: i64,
    pub effect_type: String,
    pub delivery_id: DeliveryId,
}

/// What a reservation claims: the key, the effect and its fencing token,
/// and the provider's operation the effect consumes, if it cites one.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    pub key: String,
    pub effect_id: Uuid,
    pub fencing_token: i64,
    pub provider_ref: Option<String>,
}

/// What taking a key came to.
#[derive(Debug)]
pub enum Reserved {
    /// The key is taken by someone else: nothing was written.
    Lost,
    /// The key is ours: the events to journal in this transaction, and the
    /// effect to apply once it has committed (`None`: a `record` sink's
    /// effect, applied with the claim).
    Won {
        taken: Box<KeyTaken>,
        job: Option<EffectJob>,
    },
}

/// Reserves `claim` for the effect `key` describes. Nothing is journaled
/// here: on `Won`, the caller records `taken` in the same transaction.
pub async fn reserve_effect(
    tx: &mut Tx<'_>,
    engine: &Engine,
    sink: &str,
    delivery_id: DeliveryId,
    key: &KeySummary,
    claim: Claim,
    at: DateTime<Utc>,
) -> Result<Reserved, DbErr> {
    let planned = planned(key, claim, sink, engine.lease(), delivery_id, at);
    let Some(taken) = tx.reserve(planned, at).await? else {
        return Ok(Reserved::Lost);
    };
    let job = taken.applied.is_none().then(|| EffectJob {
        key: taken.reserved.key.clone(),
        effect_id: taken.reserved.effect_id,
        fencing_token: taken.reserved.fencing_token,
        effect_type: key.effect_type.clone(),
        delivery_id,
    });
    Ok(Reserved::Won {
        taken: Box::new(taken),
        job,
    })
}

/// What claiming `claim` for `key` journals: its reservation, leased for
/// `lease` and kept for the key's horizon, and, when the sink is `record`
/// (the ledger itself, no external call), the effect applied with it.
fn planned(
    key: &KeySummary,
    claim: Claim,
    sink: &str,
    lease: chrono::Duration,
    delivery_id: DeliveryId,
    at: DateTime<Utc>,
) -> KeyTaken {
    let reserved = KeyReserved {
        key: claim.key,
        strategy: key.strategy.clone(),
        strength: key.strength,
        effect_type: key.effect_type.clone(),
        criticality: key.criticality,
        effect_id: claim.effect_id,
        fencing_token: claim.fencing_token,
        lease_until: at + lease,
        expires_at: at + horizon_of(key),
        discriminants: key.discriminants.clone(),
        sink: sink.to_owned(),
        delivery_id,
        provider_ref: claim.provider_ref,
    };
    let applied = (sink == SinkKind::Record.name()).then(|| EffectSettled {
        key: reserved.key.clone(),
        effect_id: reserved.effect_id,
        fencing_token: reserved.fencing_token,
        outcome: SettlementOutcome::Applied,
        result: Some(sinks::recorded()),
        authoritative_ref: None,
        error: None,
        case_id: None,
        delivery_id,
    });
    KeyTaken { reserved, applied }
}

/// The key of an effect processed again under a matched key.
pub fn derived_key(key: &str, delivery_id: DeliveryId) -> String {
    format!("{key}~{delivery_id}")
}

/// The business key a reservation key was derived from.
pub fn base_key(key: &str) -> &str {
    key.split_once('~').map_or(key, |(base, _)| base)
}

fn horizon_of(key: &KeySummary) -> chrono::Duration {
    chrono::Duration::seconds(i64::try_from(key.horizon_secs).unwrap_or(i64::MAX / 1000))
}
