//! Sign-in throttling, per operator name and per client address (governor's
//! GCRA, in memory: one process's view). A refused attempt learns how long
//! to wait; no password is checked for it.

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

pub struct LoginThrottle {
    by_account: DefaultKeyedRateLimiter<String>,
    by_address: DefaultKeyedRateLimiter<IpAddr>,
    clock: DefaultClock,
}

fn per_minute(n: u32) -> Quota {
    Quota::per_minute(NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN))
}

impl LoginThrottle {
    pub fn new(per_account_per_minute: u32, per_address_per_minute: u32) -> Self {
        Self {
            by_account: RateLimiter::keyed(per_minute(per_account_per_minute)),
            by_address: RateLimiter::keyed(per_minute(per_address_per_minute)),
            clock: DefaultClock::default(),
        }
    }

    /// Counts one attempt; `Err(wait)` when either limit is exhausted.
    pub fn attempt(&self, name: &str, address: Option<IpAddr>) -> Result<(), Duration> {
        let key = name.to_lowercase();
        let account = self.by_account.check_key(&key);
        let address = match address {
            Some(ip) => self.by_address.check_key(&ip),
            None => Ok(()),
        };
        let now = self.clock.now();
        match (account, address) {
            (Ok(()), Ok(())) => Ok(()),
            (Err(a), Err(b)) => Err(a.wait_time_from(now).max(b.wait_time_from(now))),
            (Err(a), _) | (_, Err(a)) => Err(a.wait_time_from(now)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_account_is_refused_past_its_burst_and_others_are_not() {
        let throttle = LoginThrottle::new(2, 100);
        let ip = Some(IpAddr::from([127, 0, 0, 1]));
        assert!(throttle.attempt("ann", ip).is_ok());
        assert!(throttle.attempt("Ann", ip).is_ok());
        let wait = throttle.attempt("ann", ip).unwrap_err();
        assert!(wait > Duration::ZERO);
        assert!(throttle.attempt("bob", ip).is_ok());
    }

    #[test]
    fn an_address_is_refused_past_its_burst_whatever_the_name() {
        let throttle = LoginThrottle::new(100, 2);
        let ip = Some(IpAddr::from([10, 0, 0, 1]));
        assert!(throttle.attempt("a", ip).is_ok());
        assert!(throttle.attempt("b", ip).is_ok());
        assert!(throttle.attempt("c", ip).is_err());
        assert!(
            throttle
                .attempt("c", Some(IpAddr::from([10, 0, 0, 2])))
                .is_ok()
        );
    }
}
