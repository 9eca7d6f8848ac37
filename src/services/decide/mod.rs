//! Deciding one delivery inside its ingest transaction: read the transport
//! evidence and what exists for the business key, run the pure decision
//! matrix, and when it says `process`, take the key atomically.
//!
//! There is no check-then-insert: the reservation is an insert that does
//! nothing on conflict (or a compare-and-set on the fencing token), and a
//! delivery that loses the race decides again against the winner's row.
//!
//! `evidence.rs` reads what a key's state says to the decision matrix.

mod evidence;

pub use evidence::differences;
use evidence::{Evidence, evidence_of};

use chrono::{DateTime, Utc};
use sea_orm::DbErr;
use serde_json::Value;
use uuid::Uuid;

use super::engine::Engine;
use super::reserve::{Claim, EffectJob, Reserved, derived_key, reserve_effect};
use crate::domain::decision::{
    self, Action, Decision, DecisionInput, Existing, FieldDifference, Horizon, Identity, Reason,
    TransportMatch,
};
use crate::domain::delivery::DeliveryId;
use crate::domain::journal::{KeyDerived, KeySummary, KeyTaken, Layer};
use crate::store::{KeyState, Tx};

/// What the business layer decided: the key it took, if any, to journal
/// in the same transaction, and the effect to run after commit.
pub struct Verdict {
    pub decision: Decision,
    pub layer: Layer,
    pub matched_key: Option<String>,
    pub taken: Option<KeyTaken>,
    pub job: Option<EffectJob>,
}

/// Claims the transport identity for this delivery (the first reception of
/// it), or else reports what the existing first reception says about it.
pub async fn claim_transport(
    tx: &mut Tx<'_>,
    delivery_id: DeliveryId,
    derived: &KeyDerived,
    by_header: bool,
    at: DateTime<Utc>,
) -> Result<(TransportMatch, Option<DeliveryId>), DbErr> {
    let found = tx
        .claim_transport_link(&delivery_id.to_string(), derived, at)
        .await?;
    let Some(link) = found else {
        return Ok((TransportMatch::FirstSeen, None));
    };
    let first: Option<DeliveryId> = link.first_delivery_id.parse().ok();
    let ours = derived.body_fingerprint.clone().unwrap_or_default();
    let evidence = if link.body_fingerprint == ours {
        if by_header {
            TransportMatch::DeliveryIdRetry
        } else {
            TransportMatch::RawBodyMatch
        }
    } else {
        TransportMatch::DeliveryIdCollision {
            first_delivery: first.map(|f| f.as_uuid()).unwrap_or_default(),
            differences: vec![FieldDifference {
                field: "body (without volatile fields)".to_owned(),
                existing: Value::String(link.body_fingerprint),
                new: Value::String(ours),
            }],
        }
    };
    Ok((evidence, first))
}

/// Decides a delivery that has no business identity: always kept, quarantined.
pub fn decide_unkeyed(identity: Identity, transport: TransportMatch) -> Decision {
    decision::decide(&DecisionInput {
        identity,
        transport,
        existing: Existing::Nothing,
        horizon: Horizon::Within,
        differences: Vec::new(),
        missing_fields: Vec::new(),
        criticality: crate::domain::confidence::Criticality::Critical,
        lookup_available: false,
        breaker_tripped: false,
    })
}

/// Decides a keyed delivery and, on `process`, reserves its key: read what
/// exists for the key (`Tx::key_state`), run the pure decision matrix on it,
/// and take the key the decision names. An effect whose sink is `record`
/// (the ledger itself, no external call) is applied with the claim; any
/// other is returned as a job to run after commit. What the claim journals
/// comes back in the verdict, for the caller to record.
pub async fn decide_keyed(
    tx: &mut Tx<'_>,
    engine: &Engine,
    sink: &str,
    delivery_id: DeliveryId,
    key: &KeySummary,
    transport: TransportMatch,
    at: DateTime<Utc>,
) -> Result<Verdict, DbErr> {
    // On PostgreSQL a loser of the insert race waits for the winner's commit,
    // then sees its row: two passes always suffice; the third is a safety net.
    for _ in 0..3 {
        // `None`: a reservation committed between two reads; look again.
        let Some(state) = tx.key_state(key).await? else {
            continue;
        };
        let evidence = evidence_of(&state, key, at);
        let layer = layer_of(&evidence, &transport);
        let input = DecisionInput {
            identity: Identity::Keyed {
                strength: key.strength,
            },
            transport: transport.clone(),
            existing: evidence.existing,
            horizon: evidence.horizon,
            differences: evidence.differences,
            missing_fields: evidence.missing,
            criticality: key.criticality,
            // Whether the provider's API can be asked before a person: a
            // held delivery's case is then put to it at once.
            lookup_available: engine.lookup_for(key).is_some(),
            breaker_tripped: engine.is_tripped(&key.strategy),
        };
        let mut decision = decision::decide(&input);
        let matched_key = state.through().map(str::to_owned);
        if decision.action != Action::Process {
            return Ok(Verdict {
                decision,
                layer,
                matched_key,
                taken: None,
                job: None,
            });
        }
        let claim = claim_for(decision.reason, &state, key, delivery_id);
        let effect_id = claim.effect_id;
        // Lost: another delivery took the key meanwhile; decide again
        // against its row.
        let Reserved::Won { taken, job } =
            reserve_effect(tx, engine, sink, delivery_id, key, claim, at).await?
        else {
            continue;
        };
        decision.effect_id = Some(effect_id);
        return Ok(Verdict {
            decision,
            layer,
            matched_key,
            taken: Some(*taken),
            job,
        });
    }
    // Never reached in practice; holding the delivery is the safe answer.
    Err(DbErr::Custom(
        "reservation contended three times".to_owned(),
    ))
}

/// The key a `process` decision takes: a new key for a new effect; the
/// failed reservation's own key with the next fencing token when a
/// definitive failure without effect is retried; otherwise (processing under
/// uncertainty, a flagged reversible effect) a distinct effect with a key of
/// its own, never the matched one.
fn claim_for(reason: Reason, state: &KeyState, key: &KeySummary, delivery_id: DeliveryId) -> Claim {
    let (claim_key, effect_id, fencing_token) = match (reason, state) {
        (Reason::NewKey, _) => (key.key.clone(), Uuid::now_v7(), 1),
        (Reason::PreviousAttemptFailedWithoutEffect, KeyState::Reserved { row, .. }) => (
            row.key.clone(),
            row.effect_id.parse().unwrap_or_else(|_| Uuid::now_v7()),
            row.fencing_token + 1,
        ),
        _ => (derived_key(&key.key, delivery_id), Uuid::now_v7(), 1),
    };
    Claim {
        key: claim_key,
        effect_id,
        fencing_token,
        provider_ref: None,
    }
}

/// Which layer decided: the transport layer when nothing exists for the key
/// within its horizon and the delivery was already seen; otherwise the
/// business layer.
fn layer_of(evidence: &Evidence, transport: &TransportMatch) -> Layer {
    let unknown_key = matches!(evidence.existing, Existing::Nothing)
        && !matches!(evidence.horizon, Horizon::Passed { .. });
    match transport {
        TransportMatch::FirstSeen => Layer::Business,
        _ if unknown_key => Layer::Transport,
        _ => Layer::Business,
    }
}

#[cfg(test)]
mod tests;
