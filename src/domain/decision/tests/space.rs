//! The input space the invariants sweep: every combination of the enum inputs, with one
//! difference / one missing field standing for "some".

use super::support::{EFFECT, FIRST, amount_difference};
use crate::domain::confidence::{Criticality, Strength};
use crate::domain::decision::{
    DecisionInput, Existing, FailureKind, Horizon, Identity, LedgerEvidence, LookAlike,
    TransportMatch,
};

fn identities() -> Vec<Identity> {
    let keyed = [Strength::Weak, Strength::Medium, Strength::Strong]
        .map(|strength| Identity::Keyed { strength });
    let mut all = keyed.to_vec();
    all.extend([
        Identity::UnparseableBody,
        Identity::BodyTooDeep,
        Identity::DuplicateMemberNames,
        Identity::UnknownEventType,
        Identity::NoStrategy,
    ]);
    all
}

fn transports() -> Vec<TransportMatch> {
    vec![
        TransportMatch::FirstSeen,
        TransportMatch::DeliveryIdRetry,
        TransportMatch::RawBodyMatch,
        TransportMatch::DeliveryIdCollision {
            first_delivery: FIRST,
            differences: vec![amount_difference()],
        },
    ]
}

fn existings() -> Vec<Existing> {
    let reference_delivery = FIRST;
    vec![
        Existing::Nothing,
        Existing::LeaseAlive { reference_delivery },
        Existing::OutcomeUnknown { reference_delivery },
        Existing::Applied {
            reference_delivery,
            effect_id: EFFECT,
        },
        Existing::Failed {
            reference_delivery,
            failure: FailureKind::NoEffect,
        },
        Existing::Failed {
            reference_delivery,
            failure: FailureKind::PartialEffect,
        },
    ]
}

fn horizons() -> Vec<Horizon> {
    let found = LedgerEvidence::Found {
        reference_delivery: FIRST,
        effect_id: EFFECT,
    };
    let mut all = vec![Horizon::Within];
    all.extend(
        [found, LedgerEvidence::Absent, LedgerEvidence::Purged]
            .map(|ledger| Horizon::Passed { ledger }),
    );
    all
}

pub fn all_inputs() -> Vec<DecisionInput> {
    let mut inputs = Vec::new();
    for identity in identities() {
        for transport in transports() {
            for existing in existings() {
                for horizon in horizons() {
                    for differ in [false, true] {
                        for missing in [false, true] {
                            for criticality in [Criticality::Critical, Criticality::Reversible] {
                                for lookup_available in [false, true] {
                                    for (breaker_tripped, made_by_hand, look_alike) in [
                                        (false, false, false),
                                        (true, false, false),
                                        (false, true, false),
                                        (true, true, false),
                                        (false, false, true),
                                        (true, false, true),
                                        (false, true, true),
                                        (true, true, true),
                                    ] {
                                        inputs.push(DecisionInput {
                                            identity,
                                            transport: transport.clone(),
                                            existing,
                                            horizon,
                                            differences: if differ {
                                                vec![amount_difference()]
                                            } else {
                                                Vec::new()
                                            },
                                            missing_fields: if missing {
                                                vec!["$.ref".to_owned()]
                                            } else {
                                                Vec::new()
                                            },
                                            criticality,
                                            lookup_available,
                                            breaker_tripped,
                                            made_by_hand,
                                            look_alike: look_alike.then_some(LookAlike {
                                                reference_delivery: Some(FIRST),
                                                effect_id: Some(EFFECT),
                                            }),
                                        });
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    inputs
}
