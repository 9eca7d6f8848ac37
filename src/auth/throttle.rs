//! Sign-in throttling, in memory (one process's view), with two limits:
//!
//! - per client address, every attempt (governor's GCRA): how fast one
//!   address may make the server check passwords, whatever the names;
//! - per (name, address), failed attempts only, with backoff: past `free`
//!   failures each further attempt from that pair waits, the wait doubling
//!   with each failure up to `MAX_WAIT`. A success forgets the pair.
//!
//! What must stay true: an address that has not failed for a name is never
//! refused for it, so nobody can lock an operator out from elsewhere; and
//! memory stays bounded whatever is submitted: names past `MAX_NAME_BYTES`
//! never get here, a pair is kept as a 16-byte digest, an IPv6 client counts
//! as its /64, and entries that no longer matter are pruned as the maps grow.
//! A refused attempt learns how long to wait; no password is checked for it.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use governor::clock::{Clock, DefaultClock, Reference};
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DashMapStateStore;
use governor::{Quota, RateLimiter};
use sha2::{Digest, Sha256};

use crate::config::canonical;

/// No operator name is longer (64 characters of at most 4 bytes): a longer
/// one is refused before it is throttled or checked.
pub const MAX_NAME_BYTES: usize = 256;
/// The wait after the first failure past the free ones.
const FIRST_WAIT: Duration = Duration::from_secs(1);
/// The longest wait backoff reaches.
const MAX_WAIT: Duration = Duration::from_secs(15 * 60);
/// A pair that has not failed for this long past its wait starts afresh.
const FORGET_AFTER: Duration = Duration::from_secs(15 * 60);
/// Maps are pruned when they reach this size, then twice what survives.
const PRUNE_FLOOR: usize = 1024;
/// Past this many pairs (after pruning), new pairs are not tracked: the
/// per-address limit still holds for them.
const MAX_PAIRS: usize = 100_000;

type PairKey = [u8; 16];

struct Failures {
    count: u32,
    /// Since the throttle started, like `until`.
    last: Duration,
    until: Duration,
}

impl Failures {
    fn forgotten(&self, now: Duration) -> bool {
        now.saturating_sub(self.last.max(self.until)) >= FORGET_AFTER
    }
}

struct Pairs {
    map: HashMap<PairKey, Failures>,
    prune_at: usize,
}

pub struct LoginThrottle<C: Clock = DefaultClock> {
    by_address: RateLimiter<IpAddr, DashMapStateStore<IpAddr>, C, NoOpMiddleware<C::Instant>>,
    address_prune_at: AtomicUsize,
    pairs: Mutex<Pairs>,
    free: u32,
    clock: C,
    start: C::Instant,
}

fn per_minute(n: u32) -> Quota {
    Quota::per_minute(NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN))
}

/// The address a limit applies to: an IPv4 address, or an IPv6 /64 (one
/// subscriber's usual allocation, so rotating inside it gains nothing).
fn network(ip: IpAddr) -> IpAddr {
    match canonical(ip) {
        IpAddr::V6(v6) => {
            let bits = u128::from(v6) & (u128::MAX << 64);
            IpAddr::V6(Ipv6Addr::from(bits))
        }
        v4 => v4,
    }
}

fn pair_key(name: &str, address: Option<IpAddr>) -> PairKey {
    let mut hash = Sha256::new();
    hash.update(name.to_lowercase().as_bytes());
    hash.update([0]);
    match address.map(network) {
        Some(IpAddr::V4(ip)) => hash.update(ip.octets()),
        Some(IpAddr::V6(ip)) => hash.update(ip.octets()),
        None => {}
    }
    let digest = hash.finalize();
    let mut key = [0u8; 16];
    key.copy_from_slice(&digest[..16]);
    key
}

/// `FIRST_WAIT` doubled once per failure past the free ones, at most `MAX_WAIT`.
fn backoff(past_free: u32) -> Duration {
    FIRST_WAIT
        .saturating_mul(1u32 << past_free.min(20))
        .min(MAX_WAIT)
}

impl LoginThrottle {
    pub fn new(failures_before_backoff: u32, per_address_per_minute: u32) -> Self {
        Self::with_clock(
            failures_before_backoff,
            per_address_per_minute,
            DefaultClock::default(),
        )
    }
}

impl<C: Clock + Clone> LoginThrottle<C> {
    pub fn with_clock(failures_before_backoff: u32, per_address_per_minute: u32, clock: C) -> Self {
        Self {
            by_address: RateLimiter::dashmap_with_clock(
                per_minute(per_address_per_minute),
                clock.clone(),
            ),
            address_prune_at: AtomicUsize::new(PRUNE_FLOOR),
            pairs: Mutex::new(Pairs {
                map: HashMap::new(),
                prune_at: PRUNE_FLOOR,
            }),
            free: failures_before_backoff.max(1),
            start: clock.now(),
            clock,
        }
    }
}

impl<C: Clock> LoginThrottle<C> {
    fn elapsed(&self) -> Duration {
        self.clock.now().duration_since(self.start).into()
    }

    fn pairs(&self) -> std::sync::MutexGuard<'_, Pairs> {
        // The map stays consistent whatever panicked while holding it.
        self.pairs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts one attempt against the address; `Err(wait)` when the pair is
    /// backing off or the address is past its limit. Nothing is kept for a
    /// pair until it fails.
    pub fn attempt(&self, name: &str, address: Option<IpAddr>) -> Result<(), Duration> {
        let now = self.elapsed();
        if let Some(failures) = self.pairs().map.get(&pair_key(name, address))
            && failures.until > now
        {
            return Err(failures.until - now);
        }
        let Some(ip) = address else { return Ok(()) };
        let checked = self.by_address.check_key(&network(ip));
        self.prune_addresses();
        checked.map_err(|not_until| not_until.wait_time_from(self.clock.now()))
    }

    /// The attempt failed (unknown name, wrong password, disabled operator).
    pub fn failed(&self, name: &str, address: Option<IpAddr>) {
        let now = self.elapsed();
        let key = pair_key(name, address);
        let mut pairs = self.pairs();
        if pairs.map.len() >= pairs.prune_at {
            pairs.map.retain(|_, f| !f.forgotten(now));
            if pairs.map.len() >= MAX_PAIRS {
                let free = self.free;
                pairs.map.retain(|_, f| f.count >= free);
            }
            pairs.map.shrink_to_fit();
            pairs.prune_at = (2 * pairs.map.len()).max(PRUNE_FLOOR);
        }
        if pairs.map.len() >= MAX_PAIRS && !pairs.map.contains_key(&key) {
            return;
        }
        let failures = pairs.map.entry(key).or_insert(Failures {
            count: 0,
            last: now,
            until: Duration::ZERO,
        });
        if failures.forgotten(now) {
            failures.count = 0;
        }
        failures.count = failures.count.saturating_add(1);
        failures.last = now;
        if failures.count >= self.free {
            failures.until = now + backoff(failures.count - self.free);
        }
    }

    /// The attempt succeeded: the pair's failures are forgotten.
    pub fn succeeded(&self, name: &str, address: Option<IpAddr>) {
        self.pairs().map.remove(&pair_key(name, address));
    }

    fn prune_addresses(&self) {
        let threshold = self.address_prune_at.load(Ordering::Relaxed);
        if self.by_address.len() < threshold {
            return;
        }
        self.by_address.retain_recent();
        self.by_address.shrink_to_fit();
        let next = (2 * self.by_address.len()).max(PRUNE_FLOOR);
        self.address_prune_at.store(next, Ordering::Relaxed);
    }

    /// How many pairs and addresses are kept in memory.
    pub fn len(&self) -> usize {
        self.pairs().map.len() + self.by_address.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use governor::clock::FakeRelativeClock;

    use super::*;

    fn ip(text: &str) -> Option<IpAddr> {
        Some(text.parse().unwrap())
    }

    fn throttle(
        free: u32,
        per_address: u32,
    ) -> (LoginThrottle<FakeRelativeClock>, FakeRelativeClock) {
        let clock = FakeRelativeClock::default();
        (
            LoginThrottle::with_clock(free, per_address, clock.clone()),
            clock,
        )
    }

    #[test]
    fn failures_from_one_address_never_refuse_the_same_name_from_another() {
        let (throttle, clock) = throttle(5, 1000);
        let attacker = ip("203.0.113.7");
        for _ in 0..200 {
            if throttle.attempt("ann", attacker).is_ok() {
                throttle.failed("ann", attacker);
            }
            clock.advance(Duration::from_millis(500));
        }
        assert!(throttle.attempt("ann", attacker).is_err());
        assert!(throttle.attempt("Ann", ip("198.51.100.2")).is_ok());
    }

    #[test]
    fn past_the_free_failures_each_wait_doubles_and_a_success_clears_them() {
        let (throttle, clock) = throttle(3, 1000);
        let from = ip("10.0.0.1");
        for _ in 0..3 {
            assert!(throttle.attempt("bob", from).is_ok());
            throttle.failed("bob", from);
        }
        let mut waits = Vec::new();
        for _ in 0..4 {
            let wait = throttle.attempt("bob", from).unwrap_err();
            waits.push(wait.as_secs());
            clock.advance(wait);
            assert!(throttle.attempt("bob", from).is_ok());
            throttle.failed("bob", from);
        }
        assert_eq!(waits, [1, 2, 4, 8]);
        clock.advance(Duration::from_secs(16));
        assert!(throttle.attempt("bob", from).is_ok());
        throttle.succeeded("bob", from);
        assert!(throttle.attempt("bob", from).is_ok());
        throttle.failed("bob", from);
        assert!(
            throttle.attempt("bob", from).is_ok(),
            "one failure is free again"
        );
    }

    #[test]
    fn the_wait_stops_growing_and_a_quiet_pair_starts_afresh() {
        let (throttle, clock) = throttle(1, 1000);
        let from = ip("10.0.0.1");
        for _ in 0..40 {
            throttle.failed("cy", from);
        }
        assert_eq!(throttle.attempt("cy", from).unwrap_err(), MAX_WAIT);
        clock.advance(MAX_WAIT + FORGET_AFTER);
        assert!(throttle.attempt("cy", from).is_ok());
        throttle.failed("cy", from);
        assert_eq!(throttle.attempt("cy", from).unwrap_err(), FIRST_WAIT);
    }

    #[test]
    fn an_address_is_refused_past_its_limit_whatever_the_name() {
        let (throttle, _clock) = throttle(100, 2);
        let from = ip("10.0.0.1");
        assert!(throttle.attempt("a", from).is_ok());
        assert!(throttle.attempt("b", from).is_ok());
        assert!(throttle.attempt("c", from).is_err());
        assert!(throttle.attempt("c", ip("10.0.0.2")).is_ok());
        // Another address in the same IPv6 /64 is the same client.
        let v6 = ip("2001:db8:1:2::1");
        assert!(throttle.attempt("a", v6).is_ok());
        assert!(throttle.attempt("a", v6).is_ok());
        assert!(throttle.attempt("a", ip("2001:db8:1:2:ffff::9")).is_err());
    }

    #[test]
    fn ten_thousand_distinct_names_keep_memory_flat() {
        let (throttle, clock) = throttle(5, 20);
        // Long names: what is kept for a pair is a digest, whatever its name.
        let padding = "x".repeat(200);
        let mut most = 0;
        for i in 0..10_000u32 {
            let name = format!("{i}-{padding}");
            let from = Some(IpAddr::from([10, 0, (i % 40) as u8, 1]));
            assert!(throttle.attempt(&name, from).is_ok());
            throttle.failed(&name, from);
            clock.advance(Duration::from_secs(1));
            most = most.max(throttle.len());
        }
        // One failure a second: only the last quarter of an hour's 900 can
        // still matter, and pruning keeps at most about twice as many.
        assert!(most < 2_000, "{most} entries kept");
    }

    #[test]
    fn only_a_failure_is_remembered_for_a_pair() {
        let (throttle, _clock) = throttle(5, 1000);
        for i in 0..100 {
            throttle.attempt(&format!("n{i}"), ip("10.0.0.1")).unwrap();
        }
        assert_eq!(throttle.len(), 1, "the address only");
    }
}
