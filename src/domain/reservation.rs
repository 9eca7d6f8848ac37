//! The states a reservation (and its effect in the ledger) goes through, with
//! the one mapping to and from their stored names.
//!
//! `reserved` (lease running) → `applied` | `failed` (no effect: may be
//! retaken) | `unknown` (maybe applied: reconcile). An effect's ledger row is
//! `pending` until its reservation settles, then carries the same state.

/// A reservation's state, as stored in `reservations.state` and
/// `effects.status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReservationState {
    Reserved,
    Applied,
    Failed,
    Unknown,
    /// An effect's ledger row whose reservation has not settled yet.
    Pending,
}

impl ReservationState {
    pub const ALL: [Self; 5] = [
        Self::Reserved,
        Self::Applied,
        Self::Failed,
        Self::Unknown,
        Self::Pending,
    ];

    /// The stored name (frozen).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Reserved => "reserved",
            Self::Applied => "applied",
            Self::Failed => "failed",
            Self::Unknown => "unknown",
            Self::Pending => "pending",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_reads_back_from_its_stored_name() {
        for state in ReservationState::ALL {
            assert_eq!(ReservationState::parse(state.as_str()), Some(state));
        }
        assert_eq!(ReservationState::parse("Applied"), None);
    }
}
