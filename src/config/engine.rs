//! `[engine]`: how the decision engine runs (leases, look-up retries,
//! breakers, group commit, rate limits). Every field has a default, so a
//! file without `[engine]` runs as documented here.

use serde::Deserialize;

/// How the decision engine runs.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EngineConfig {
    /// How long a reservation's holder may take to settle its effect. A lease
    /// that runs out makes the outcome unknown: reconciled, never re-run.
    pub lease_secs: u64,
    /// Calls to the services that apply effects in flight at once, from this
    /// process (a large batch or a burst waits its turn instead of opening
    /// one connection per effect). The wait counts against the lease.
    pub downstream_concurrency: usize,
    /// How often leases and horizons are checked.
    pub sweep_interval_ms: u64,
    /// First pause before a failed look-up is tried again; it doubles with
    /// each failure (up to an hour), with up to a quarter of jitter.
    pub lookup_retry_secs: u64,
    /// Failed look-ups in a row after which a provider is not asked for
    /// `lookup_breaker_secs` (its circuit breaker opens).
    pub lookup_breaker_failures: u32,
    pub lookup_breaker_secs: u64,
    /// Commit concurrent deliveries together (one fsync for a burst, each still
    /// durable before its answer; on PostgreSQL batches lock each key they
    /// decide on, in every process alike). Default: on. Off: one transaction
    /// per delivery.
    pub group_commit: Option<bool>,
    /// Group-commit writers on PostgreSQL, each committing the deliveries of
    /// its own routing shards of keys, so that one batch's round trips and
    /// fsync overlap another's. Default 1: on a 2-core host one writer's
    /// larger batches cost the server a quarter less CPU per delivery than
    /// two writers', were as fast in one process and over a quarter faster
    /// with two processes on one database (2026-12-06); more may pay where
    /// the database is remote or has cores to spare. SQLite has one writer at
    /// a time whatever this says.
    pub postgres_writers: usize,
    /// Share of a strategy's recent deliveries that may collide before its
    /// breaker trips (0.005 = 0.5 %).
    pub breaker_threshold: f64,
    /// Fewest recent deliveries before a rate is trusted.
    pub breaker_min_deliveries: i64,
    /// How far back "recent" goes.
    pub breaker_window_secs: u64,
    /// How often breakers are evaluated.
    pub breaker_check_ms: u64,
    /// How often the deliveries read model (search, lists, the dashboard)
    /// applies what the journal gained since. Pages that read it first apply
    /// it themselves, for two seconds at most, so this sets the lag only
    /// between readers. Default: 250 ms on SQLite (25 ms until 2026-12-06),
    /// 100 ms on PostgreSQL.
    pub read_model_pace_ms: Option<u64>,
    /// Journal rows the read model applies at most per stretch. Default:
    /// 300 on SQLite, where a stretch runs in a writer batch whose
    /// deliveries wait for it (small and often kept the p99 lowest,
    /// measured 2026-12-03); 5,000 on PostgreSQL.
    pub read_model_stretch_rows: Option<u64>,
    /// SQLite: how often a connection of its own copies the WAL's committed
    /// pages into the database file (a passive checkpoint), so that the
    /// writer rarely does it inside a commit. Default 70 ms. Shorter keeps
    /// each checkpoint's fsync small (p99 22 ms at 30 ms against 25–26) but
    /// copies a page rewritten by several commits more often (12 % more
    /// bytes to disk); longer copies it once (5 % fewer bytes at 1 s) for a
    /// p99 some 5 ms higher on a fresh database and twice as high with a
    /// million deliveries behind (measured 2026-12-06).
    pub sqlite_checkpoint_ms: u64,
    /// Serve `GET /api/deliveries/{id}/raw`: the unmasked raw body, to
    /// engineers and admins, each read journaled with who read it. Off by default.
    pub raw_body_reads: bool,
    /// Rejections journaled one by one per source and window; beyond that they
    /// are counted, one `RejectionsAggregated` per source, reason and answer.
    pub rejections_journaled_per_window: u32,
    /// Length of that window (aggregates are journaled when it closes).
    pub rejection_window_secs: u64,
    /// Requests per second one client address may make, whatever they get
    /// (0: no limit). Loose: above one provider's pace and the benchmark's.
    pub client_requests_per_sec: u32,
    /// Refused requests per second one client address may cause before its
    /// refusals become 429 (0: no limit). Strict: a provider whose requests are
    /// refused has a configuration to fix, not a burst to absorb.
    pub client_rejections_per_sec: u32,
    /// Requests per second to one source from every client (0: no limit).
    pub source_requests_per_sec: u32,
    /// Refused requests per second to one source from every client before its
    /// refusals become 429 (0: no limit). Valid deliveries are not refused, so
    /// a flood of bad ones never makes this limit refuse them.
    pub source_rejections_per_sec: u32,
    /// The burst each rate allows, in seconds of that rate.
    pub rate_burst_secs: u32,
    /// What a commit promises: `Full` for everything real; a sandbox (a
    /// fixture's or a shadow replay's scratch engine) sets `Scratch`. Never
    /// read from the file.
    #[serde(skip)]
    pub durability: crate::store::Durability,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            lease_secs: 30,
            downstream_concurrency: 256,
            sweep_interval_ms: 1000,
            lookup_retry_secs: 30,
            lookup_breaker_failures: 5,
            lookup_breaker_secs: 60,
            group_commit: None,
            postgres_writers: 1,
            breaker_threshold: 0.005,
            breaker_min_deliveries: 200,
            breaker_window_secs: 3600,
            breaker_check_ms: 30_000,
            read_model_pace_ms: None,
            read_model_stretch_rows: None,
            sqlite_checkpoint_ms: 70,
            raw_body_reads: false,
            rejections_journaled_per_window: 60,
            rejection_window_secs: 60,
            client_requests_per_sec: 10_000,
            client_rejections_per_sec: 20,
            source_requests_per_sec: 10_000,
            source_rejections_per_sec: 200,
            rate_burst_secs: 2,
            durability: crate::store::Durability::Full,
        }
    }
}

/// The longest duration an engine setting may name: ten years. A time
/// plus a lease or a window must stay a date.
const MOST_SECS: u64 = 10 * 365 * 86_400;

impl EngineConfig {
    /// Refuses durations too long to add to a date.
    pub fn check(&self) -> anyhow::Result<()> {
        let seconds = [
            ("lease_secs", self.lease_secs),
            ("lookup_retry_secs", self.lookup_retry_secs),
            ("lookup_breaker_secs", self.lookup_breaker_secs),
            ("breaker_window_secs", self.breaker_window_secs),
            ("rejection_window_secs", self.rejection_window_secs),
            ("rate_burst_secs", u64::from(self.rate_burst_secs)),
        ];
        let millis = [
            ("sweep_interval_ms", self.sweep_interval_ms),
            ("breaker_check_ms", self.breaker_check_ms),
            ("sqlite_checkpoint_ms", self.sqlite_checkpoint_ms),
            ("read_model_pace_ms", self.read_model_pace_ms.unwrap_or(0)),
        ];
        let too_long = seconds
            .into_iter()
            .chain(millis.into_iter().map(|(name, ms)| (name, ms / 1000)))
            .find(|(_, secs)| *secs > MOST_SECS);
        match too_long {
            Some((name, _)) => anyhow::bail!("[engine] {name} is longer than ten years"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::FileConfig;

    #[test]
    fn a_duration_no_date_can_hold_is_refused() {
        assert!(EngineConfig::default().check().is_ok());
        for setting in [
            "lease_secs = 18446744073709551615",
            "breaker_window_secs = 9223372036854775",
            "sweep_interval_ms = 18446744073709551615",
        ] {
            let file = FileConfig::parse(&format!("[engine]\n{setting}\n")).unwrap();
            let refused = file.engine.check().expect_err(setting);
            let name = setting.split(' ').next().unwrap_or_default();
            assert!(refused.to_string().contains(name), "{refused}");
        }
    }

    #[test]
    fn raw_body_reads_are_off_unless_enabled() {
        assert!(!EngineConfig::default().raw_body_reads);
        let file = FileConfig::parse("[engine]\nraw_body_reads = true\n").unwrap();
        assert!(file.engine.raw_body_reads);
    }
}
