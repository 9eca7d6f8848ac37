//! How long a look-up that settled nothing waits before it is tried again:
//! the provider's list of operations after an outage, the downstream's
//! status answer after an `unknown`.

use uuid::Uuid;

/// The pause before the next try after `failures` failed ones: doubling from
/// `base_secs`, at most an hour, plus up to a quarter of jitter (so that
/// cases held by one outage are not all asked again at the same instant).
pub fn retry_after(base_secs: u64, failures: i64) -> chrono::Duration {
    let doubling = 1u64 << failures.clamp(0, 20);
    let secs = base_secs.max(1).saturating_mul(doubling).min(3600);
    let random = (Uuid::now_v7().as_u128() & 0xffff) as u64;
    let jitter_ms = random * secs * 250 / 0xffff;
    chrono::Duration::milliseconds((secs * 1000 + jitter_ms) as i64)
}

#[cfg(test)]
mod tests {
    use super::retry_after;

    #[test]
    fn a_failed_look_up_waits_twice_as_long_each_time_up_to_an_hour_plus_jitter() {
        for (failures, secs) in [(0, 30), (1, 60), (2, 120), (10, 3600), (60, 3600)] {
            let wait = retry_after(30, failures).num_milliseconds();
            let base = secs * 1000;
            assert!(
                (base..=base + base / 4).contains(&wait),
                "{failures} failures: {wait} ms"
            );
        }
    }
}
