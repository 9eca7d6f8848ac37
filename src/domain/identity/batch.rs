//! Batch deliveries (GoCardless `events[]`, Adyen `notificationItems[]`).
//!
//! Each item is keyed on its own, with the provider's hierarchy for its own
//! event type; `Derivation::items` lists them. The delivery itself:
//! * one item: the delivery *is* that item (its type, key, skips);
//! * several items: the event type is the sorted distinct item types joined
//!   with `+`, and the business identity is the synthetic `batch@1` key over
//!   the *set* of item keys (a provider resending the same events in another
//!   order sends the same batch). Its strength is the weakest item's, its
//!   criticality critical if any item is, its horizon the longest. The
//!   decision engine can decide on the batch or split on `items`.
//! * any item unresolved: the delivery is unresolved (first such item's
//!   reason) so the whole batch is quarantined; nothing is dropped.

use super::key::{Binding, mask};
use super::strategy::StrategyRef;
use super::types::{BusinessIdentity, DeliveryFacts, Derivation, ItemDerivation};
use crate::domain::confidence::Criticality;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};

pub const BATCH_STRATEGY: &str = "batch";

pub(super) fn combine(d: &mut Derivation, facts: &DeliveryFacts<'_>, items: Vec<ItemDerivation>) {
    if items.len() == 1 {
        d.absorb(items[0].clone());
        d.items = items;
        return;
    }
    let types: BTreeSet<&str> = items
        .iter()
        .filter_map(|i| i.event_type.as_deref())
        .collect();
    d.event_type = Some(types.into_iter().collect::<Vec<_>>().join("+"));
    d.unresolved = items.iter().find_map(|i| i.unresolved.clone());
    if d.unresolved.is_none() {
        let business: Vec<&BusinessIdentity> =
            items.iter().filter_map(|i| i.business.as_ref()).collect();
        d.business = batch_identity(
            facts,
            d.event_type.as_deref().unwrap_or_default(),
            &business,
        );
    }
    d.items = items;
}

fn batch_identity(
    facts: &DeliveryFacts<'_>,
    event_type: &str,
    items: &[&BusinessIdentity],
) -> Option<BusinessIdentity> {
    let weakest = items.iter().min_by_key(|b| b.strength)?;
    let mut keys: Vec<String> = items.iter().map(|b| b.key.full()).collect();
    keys.sort();
    let material = json!({ "items": keys });
    let strategy = StrategyRef {
        name: BATCH_STRATEGY.to_owned(),
        version: 1,
    };
    let scope = json!({});
    let key = Binding {
        tenant: facts.tenant,
        source: facts.source,
        provider: facts.provider,
        environment: facts.environment,
        event_type: Some(event_type),
        effect_type: BATCH_STRATEGY,
        strategy: &strategy,
        kind: weakest.kind.as_str(),
        scope: &scope,
        material: &material,
    }
    .key();
    let critical = items.iter().any(|b| b.criticality == Criticality::Critical);
    Some(BusinessIdentity {
        strategy,
        kind: weakest.kind,
        strength: weakest.strength,
        key,
        effect_type: BATCH_STRATEGY.to_owned(),
        criticality: if critical {
            Criticality::Critical
        } else {
            Criticality::Reversible
        },
        horizon_secs: items.iter().map(|b| b.horizon_secs).max().unwrap_or(0),
        scope,
        discriminants: BTreeMap::new(),
        missing_discriminants: Vec::new(),
        material: mask(&material),
        definition_fingerprint: String::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_items_no_batch_identity() {
        let facts = DeliveryFacts {
            tenant: "t",
            source: "s",
            provider: "p",
            environment: "e",
            headers: &[],
            parse: crate::domain::delivery::BodyParse::NotJson,
            body: None,
            raw_body: b"",
        };
        assert!(batch_identity(&facts, "x", &[]).is_none());
    }
}
