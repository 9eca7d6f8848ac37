//! A circuit breaker per provider for look-ups: after `failures` answers in
//! a row that failed, the provider is not asked for `open_for`; then one
//! question is let through, and its answer closes the breaker or opens it
//! again. It spares a provider in an outage a retry storm from every case it
//! holds. In memory, per process.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Debug, Default)]
struct State {
    failures: u32,
    open_until: Option<Instant>,
}

#[derive(Debug)]
pub struct Breakers {
    failures: u32,
    open_for: Duration,
    states: Mutex<HashMap<String, State>>,
}

impl Breakers {
    pub fn new(failures: u32, open_for: Duration) -> Self {
        Self {
            failures: failures.max(1),
            open_for,
            states: Mutex::default(),
        }
    }

    /// `None` when `provider` may be asked now; else until when it may not.
    pub fn check(&self, provider: &str, now: Instant) -> Option<Instant> {
        let states = self.states.lock().ok()?;
        states
            .get(provider)
            .and_then(|s| s.open_until)
            .filter(|until| *until > now)
    }

    /// Records how a question to `provider` ended.
    pub fn record(&self, provider: &str, succeeded: bool, now: Instant) {
        let Ok(mut states) = self.states.lock() else {
            return;
        };
        let state = states.entry(provider.to_owned()).or_default();
        if succeeded {
            *state = State::default();
            return;
        }
        state.failures += 1;
        if state.failures >= self.failures {
            state.open_until = Some(now + self.open_for);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_after_the_failures_in_a_row_lets_one_through_after_the_pause_and_closes_on_success() {
        let breakers = Breakers::new(2, Duration::from_secs(60));
        let t0 = Instant::now();
        assert_eq!(breakers.check("p", t0), None);
        breakers.record("p", false, t0);
        assert_eq!(
            breakers.check("p", t0),
            None,
            "one failure is not an outage"
        );
        breakers.record("p", false, t0);
        assert!(breakers.check("p", t0).is_some(), "open");
        assert_eq!(breakers.check("other", t0), None, "per provider");
        let later = t0 + Duration::from_secs(61);
        assert_eq!(breakers.check("p", later), None, "one question let through");
        breakers.record("p", false, later);
        assert!(breakers.check("p", later).is_some(), "open again");
        breakers.record("p", true, later + Duration::from_secs(61));
        assert_eq!(breakers.check("p", later), None, "closed on success");
    }
}
