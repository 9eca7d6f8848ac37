//! Planning one decision, as values: given how the delivery's transport
//! identity matched and what exists for its business key (its `Evidence`,
//! read by the store), the decision matrix's verdict, the decision as
//! journaled and, on `process`, the key to take with what taking it
//! journals. The same plan serves a reception, an item of a batch and a
//! re-decision; a case processed as distinct and a status settlement take a
//! key through `take`.
//!
//! Pure: the store reads the evidence and takes the key the plan names
//! (`Tx::decide_key`: an atomic claim that may be lost, then it plans again
//! against the winner's row); the caller records the plan (`Tx::decided`).

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};
use uuid::Uuid;

use super::confidence::{Criticality, Strength};
use super::decision::{
    self, Action, DecisionInput, Existing, FieldDifference, Horizon, Identity, LookAlike, Reason,
    TransportMatch,
};
use super::delivery::DeliveryId;
use super::journal::{
    DecisionMade, EffectSettled, KeyReserved, KeySummary, KeyTaken, Layer, SettlementOutcome,
};

/// The sink that is the effects ledger itself: its effect is applied with
/// the claim, in the same transaction, with no call out.
pub const RECORD_SINK: &str = "record";

/// What a `record` sink's applied effect holds as its result.
pub fn recorded() -> Value {
    json!({ "recorded": true })
}

/// What exists for a key, as the decision matrix is told it.
#[derive(Debug, Clone, PartialEq)]
pub struct Evidence {
    pub existing: Existing,
    /// Discriminating fields that disagree with what the match recorded.
    pub differences: Vec<FieldDifference>,
    pub missing: Vec<String>,
    pub horizon: Horizon,
    /// The older key a match was made through, when it is not the key itself.
    pub matched_key: Option<String>,
    /// The key in force whose version judges the match (its strength, its
    /// breaker) when it is not `matched_key`: the key a migration carried
    /// a retired version's effect to.
    pub judged_through: Option<String>,
    /// The reservation found under the key: taken again with the next
    /// fencing token when its failure proved no effect.
    pub reserved: Option<Claim>,
    /// A person recorded an operation with the delivery's resource, amount
    /// and currency as made by hand (`KeySummary::held_as`).
    pub made_by_hand: bool,
    /// An effect under another strategy's key that may be the same
    /// operation (`KeySummary::lacking`).
    pub look_alike: Option<LookAlike>,
}

impl Evidence {
    /// Nothing under any key: a new key, judged on the delivery's own
    /// missing discriminants.
    pub fn nothing(key: &KeySummary) -> Self {
        Self {
            existing: Existing::Nothing,
            differences: Vec::new(),
            missing: key.missing_discriminants.clone(),
            horizon: Horizon::Within,
            matched_key: None,
            judged_through: None,
            reserved: None,
            made_by_hand: false,
            look_alike: None,
        }
    }
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

/// An effect to apply once the transaction that reserved it has committed.
#[derive(Debug, Clone)]
pub struct EffectJob {
    pub key: String,
    pub effect_id: Uuid,
    pub fencing_token: i64,
    pub effect_type: String,
    pub delivery_id: DeliveryId,
}

/// Everything a keyed decision is planned on, beside what exists for its
/// key (the `Evidence`, read inside the transaction that takes the key).
pub struct Given<'a> {
    pub key: &'a KeySummary,
    pub transport: TransportMatch,
    pub route: Route,
    pub delivery_id: DeliveryId,
    pub at: DateTime<Utc>,
    /// The id a new effect gets.
    pub new_effect: Uuid,
}

/// What a keyed event is planned with that comes from the configuration and
/// the breakers, not from the store: read once when the event arrives,
/// before it waits for the writer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The sink the key's effect goes to (`RECORD_SINK`: applied with the claim).
    pub sink: &'static str,
    /// Whether the provider's API can be asked before a person.
    pub lookup_available: bool,
    /// Whether the breaker of the strategy the delivery's own key comes
    /// from is tripped.
    pub breaker_tripped: bool,
    /// The strategies (`name@version`) of its other keys in force whose
    /// breaker is tripped: a match through one of those keys is not ignored.
    pub tripped_older: Vec<String>,
    /// How long a taken key is leased to its effect.
    pub lease: Duration,
    /// Whether a key in force may stand for an effect migrated from an older
    /// version's key (`Engine::migrations_possible`): only then are migrated
    /// keys looked for.
    pub migrations_possible: bool,
}

/// A decision planned: as journaled, and the key it takes.
#[derive(Debug, Clone)]
pub struct Plan {
    pub made: DecisionMade,
    /// On `process`: the key to take, and what taking it journals.
    pub take: Option<KeyTaken>,
}

impl Plan {
    /// The effect to run after the commit: a taken key's, unless its sink
    /// applied it with the claim.
    pub fn job(&self) -> Option<EffectJob> {
        self.take.as_ref().and_then(job_of)
    }
}

/// The effect a taken key leaves to run after the commit.
pub fn job_of(taken: &KeyTaken) -> Option<EffectJob> {
    let reserved = &taken.reserved;
    taken.applied.is_none().then(|| EffectJob {
        key: reserved.key.clone(),
        effect_id: reserved.effect_id,
        fencing_token: reserved.fencing_token,
        effect_type: reserved.effect_type.clone(),
        delivery_id: reserved.delivery_id,
    })
}

/// Plans a keyed delivery's decision: the matrix on its evidence and, when
/// it says `process`, the key it takes.
pub fn keyed(given: &Given<'_>, evidence: Evidence) -> Plan {
    let &Given {
        key,
        ref transport,
        route:
            Route {
                sink,
                lookup_available,
                breaker_tripped,
                ref tripped_older,
                lease,
                migrations_possible: _,
            },
        delivery_id,
        at,
        new_effect,
    } = given;
    let layer = layer_of(&evidence, transport);
    // A match through another key in force is judged by the version behind
    // that key as well as the delivery's own: its strength (the weaker of
    // the two for versions of one strategy) and either one's breaker.
    let through = (evidence.judged_through.as_deref())
        .or(evidence.matched_key.as_deref())
        .filter(|m| *m != key.key);
    // Two versions of one strategy: the weaker judges (a version made
    // weaker after collisions). Another strategy's key: its own strength.
    let strength =
        match through.and_then(|matched| Some((matched, key.older.get(matched)?.strength?))) {
            Some((matched, older)) if name_of(strategy_of(matched)) == name_of(&key.strategy) => {
                weaker(older, key.strength)
            }
            Some((_, older)) => older,
            None => key.strength,
        };
    let breaker_tripped = breaker_tripped
        || through.is_some_and(|matched| {
            tripped_older
                .iter()
                .any(|strategy| strategy_of(matched) == strategy)
        });
    let mut decision = decision::decide(&DecisionInput {
        identity: Identity::Keyed { strength },
        transport: transport.clone(),
        existing: evidence.existing,
        horizon: evidence.horizon,
        differences: evidence.differences,
        missing_fields: evidence.missing,
        criticality: key.criticality,
        lookup_available,
        breaker_tripped,
        made_by_hand: evidence.made_by_hand,
        look_alike: evidence.look_alike,
    });
    let take = (decision.action == Action::Process).then(|| {
        let claim = claim_for(
            decision.reason,
            evidence.reserved,
            key,
            delivery_id,
            new_effect,
        );
        decision.effect_id = Some(claim.effect_id);
        take(key, claim, sink, lease, delivery_id, at)
    });
    let made = DecisionMade::new(decision, layer, Some(key.key.clone()), evidence.matched_key);
    Plan { made, take }
}

/// The weaker of two strengths.
fn weaker(a: Strength, b: Strength) -> Strength {
    let rank = |s: Strength| match s {
        Strength::Weak => 0,
        Strength::Medium => 1,
        Strength::Strong => 2,
    };
    if rank(a) <= rank(b) { a } else { b }
}

/// The name of a strategy `name@version`.
fn name_of(strategy: &str) -> &str {
    strategy.split_once('@').map_or(strategy, |(name, _)| name)
}

/// The `name@version` a printable key `name@version:hex` was made by.
fn strategy_of(key: &str) -> &str {
    key.split_once(':').map_or(key, |(strategy, _)| strategy)
}

/// Plans the decision of a delivery with no business identity: always kept,
/// quarantined, decided on its transport identity alone.
pub fn unkeyed(
    identity: Identity,
    transport: TransportMatch,
    business_key: Option<String>,
) -> Plan {
    let decision = decision::decide(&DecisionInput {
        identity,
        transport,
        existing: Existing::Nothing,
        horizon: Horizon::Within,
        differences: Vec::new(),
        missing_fields: Vec::new(),
        criticality: Criticality::Critical,
        lookup_available: false,
        breaker_tripped: false,
        made_by_hand: false,
        look_alike: None,
    });
    Plan {
        made: DecisionMade::new(decision, Layer::Transport, business_key, None),
        take: None,
    }
}

/// How a delivery's transport identity matched its first reception
/// (`first`: that reception and its body's fingerprint; `None`: this is it).
/// The same fingerprint is a retry, told by the provider's delivery id or
/// by the raw body; another is a collision of transport ids.
pub fn transport_match(
    first: Option<(Option<DeliveryId>, &str)>,
    ours: &str,
    by_header: bool,
) -> TransportMatch {
    let Some((first, theirs)) = first else {
        return TransportMatch::FirstSeen;
    };
    if theirs == ours {
        return if by_header {
            TransportMatch::DeliveryIdRetry
        } else {
            TransportMatch::RawBodyMatch
        };
    }
    // The two fingerprints are unkeyed digests of bodies that may hold
    // sensitive values: shown, the first would confirm a guess of them
    // offline. The difference names the body; the bodies themselves are
    // compared, masked, where a case is shown.
    TransportMatch::DeliveryIdCollision {
        first_delivery: first.map(|f| f.as_uuid()).unwrap_or_default(),
        differences: vec![FieldDifference {
            field: BODY_DIFFERENCE.to_owned(),
            existing: Value::String("as first received".to_owned()),
            new: Value::String("different".to_owned()),
        }],
    }
}

/// The field a delivery id's collision names as its difference.
pub const BODY_DIFFERENCE: &str = "body (without volatile fields)";

/// The fingerprints a delivery id's collision journaled before 2026-12-07
/// named as its difference, found anywhere in `value` (a decision, a case's
/// details): unkeyed digests of the two bodies, which views hide wherever
/// they show them (the journal keeps what it was given).
pub fn journaled_fingerprints(value: &Value) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        match value {
            Value::Object(map) => {
                if map.get("field").and_then(Value::as_str) == Some(BODY_DIFFERENCE) {
                    let digests = ["existing", "new"]
                        .into_iter()
                        .filter_map(|side| map.get(side).and_then(Value::as_str))
                        .filter(|s| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()));
                    found.extend(digests.map(str::to_owned));
                }
                stack.extend(map.values());
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    found
}

/// What claiming `claim` for `key` journals: its reservation, leased for
/// `lease` and kept for the key's horizon, and, when the sink is `record`,
/// the effect applied with it.
pub fn take(
    key: &KeySummary,
    claim: Claim,
    sink: &str,
    lease: Duration,
    delivery_id: DeliveryId,
    at: DateTime<Utc>,
) -> KeyTaken {
    let horizon = Duration::seconds(i64::try_from(key.horizon_secs).unwrap_or(i64::MAX / 1000));
    let reserved = KeyReserved {
        key: claim.key,
        strategy: key.strategy.clone(),
        strength: key.strength,
        effect_type: key.effect_type.clone(),
        criticality: key.criticality,
        effect_id: claim.effect_id,
        fencing_token: claim.fencing_token,
        lease_until: at + lease,
        expires_at: at + horizon,
        discriminants: key.discriminants.clone(),
        sink: sink.to_owned(),
        delivery_id,
        provider_ref: claim.provider_ref,
    };
    let applied = (sink == RECORD_SINK).then(|| EffectSettled {
        key: reserved.key.clone(),
        effect_id: reserved.effect_id,
        fencing_token: reserved.fencing_token,
        outcome: SettlementOutcome::Applied,
        result: Some(recorded()),
        authoritative_ref: None,
        error: None,
        case_id: None,
        delivery_id,
        call: None,
    });
    KeyTaken { reserved, applied }
}

/// The key a `process` decision takes: a new key for a new effect; the
/// failed reservation's own key with the next fencing token when a
/// definitive failure without effect is retried; otherwise (processing under
/// uncertainty, a flagged reversible effect) a distinct effect with a key of
/// its own, never the matched one.
fn claim_for(
    reason: Reason,
    reserved: Option<Claim>,
    key: &KeySummary,
    delivery_id: DeliveryId,
    new_effect: Uuid,
) -> Claim {
    let (key, effect_id, fencing_token) = match (reason, reserved) {
        (Reason::NewKey, _) => (key.key.clone(), new_effect, 1),
        (Reason::PreviousAttemptFailedWithoutEffect, Some(failed)) => {
            (failed.key, failed.effect_id, failed.fencing_token + 1)
        }
        _ => (derived_key(&key.key, delivery_id), new_effect, 1),
    };
    Claim {
        key,
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

/// The key of an effect processed again under a matched key.
pub fn derived_key(key: &str, delivery_id: DeliveryId) -> String {
    format!("{key}~{delivery_id}")
}

/// The business key a reservation key was derived from.
pub fn base_key(key: &str) -> &str {
    key.split_once('~').map_or(key, |(base, _)| base)
}

/// Discriminating fields whose values disagree (an absent field reads as null).
pub fn differences(existing: &Value, new: &BTreeMap<String, Value>) -> Vec<FieldDifference> {
    let empty = serde_json::Map::new();
    let existing = existing.as_object().unwrap_or(&empty);
    let mut names: Vec<&String> = existing.keys().chain(new.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter_map(|name| {
            let old = existing.get(name).cloned().unwrap_or(Value::Null);
            let new = new.get(name).cloned().unwrap_or(Value::Null);
            (old != new).then(|| FieldDifference {
                field: name.clone(),
                existing: old,
                new,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
