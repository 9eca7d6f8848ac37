//! The proxies whose forwarded headers are believed (`[access] trusted_proxies`):
//! single addresses or CIDR ranges. Only a request whose peer is one of them
//! may say, in `X-Forwarded-For` / `X-Forwarded-Host`, who the client is and
//! which host it asked for; from anyone else those headers are ignored.

use std::net::IpAddr;

use serde::Deserialize;

/// An address or a range of addresses, parsed from `"10.0.0.1"` or `"10.0.0.0/8"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct ProxyRange {
    network: IpAddr,
    prefix: u8,
}

impl TryFrom<String> for ProxyRange {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        let wrong = || format!("{text:?} is neither an IP address nor an address/prefix range");
        let (address, prefix) = match text.split_once('/') {
            Some((address, prefix)) => (address, Some(prefix)),
            None => (text.as_str(), None),
        };
        let network: IpAddr = address.trim().parse().map_err(|_| wrong())?;
        let bits = if network.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) => p.trim().parse::<u8>().map_err(|_| wrong())?,
            None => bits,
        };
        if prefix > bits {
            return Err(wrong());
        }
        Ok(Self { network, prefix })
    }
}

impl ProxyRange {
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.network, canonical(ip)) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => same_prefix(
                u128::from(u32::from(net)) << 96,
                u128::from(u32::from(ip)) << 96,
                self.prefix,
            ),
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                same_prefix(u128::from(net), u128::from(ip), self.prefix)
            }
            _ => false,
        }
    }
}

/// An IPv4 client seen through an IPv6 socket (`::ffff:a.b.c.d`) is that IPv4 address.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

fn same_prefix(a: u128, b: u128, prefix: u8) -> bool {
    let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
    a & mask == b & mask
}

/// The configured list; empty (the default) trusts nobody's forwarded headers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct TrustedProxies(Vec<ProxyRange>);

impl TrustedProxies {
    pub fn trusts(&self, peer: IpAddr) -> bool {
        self.0.iter().any(|range| range.contains(peer))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(text: &str) -> ProxyRange {
        ProxyRange::try_from(text.to_owned()).unwrap()
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn a_single_address_trusts_only_itself() {
        let proxy = range("127.0.0.1");
        assert!(proxy.contains(ip("127.0.0.1")));
        assert!(proxy.contains(ip("::ffff:127.0.0.1")));
        assert!(!proxy.contains(ip("127.0.0.2")));
        assert!(!proxy.contains(ip("::1")));
    }

    #[test]
    fn a_range_trusts_its_prefix() {
        let v4 = range("10.1.0.0/16");
        assert!(v4.contains(ip("10.1.200.3")));
        assert!(!v4.contains(ip("10.2.0.1")));
        let v6 = range("fd00::/8");
        assert!(v6.contains(ip("fd12:3456::1")));
        assert!(!v6.contains(ip("fe80::1")));
        assert!(range("0.0.0.0/0").contains(ip("203.0.113.9")));
    }

    #[test]
    fn what_is_not_an_address_or_range_is_refused() {
        for text in ["localhost", "10.0.0.0/33", "::/129", "10.0.0.1/x", ""] {
            assert!(ProxyRange::try_from(text.to_owned()).is_err(), "{text}");
        }
    }

    #[test]
    fn nobody_is_trusted_by_default() {
        assert!(!TrustedProxies::default().trusts(ip("127.0.0.1")));
    }
}
