//! How long a key is worth looking for: `"90s"`, `"15m"`, `"72h"`, `"30d"`, `"2w"`.
//!
//! The horizon narrows the search; it never proves identity. It serialises
//! back in its largest exact unit, so `"72h"` and `"3d"` are the same
//! definition (and the same strategy fingerprint).

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Horizon(u64);

const UNITS: [(char, u64); 5] = [
    ('w', 7 * 86_400),
    ('d', 86_400),
    ('h', 3_600),
    ('m', 60),
    ('s', 1),
];

/// The longest horizon: a thousand years. Keys expire at their reservation
/// time plus the horizon, which a date must be able to hold.
const MOST_SECS: u64 = 365_000 * 86_400;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid horizon `{0}`: expected a positive number followed by s, m, h, d or w, \
     at most 365000d (a thousand years)"
)]
pub struct HorizonError(pub String);

impl Horizon {
    pub fn parse(text: &str) -> Result<Self, HorizonError> {
        let err = || HorizonError(text.to_owned());
        let t = text.trim();
        let unit = t.chars().last().ok_or_else(err)?;
        let (_, factor) = UNITS.iter().find(|(u, _)| *u == unit).ok_or_else(err)?;
        let n: u64 = t[..t.len() - 1].parse().map_err(|_| err())?;
        match n.checked_mul(*factor) {
            Some(secs) if secs > 0 && secs <= MOST_SECS => Ok(Self(secs)),
            _ => Err(err()),
        }
    }

    pub fn from_secs(secs: u64) -> Self {
        Self(secs)
    }

    pub fn as_secs(self) -> u64 {
        self.0
    }
}

impl fmt::Display for Horizon {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (unit, factor) = UNITS
            .iter()
            .find(|(_, factor)| self.0.is_multiple_of(*factor))
            .copied()
            .unwrap_or(('s', 1));
        write!(f, "{}{}", self.0 / factor, unit)
    }
}

impl Serialize for Horizon {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Horizon {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Horizon::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_prints_the_largest_exact_one() {
        assert_eq!(Horizon::parse("72h").unwrap().as_secs(), 259_200);
        assert_eq!(Horizon::parse("72h").unwrap().to_string(), "3d");
        assert_eq!(Horizon::parse("30d").unwrap().as_secs(), 2_592_000);
        assert_eq!(Horizon::parse("90s").unwrap().to_string(), "90s");
        assert_eq!(Horizon::parse("14d").unwrap().to_string(), "2w");
        assert_eq!(Horizon::parse("36500d").unwrap().to_string(), "36500d");
        assert_eq!(
            Horizon::parse("365000d").unwrap().as_secs(),
            365_000 * 86_400
        );
        for bad in ["", "h", "0h", "3y", "-1d", "1.5h", "365001d", "99999999d"] {
            assert!(Horizon::parse(bad).is_err(), "{bad}");
        }
    }
}
