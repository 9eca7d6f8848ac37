//! `[reconciliation]`: when the server compares the providers' lists of
//! operations with the effects ledger on its own. A window is compared only
//! `delay_secs` after it ends, so deliveries a provider still retries count.

use serde::Deserialize;

/// Periodic reconciliation against the providers' lists of operations (for
/// look-ups with a `list_url`): every `interval_secs`, the window of
/// `window_secs` that ended `delay_secs` ago, each side listed `slack_secs`
/// wider so that an operation near an edge still finds its effect.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReconciliationConfig {
    /// 0: no periodic run (`unicity reconcile` still runs one).
    pub interval_secs: u64,
    pub window_secs: u64,
    /// Deliveries still on their way (provider retries) are waited for.
    pub delay_secs: u64,
    pub slack_secs: u64,
}

impl Default for ReconciliationConfig {
    fn default() -> Self {
        Self {
            interval_secs: 3600,
            window_secs: 3600,
            delay_secs: 600,
            slack_secs: 300,
        }
    }
}

impl ReconciliationConfig {
    /// Refuses durations too long to take from a date (ten years at most).
    pub fn check(&self) -> anyhow::Result<()> {
        const MOST_SECS: u64 = 10 * 365 * 86_400;
        let settings = [
            ("interval_secs", self.interval_secs),
            ("window_secs", self.window_secs),
            ("delay_secs", self.delay_secs),
            ("slack_secs", self.slack_secs),
        ];
        match settings.into_iter().find(|(_, secs)| *secs > MOST_SECS) {
            Some((name, _)) => anyhow::bail!("[reconciliation] {name} is longer than ten years"),
            None => Ok(()),
        }
    }
}
