//! The states a reservation (and its effect in the ledger) goes through, with
//! the one mapping to and from their stored names.
//!
//! `reserved` (lease running) → `applied` | `failed` (no effect: may be
//! retaken) | `unknown` (maybe applied: reconcile). The key's one row in
//! `effects` carries the state; an unsettled effect is shown as `pending`.

/// A taken key's state, as stored in `effects.state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReservationState {
    Reserved,
    Applied,
    Failed,
    Unknown,
}

impl ReservationState {
    pub const ALL: [Self; 4] = [Self::Reserved, Self::Applied, Self::Failed, Self::Unknown];

    /// The stored name (frozen).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Reserved => "reserved",
            Self::Applied => "applied",
            Self::Failed => "failed",
            Self::Unknown => "unknown",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// An effect's state as pages and the API show it: an effect whose key
    /// is still reserved (not settled) is `pending`.
    pub fn shown(stored: &str) -> String {
        if stored == Self::Reserved.as_str() {
            "pending".to_owned()
        } else {
            stored.to_owned()
        }
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
        assert_eq!(ReservationState::shown("reserved"), "pending");
        assert_eq!(ReservationState::shown("applied"), "applied");
    }
}
