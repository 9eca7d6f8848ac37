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
    /// When the one question let through after the pause was asked: until
    /// it answers (or a pause has passed without an answer) no other is.
    probe: Option<Instant>,
}

impl State {
    /// Until when no question may be asked, or `None`: one may.
    fn closed_until(&self, now: Instant, open_for: Duration) -> Option<Instant> {
        let until = self.open_until?;
        if until > now {
            return Some(until);
        }
        self.probe
            .map(|asked| asked + open_for)
            .filter(|until| *until > now)
    }
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

    /// `None` when `provider` may be asked now — the caller then asks it
    /// and `record`s the answer; else until when it may not. After the pause
    /// only the first caller is let through: the others wait for its answer.
    pub fn check(&self, provider: &str, now: Instant) -> Option<Instant> {
        let mut states = self.states.lock().ok()?;
        let state = states.get_mut(provider)?;
        let closed = state.closed_until(now, self.open_for);
        if closed.is_none() && state.open_until.is_some() {
            state.probe = Some(now);
        }
        closed
    }

    /// Whether `provider` may not be asked now, without asking (`check`
    /// lets the one question after a pause through; this does not take it).
    pub fn is_open(&self, provider: &str, now: Instant) -> bool {
        self.states.lock().ok().is_some_and(|states| {
            states
                .get(provider)
                .is_some_and(|s| s.closed_until(now, self.open_for).is_some())
        })
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
            state.probe = None;
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
        assert!(!breakers.is_open("p", later), "a question may be asked");
        assert_eq!(breakers.check("p", later), None, "one question let through");
        for _ in 0..3 {
            assert!(
                breakers.check("p", later).is_some(),
                "the others wait for its answer"
            );
        }
        breakers.record("p", false, later);
        assert!(breakers.check("p", later).is_some(), "open again");
        breakers.record("p", true, later + Duration::from_secs(61));
        assert_eq!(breakers.check("p", later), None, "closed on success");
    }

    #[test]
    fn a_question_let_through_that_never_answers_lets_another_through_a_pause_later() {
        let breakers = Breakers::new(1, Duration::from_secs(60));
        let t0 = Instant::now();
        breakers.record("p", false, t0);
        let after = t0 + Duration::from_secs(61);
        assert_eq!(breakers.check("p", after), None);
        assert!(
            breakers
                .check("p", after + Duration::from_secs(59))
                .is_some()
        );
        assert_eq!(breakers.check("p", after + Duration::from_secs(61)), None);
        breakers.record("p", true, after + Duration::from_secs(62));
        for _ in 0..3 {
            assert_eq!(
                breakers.check("p", after + Duration::from_secs(62)),
                None,
                "closed"
            );
        }
    }
}
