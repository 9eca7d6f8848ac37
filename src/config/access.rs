//! `[access]`: how operators reach the back-office, how long their sessions
//! last, how fast sign-in attempts may come, and which proxies are believed.
//! Every limit is checked positive when settings load, never at first use.

use anyhow::bail;
use serde::Deserialize;

use super::TrustedProxies;

/// Operator access: where the back-office is reached, how long sessions
/// last, how fast sign-in attempts may come.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AccessConfig {
    /// The URL operators reach this server at (`https://...` makes the
    /// session cookie `Secure`). Default: `http://` and the listen address.
    pub public_url: Option<String>,
    /// A session idle this long ends.
    pub session_idle_secs: u64,
    /// A session ends this long after sign-in, however active.
    pub session_lifetime_secs: u64,
    /// Failed sign-ins one client address may make for one name before each
    /// further attempt from there waits (1 s, doubling with every failure, at
    /// most 15 minutes). Other addresses are not slowed down for that name.
    #[serde(alias = "login_per_account_per_minute")]
    pub login_failures_before_backoff: u32,
    /// Sign-in attempts allowed per client address per minute, whatever the names.
    pub login_per_address_per_minute: u32,
    /// Proxies whose `X-Forwarded-For` and `X-Forwarded-Host` are believed:
    /// addresses or CIDR ranges. Default empty: the peer address and the
    /// `Host` header are used as they are.
    pub trusted_proxies: TrustedProxies,
}

impl Default for AccessConfig {
    fn default() -> Self {
        Self {
            public_url: None,
            session_idle_secs: 30 * 60,
            session_lifetime_secs: 12 * 3600,
            login_failures_before_backoff: 5,
            login_per_address_per_minute: 20,
            trusted_proxies: TrustedProxies::default(),
        }
    }
}

impl AccessConfig {
    pub(super) fn check(&self) -> anyhow::Result<()> {
        if let Some(url) = &self.public_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            bail!("[access] public_url {url:?} must start with http:// or https://");
        }
        if self.session_idle_secs == 0 || self.session_lifetime_secs == 0 {
            bail!("[access] session timeouts must be positive");
        }
        if self.login_failures_before_backoff == 0 || self.login_per_address_per_minute == 0 {
            bail!("[access] login limits must be positive");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::FileConfig;

    #[test]
    fn trusted_proxies_are_none_by_default_and_parsed_as_addresses_or_ranges() {
        assert!(AccessConfig::default().trusted_proxies.is_empty());
        let text = "[access]\ntrusted_proxies = [\"127.0.0.1\", \"10.0.0.0/8\"]\n";
        let access = FileConfig::parse(text).unwrap().access;
        assert!(access.trusted_proxies.trusts("10.2.3.4".parse().unwrap()));
        assert!(!access.trusted_proxies.trusts("192.0.2.1".parse().unwrap()));
        let wrong = FileConfig::parse("[access]\ntrusted_proxies = [\"proxy.local\"]\n");
        assert!(wrong.is_err());
        // Files written for the limit's former name still load.
        let old = FileConfig::parse("[access]\nlogin_per_account_per_minute = 3\n").unwrap();
        assert_eq!(old.access.login_failures_before_backoff, 3);
    }
}
