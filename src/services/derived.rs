//! What the journal and the decision keep of an identity derivation: the
//! `KeyDerived` of a delivery or of one item of a batch, the business key as
//! decisions read it (`KeySummary`), and the identity a delivery that could
//! not be keyed is decided on.

use crate::domain::confidence::Criticality;
use crate::domain::decision::Identity;
use crate::domain::identity::{
    BusinessIdentity, Catalog, Derivation, ItemDerivation, SkipReason, Skipped, Unresolved,
};
use crate::domain::journal::{DerivationProof, KeyDerived, KeySummary, Lacking, OlderKey};

/// Notes what a look-alike under another strategy's key is searched by
/// (`KeySummary::lacking`), once `derived` holds its resource: a critical
/// delivery keyed below strategies of its effect type that a missing or
/// blank field skipped.
pub fn note_lacking(derived: &mut KeyDerived, skipped: &[Skipped], catalog: &Catalog) {
    let (Some(key), Some(resource)) = (derived.business.as_mut(), derived.resource.as_ref()) else {
        return;
    };
    let mut strategies: Vec<String> = (skipped.iter())
        .filter(|s| {
            matches!(
                s.reason,
                SkipReason::MissingField { .. } | SkipReason::BlankField { .. }
            )
        })
        .filter(|s| {
            (catalog.strategy(&s.strategy.name, s.strategy.version))
                .is_some_and(|def| def.effect_type == key.effect_type)
        })
        .map(|s| s.strategy.name.clone())
        .collect();
    strategies.dedup();
    if key.criticality == Criticality::Critical && !strategies.is_empty() {
        key.lacking = Some(Lacking {
            strategies,
            resource: resource.clone(),
        });
    }
}

/// The identity a delivery that could not be keyed is decided on.
pub fn identity_of(unresolved: Option<&Unresolved>) -> Identity {
    match unresolved {
        Some(Unresolved::Unparseable) | None => Identity::UnparseableBody,
        Some(Unresolved::BodyTooDeep { .. }) => Identity::BodyTooDeep,
        Some(Unresolved::DuplicateMemberNames) => Identity::DuplicateMemberNames,
        Some(Unresolved::UnknownProvider { .. } | Unresolved::UnknownEventType { .. }) => {
            Identity::UnknownEventType
        }
        Some(Unresolved::NoStrategyApplies { .. }) => Identity::NoStrategy,
    }
}

/// What the journal keeps of a derivation.
pub fn key_derived(d: &Derivation) -> KeyDerived {
    let transport = &d.transport;
    KeyDerived {
        event_type: d.event_type.clone(),
        transport_key: transport.key.clone(),
        provider_event_id: transport.is_provider_id().then(|| transport.id.clone()),
        body_fingerprint: Some(
            transport
                .body_fingerprint
                .clone()
                .unwrap_or_else(|| transport.raw_body_sha256.clone()),
        ),
        business: d
            .business
            .as_ref()
            .map(|b| key_summary(b, &d.older_versions, &d.also_keyed, &d.retired_versions)),
        unresolved: d.unresolved.as_ref().map(|u| u.code().to_owned()),
        derivation: Box::new(DerivationProof::of(
            Some(transport),
            d.business.as_ref(),
            &d.skipped,
            d.unresolved.as_ref(),
        )),
        items: Vec::new(),
        resource: None,
    }
}

/// What the journal keeps of one item of a batch, decided as a delivery of
/// its own: the batch's transport identity, the item's business identity.
pub fn item_key_derived(item: &ItemDerivation, transport_key: &str) -> KeyDerived {
    KeyDerived {
        event_type: item.event_type.clone(),
        transport_key: transport_key.to_owned(),
        provider_event_id: None,
        body_fingerprint: None,
        business: item.business.as_ref().map(|b| {
            key_summary(
                b,
                &item.older_versions,
                &item.also_keyed,
                &item.retired_versions,
            )
        }),
        unresolved: item.unresolved.as_ref().map(|u| u.code().to_owned()),
        derivation: Box::new(DerivationProof::of(
            None,
            item.business.as_ref(),
            &item.skipped,
            item.unresolved.as_ref(),
        )),
        items: Vec::new(),
        resource: None,
    }
}

/// The business identity as decisions read it: the key, then the other keys
/// in force for the same delivery (older versions, strong strategies below
/// it) with what each discriminates on, and retired versions' keys.
fn key_summary(
    b: &BusinessIdentity,
    older: &[BusinessIdentity],
    also: &[BusinessIdentity],
    retired: &[BusinessIdentity],
) -> KeySummary {
    KeySummary {
        key: b.key.full(),
        strategy: b.strategy.to_string(),
        strength: b.strength,
        effect_type: b.effect_type.clone(),
        criticality: b.criticality,
        horizon_secs: b.horizon_secs,
        discriminants: b.discriminants.clone(),
        missing_discriminants: b.missing_discriminants.clone(),
        older_keys: older.iter().chain(also).map(|o| o.key.full()).collect(),
        older: older
            .iter()
            .chain(also)
            .map(|o| {
                let seen = OlderKey {
                    discriminants: o.discriminants.clone(),
                    missing_discriminants: o.missing_discriminants.clone(),
                    strength: Some(o.strength),
                };
                (o.key.full(), seen)
            })
            .collect(),
        retired_keys: retired.iter().map(|o| o.key.full()).collect(),
        held_as: None,
        lacking: None,
    }
}
