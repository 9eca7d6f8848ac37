//! What came before this delivery, once the key index and the effects ledger are merged.
//!
//! The key index answers first; the ledger is asked only when the index is empty and the
//! horizon has passed. The split between `Unsettled` and `Settled` is the line the matrix
//! draws: nothing can be processed or ignored while the first attempt is unsettled.

use uuid::Uuid;

use super::input::{Existing, FailureKind, Horizon, LedgerEvidence};

pub(super) enum Prior {
    Unsettled(Unsettled),
    Settled(Settled),
}

/// Nobody can yet say whether the effect happened.
pub(super) enum Unsettled {
    LeaseAlive(Uuid),
    OutcomeUnknown(Uuid),
    PartiallyApplied(Uuid),
    EvidencePurged,
}

/// The first attempt, if any, is over and its effect is known.
pub(super) enum Settled {
    Nothing,
    FailedWithoutEffect(Uuid),
    Applied(Applied),
}

pub(super) struct Applied {
    pub reference_delivery: Uuid,
    pub effect_id: Uuid,
    /// Found in the effects ledger beyond the key's horizon.
    pub late: bool,
}

impl Prior {
    pub(super) fn of(existing: Existing, horizon: Horizon) -> Self {
        match existing {
            Existing::LeaseAlive { reference_delivery } => {
                Prior::Unsettled(Unsettled::LeaseAlive(reference_delivery))
            }
            Existing::OutcomeUnknown { reference_delivery } => {
                Prior::Unsettled(Unsettled::OutcomeUnknown(reference_delivery))
            }
            Existing::Failed {
                reference_delivery,
                failure: FailureKind::PartialEffect,
            } => Prior::Unsettled(Unsettled::PartiallyApplied(reference_delivery)),
            Existing::Failed {
                reference_delivery,
                failure: FailureKind::NoEffect,
            } => Prior::Settled(Settled::FailedWithoutEffect(reference_delivery)),
            Existing::Applied {
                reference_delivery,
                effect_id,
            } => Prior::Settled(Settled::Applied(Applied {
                reference_delivery,
                effect_id,
                late: false,
            })),
            Existing::Nothing => Self::from_ledger(horizon),
        }
    }

    fn from_ledger(horizon: Horizon) -> Self {
        match horizon {
            Horizon::Within
            | Horizon::Passed {
                ledger: LedgerEvidence::Absent,
            } => Prior::Settled(Settled::Nothing),
            Horizon::Passed {
                ledger: LedgerEvidence::Purged,
            } => Prior::Unsettled(Unsettled::EvidencePurged),
            Horizon::Passed {
                ledger:
                    LedgerEvidence::Found {
                        reference_delivery,
                        effect_id,
                    },
            } => Prior::Settled(Settled::Applied(Applied {
                reference_delivery,
                effect_id,
                late: true,
            })),
        }
    }

    /// The delivery this one is compared with, if any.
    pub(super) fn reference_delivery(&self) -> Option<Uuid> {
        match self {
            Prior::Unsettled(Unsettled::LeaseAlive(id))
            | Prior::Unsettled(Unsettled::OutcomeUnknown(id))
            | Prior::Unsettled(Unsettled::PartiallyApplied(id))
            | Prior::Settled(Settled::FailedWithoutEffect(id)) => Some(*id),
            Prior::Settled(Settled::Applied(applied)) => Some(applied.reference_delivery),
            Prior::Unsettled(Unsettled::EvidencePurged) | Prior::Settled(Settled::Nothing) => None,
        }
    }

    /// The effect already applied, if any.
    pub(super) fn effect_id(&self) -> Option<Uuid> {
        match self {
            Prior::Settled(Settled::Applied(applied)) => Some(applied.effect_id),
            _ => None,
        }
    }
}
