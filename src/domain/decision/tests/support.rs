//! A builder for inputs that reads like the matrix: `given().weak_key().applied()…`.
//!
//! The default is the quietest case: a strong key, first seen, nothing existing,
//! within the horizon, all fields present and agreeing, a critical type, no look-up,
//! breaker not tripped.

use serde_json::json;
use uuid::Uuid;

use crate::domain::confidence::{Criticality, Strength};
use crate::domain::decision::{
    Decision, DecisionInput, Existing, FailureKind, FieldDifference, Horizon, Identity,
    LedgerEvidence, TransportMatch, decide,
};

/// The first delivery the new one is compared with.
pub const FIRST: Uuid = Uuid::from_u128(0x0190_aaaa_0000_7000_8000_0000_0000_0001);
/// The effect that first delivery applied.
pub const EFFECT: Uuid = Uuid::from_u128(0x0190_eeee_0000_7000_8000_0000_0000_0002);

pub fn given() -> Given {
    Given(DecisionInput {
        identity: Identity::Keyed {
            strength: Strength::Strong,
        },
        transport: TransportMatch::FirstSeen,
        existing: Existing::Nothing,
        horizon: Horizon::Within,
        differences: Vec::new(),
        missing_fields: Vec::new(),
        criticality: Criticality::Critical,
        lookup_available: false,
        breaker_tripped: false,
        made_by_hand: false,
        look_alike: None,
    })
}

pub fn amount_difference() -> FieldDifference {
    FieldDifference {
        field: "$.amount".to_owned(),
        existing: json!(1000),
        new: json!(1200),
    }
}

pub struct Given(pub DecisionInput);

impl Given {
    pub fn identity(mut self, identity: Identity) -> Self {
        self.0.identity = identity;
        self
    }
    pub fn key(self, strength: Strength) -> Self {
        self.identity(Identity::Keyed { strength })
    }
    pub fn weak_key(self) -> Self {
        self.key(Strength::Weak)
    }
    pub fn medium_key(self) -> Self {
        self.key(Strength::Medium)
    }
    pub fn reversible(mut self) -> Self {
        self.0.criticality = Criticality::Reversible;
        self
    }
    pub fn transport(mut self, transport: TransportMatch) -> Self {
        self.0.transport = transport;
        self
    }
    pub fn existing(mut self, existing: Existing) -> Self {
        self.0.existing = existing;
        self
    }
    pub fn applied(self) -> Self {
        self.existing(Existing::Applied {
            reference_delivery: FIRST,
            effect_id: EFFECT,
        })
    }
    pub fn lease_alive(self) -> Self {
        self.existing(Existing::LeaseAlive {
            reference_delivery: FIRST,
        })
    }
    pub fn outcome_unknown(self) -> Self {
        self.existing(Existing::OutcomeUnknown {
            reference_delivery: FIRST,
        })
    }
    pub fn failed(self, failure: FailureKind) -> Self {
        self.existing(Existing::Failed {
            reference_delivery: FIRST,
            failure,
        })
    }
    pub fn horizon_passed(mut self, ledger: LedgerEvidence) -> Self {
        self.0.horizon = Horizon::Passed { ledger };
        self
    }
    pub fn ledger_holds_effect(self) -> Self {
        self.horizon_passed(LedgerEvidence::Found {
            reference_delivery: FIRST,
            effect_id: EFFECT,
        })
    }
    pub fn discriminants_differ(mut self) -> Self {
        self.0.differences.push(amount_difference());
        self
    }
    pub fn missing(mut self, field: &str) -> Self {
        self.0.missing_fields.push(field.to_owned());
        self
    }
    pub fn lookup_available(mut self) -> Self {
        self.0.lookup_available = true;
        self
    }
    pub fn look_alike(mut self) -> Self {
        self.0.look_alike = Some(crate::domain::decision::LookAlike {
            reference_delivery: Some(FIRST),
            effect_id: Some(EFFECT),
        });
        self
    }
    pub fn made_by_hand(mut self) -> Self {
        self.0.made_by_hand = true;
        self
    }
    pub fn breaker_tripped(mut self) -> Self {
        self.0.breaker_tripped = true;
        self
    }
    pub fn when_decided(self) -> Decision {
        decide(&self.0)
    }
}
