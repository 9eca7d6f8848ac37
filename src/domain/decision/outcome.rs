//! The decision itself: action, reason and the proof a support agent needs to explain it.
//!
//! Built only by `decide` through the small constructors below, so that `lookup_first`
//! is set on reconciliations alone and `flagged_for_correction` on processing alone.

use uuid::Uuid;

use super::codes::{Action, Reason};
use super::input::FieldDifference;

/// The outcome of [`super::decide`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub action: Action,
    pub reason: Reason,
    /// The delivery this one was compared with (first delivery, holder of the lease,
    /// failed attempt), when there is one.
    pub reference_delivery: Option<Uuid>,
    /// The effect already applied, when there is one.
    pub effect_id: Option<Uuid>,
    /// Field-by-field differences behind a collision.
    pub differences: Vec<FieldDifference>,
    /// Required or discriminating fields this delivery lacks.
    pub missing_fields: Vec<String>,
    /// Processed under uncertainty: a later correction may be needed.
    pub flagged_for_correction: bool,
    /// Reconcile through the provider's authoritative API first (else a human).
    pub lookup_first: bool,
}

impl Decision {
    fn new(action: Action, reason: Reason) -> Self {
        Decision {
            action,
            reason,
            reference_delivery: None,
            effect_id: None,
            differences: Vec::new(),
            missing_fields: Vec::new(),
            flagged_for_correction: false,
            lookup_first: false,
        }
    }

    pub(super) fn process(reason: Reason) -> Self {
        Self::new(Action::Process, reason)
    }

    /// Processed although the identity could not be confirmed (reversible types only).
    pub(super) fn process_flagged(reason: Reason) -> Self {
        Decision {
            flagged_for_correction: true,
            ..Self::new(Action::Process, reason)
        }
    }

    /// Only an applied effect can be ignored, so both ids are required here.
    pub(super) fn ignore(reason: Reason, reference_delivery: Uuid, effect_id: Uuid) -> Self {
        Self::new(Action::Ignore, reason).about(Some(reference_delivery), Some(effect_id))
    }

    pub(super) fn quarantine(reason: Reason) -> Self {
        Self::new(Action::Quarantine, reason)
    }

    pub(super) fn reconcile(reason: Reason, lookup_available: bool) -> Self {
        Decision {
            lookup_first: lookup_available,
            ..Self::new(Action::Reconcile, reason)
        }
    }

    pub(super) fn defer(reason: Reason, reference_delivery: Uuid) -> Self {
        Self::new(Action::Defer, reason).about(Some(reference_delivery), None)
    }

    pub(super) fn about(
        mut self,
        reference_delivery: Option<Uuid>,
        effect_id: Option<Uuid>,
    ) -> Self {
        self.reference_delivery = reference_delivery;
        self.effect_id = effect_id;
        self
    }

    pub(super) fn showing(mut self, differences: &[FieldDifference]) -> Self {
        self.differences = differences.to_vec();
        self
    }

    pub(super) fn missing(mut self, missing_fields: &[String]) -> Self {
        self.missing_fields = missing_fields.to_vec();
        self
    }
}
