//! What exists for a business key, as one decision reads it (`Tx::key_state`): the
//! reservation in the fast index, else the applied effect the ledger still
//! proves, else what a retired strategy version left. Read through the
//! batch's key index or the database alike (`Tx`): the caller never knows
//! which.

use super::entities::{effect, migrated_key, reservation};

/// What exists for a key. `through` names the older version's key a row
/// was found under (`None`: the key itself).
#[derive(Debug, Clone)]
pub enum KeyState {
    /// Nothing under any key in force, nor under a retired one.
    Nothing,
    /// A reservation in the fast index.
    Reserved {
        row: reservation::Model,
        through: Option<String>,
    },
    /// Past the fast index: an applied effect of the ledger.
    Ledger {
        effect: effect::Model,
        through: Option<String>,
    },
    /// Past every key in force: the effect a migrated key stands for (its
    /// retained body re-derived under the current version).
    Migrated {
        alias: migrated_key::Model,
        effect: effect::Model,
    },
    /// An effect only a retired version's own key finds: its migration could
    /// not carry it over.
    Retired { effect: effect::Model },
}

impl KeyState {
    /// The key a match was made through, when it is not the key itself.
    pub fn through(&self) -> Option<&str> {
        match self {
            Self::Nothing => None,
            Self::Reserved { through, .. } | Self::Ledger { through, .. } => through.as_deref(),
            Self::Migrated { effect, .. } | Self::Retired { effect } => Some(&effect.key),
        }
    }
}

/// The row of the first of `keys` that has one (the key itself, then older
/// versions' newest first), with the older key it was found under.
pub(super) fn pick<T>(
    keys: &[String],
    mut rows: Vec<T>,
    key_of: fn(&T) -> &str,
) -> Option<(T, Option<String>)> {
    for (n, wanted) in keys.iter().enumerate() {
        if let Some(at) = rows.iter().position(|row| key_of(row) == wanted) {
            let row = rows.swap_remove(at);
            return Some((row, (n > 0).then(|| wanted.clone())));
        }
    }
    None
}
