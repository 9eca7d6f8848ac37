//! Taking a business key for an effect: the one way a reservation is made,
//! for a delivery's decision, a case processed as distinct and a failed
//! effect sent again alike. The claim is atomic (an insert that does nothing
//! on conflict, or a compare-and-set on the fencing token): the caller that
//! loses it decides again against the winner's row, never applies.

use chrono::{DateTime, Utc};
use sea_orm::DbErr;
use uuid::Uuid;

use super::engine::Engine;
use crate::domain::delivery::DeliveryId;
use crate::domain::journal::{
    EffectSettled, JournalEvent, KeyReserved, KeySummary, SettlementOutcome,
};
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
    /// A `record` sink's effect: its ledger row, applied with the claim.
    Applied,
    /// The effect to apply once the transaction has committed.
    ToApply(EffectJob),
}

impl Reserved {
    /// The effect to run after commit; `None` when there is none (applied
    /// with the claim), or `Err` when the claim was lost.
    pub fn won(self) -> Result<Option<EffectJob>, Lost> {
        match self {
            Self::Lost => Err(Lost),
            Self::Applied => Ok(None),
            Self::ToApply(job) => Ok(Some(job)),
        }
    }
}

/// The key was taken by someone else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lost;

/// Reserves `claim` for the effect `key` describes (journaled `KeyReserved`).
/// A `record` sink's effect is its ledger row, applied with the claim; any
/// other is returned as a job to run after commit.
pub async fn reserve_effect(
    tx: &mut Tx<'_>,
    engine: &Engine,
    sink: &str,
    delivery_id: DeliveryId,
    key: &KeySummary,
    claim: Claim,
    at: DateTime<Utc>,
) -> Result<Reserved, DbErr> {
    let Claim {
        key: claim_key,
        effect_id,
        fencing_token: token,
        provider_ref,
    } = claim;
    let reserved = KeyReserved {
        key: claim_key.clone(),
        strategy: key.strategy.clone(),
        strength: key.strength,
        effect_type: key.effect_type.clone(),
        criticality: key.criticality,
        effect_id,
        fencing_token: token,
        lease_until: at + engine.lease(),
        expires_at: at + horizon_of(key),
        discriminants: key.discriminants.clone(),
        sink: sink.to_owned(),
        delivery_id,
        provider_ref,
    };
    let applied = (sink == SinkKind::Record.name()).then(|| EffectSettled {
        key: claim_key.clone(),
        effect_id,
        fencing_token: token,
        outcome: SettlementOutcome::Applied,
        result: Some(sinks::recorded()),
        authoritative_ref: None,
        error: None,
        case_id: None,
        delivery_id,
    });
    if !tx.reserve(&reserved, applied.as_ref(), at).await? {
        return Ok(Reserved::Lost);
    }
    tx.append(Some(delivery_id), &JournalEvent::KeyReserved(reserved), at);
    Ok(match applied {
        Some(settled) => {
            tx.append(Some(delivery_id), &JournalEvent::EffectApplied(settled), at);
            Reserved::Applied
        }
        None => Reserved::ToApply(EffectJob {
            key: claim_key,
            effect_id,
            fencing_token: token,
            effect_type: key.effect_type.clone(),
            delivery_id,
        }),
    })
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

/// The keys a decision on `key` reads: its own, then older versions'.
pub fn business_keys(key: &KeySummary) -> Vec<String> {
    std::iter::once(&key.key)
        .chain(&key.older_keys)
        .cloned()
        .collect()
}
