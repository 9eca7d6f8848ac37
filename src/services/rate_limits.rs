//! Request rate limits per source and per client address (GCRA, `governor`).
//!
//! Two kinds of limit, each per client and per source:
//! - on every request, loose, checked before the body is read;
//! - on refused requests, strict, checked when a request is refused: past it
//!   the refusal is answered 429 and only counted, never journaled one by one.
//!
//! A limit of 0 is no limit. The client is the TCP peer address: behind a
//! reverse proxy every request has the proxy's address (no forwarded header
//! is trusted, since anyone can send one).

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};

use crate::config::EngineConfig;

/// How long a refused client should wait, rounded up to whole seconds (≥ 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct RetryAfter(pub u64);

pub struct RateLimits {
    client_requests: Option<DefaultKeyedRateLimiter<IpAddr>>,
    client_rejections: Option<DefaultKeyedRateLimiter<IpAddr>>,
    source_requests: Option<DefaultKeyedRateLimiter<String>>,
    source_rejections: Option<DefaultKeyedRateLimiter<String>>,
    clock: DefaultClock,
}

impl RateLimits {
    pub fn new(config: &EngineConfig) -> Self {
        let burst = config.rate_burst_secs.max(1);
        Self {
            client_requests: limiter(config.client_requests_per_sec, burst),
            client_rejections: limiter(config.client_rejections_per_sec, burst),
            source_requests: limiter(config.source_requests_per_sec, burst),
            source_rejections: limiter(config.source_rejections_per_sec, burst),
            clock: DefaultClock::default(),
        }
    }

    /// Admits one request to `source` from `client`, or says when to retry.
    pub fn admit_request(&self, source: &str, client: Option<IpAddr>) -> Result<(), RetryAfter> {
        self.check(&self.client_requests, &self.source_requests, source, client)
    }

    /// Admits one refusal to be answered and journaled as such, or says when
    /// to retry (the refusal is then a 429).
    pub fn admit_rejection(&self, source: &str, client: Option<IpAddr>) -> Result<(), RetryAfter> {
        self.check(
            &self.client_rejections,
            &self.source_rejections,
            source,
            client,
        )
    }

    /// Forgets clients and sources whose limits are back to full: the state
    /// of a limiter otherwise grows with every address ever seen.
    pub fn forget_idle(&self) {
        for limiter in [&self.client_requests, &self.client_rejections]
            .into_iter()
            .flatten()
        {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
        for limiter in [&self.source_requests, &self.source_rejections]
            .into_iter()
            .flatten()
        {
            limiter.retain_recent();
        }
    }

    fn check(
        &self,
        by_client: &Option<DefaultKeyedRateLimiter<IpAddr>>,
        by_source: &Option<DefaultKeyedRateLimiter<String>>,
        source: &str,
        client: Option<IpAddr>,
    ) -> Result<(), RetryAfter> {
        if let (Some(limiter), Some(client)) = (by_client, client) {
            limiter
                .check_key(&client)
                .map_err(|no| self.retry_after(no.wait_time_from(self.clock.now())))?;
        }
        if let Some(limiter) = by_source {
            limiter
                .check_key(&source.to_owned())
                .map_err(|no| self.retry_after(no.wait_time_from(self.clock.now())))?;
        }
        Ok(())
    }

    fn retry_after(&self, wait: Duration) -> RetryAfter {
        RetryAfter((wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1))
    }
}

fn limiter<K>(per_sec: u32, burst_secs: u32) -> Option<DefaultKeyedRateLimiter<K>>
where
    K: std::hash::Hash + Eq + Clone,
{
    let rate = NonZeroU32::new(per_sec)?;
    let burst = NonZeroU32::new(per_sec.saturating_mul(burst_secs)).unwrap_or(rate);
    Some(governor::RateLimiter::keyed(
        Quota::per_second(rate).allow_burst(burst),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(client_rejections: u32, source_requests: u32) -> EngineConfig {
        EngineConfig {
            client_rejections_per_sec: client_rejections,
            source_requests_per_sec: source_requests,
            source_rejections_per_sec: 0,
            rate_burst_secs: 1,
            ..EngineConfig::default()
        }
    }

    #[test]
    fn a_client_past_its_rejection_burst_is_told_when_to_retry() {
        let limits = RateLimits::new(&config(3, 0));
        let (a, b) = ("10.0.0.1".parse().ok(), "10.0.0.2".parse().ok());
        for _ in 0..3 {
            assert_eq!(limits.admit_rejection("s", a), Ok(()));
        }
        assert_eq!(limits.admit_rejection("s", a), Err(RetryAfter(1)));
        // Another address, and requests of the same one, are not affected.
        assert_eq!(limits.admit_rejection("s", b), Ok(()));
        assert_eq!(limits.admit_request("s", a), Ok(()));
    }

    #[test]
    fn a_source_limit_counts_every_client_and_zero_is_no_limit() {
        let limits = RateLimits::new(&config(0, 2));
        assert_eq!(limits.admit_request("s", "10.0.0.1".parse().ok()), Ok(()));
        assert_eq!(limits.admit_request("s", "10.0.0.2".parse().ok()), Ok(()));
        assert!(limits.admit_request("s", "10.0.0.3".parse().ok()).is_err());
        assert_eq!(limits.admit_request("t", None), Ok(()));
        for _ in 0..1000 {
            assert_eq!(limits.admit_rejection("s", None), Ok(()));
        }
    }
}
