//! Who is on the other end of a request: the client's address and the host
//! it asked for. `X-Forwarded-For` and `X-Forwarded-Host` are believed only
//! from a peer in `[access] trusted_proxies`; from anyone else they are a
//! client's claim like any other and ignored, so a client cannot pick the
//! address it is throttled as, nor the host its `Origin` is compared with.

use std::net::IpAddr;

use actix_web::http::header::{self, HeaderMap};
use actix_web::{HttpRequest, web};

use crate::config::{TrustedProxies, canonical};
use crate::state::AppState;

fn proxies(req: &HttpRequest) -> Option<&TrustedProxies> {
    req.app_data::<web::Data<AppState>>()
        .map(|state| &state.access.trusted_proxies)
}

fn trusted_peer(req: &HttpRequest) -> bool {
    match (req.peer_addr(), proxies(req)) {
        (Some(peer), Some(proxies)) => proxies.trusts(peer.ip()),
        _ => false,
    }
}

/// Every value of `name`, in order, comma-separated lists split.
fn values<'a>(headers: &'a HeaderMap, name: &str) -> Vec<&'a str> {
    headers
        .get_all(name)
        .flat_map(|v| v.to_str().unwrap_or("").split(','))
        .map(str::trim)
        .collect()
}

/// The client's address: the peer's, or, when the peer is a trusted proxy,
/// the nearest address in `X-Forwarded-For` that is not a trusted proxy
/// (the ones left of it could have been written by the client).
pub fn address(req: &HttpRequest) -> Option<IpAddr> {
    address_through(req, proxies(req))
}

fn address_through(req: &HttpRequest, proxies: Option<&TrustedProxies>) -> Option<IpAddr> {
    let peer = canonical(req.peer_addr()?.ip());
    let Some(proxies) = proxies.filter(|p| p.trusts(peer)) else {
        return Some(peer);
    };
    let mut client = peer;
    for hop in values(req.headers(), "x-forwarded-for").into_iter().rev() {
        let Ok(hop) = hop.parse::<IpAddr>().map(canonical) else {
            break;
        };
        client = hop;
        if !proxies.trusts(hop) {
            break;
        }
    }
    Some(client)
}

/// The host (and port) the client asked for: the first `X-Forwarded-Host`
/// when a trusted proxy sends one, else the request's own `Host`.
pub fn host(req: &HttpRequest) -> Option<String> {
    if trusted_peer(req)
        && let Some(forwarded) = values(req.headers(), "x-forwarded-host").first()
        && !forwarded.is_empty()
    {
        return Some((*forwarded).to_owned());
    }
    let own = req
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok());
    own.map(str::to_owned)
        .or_else(|| req.uri().authority().map(|a| a.to_string()))
}

#[cfg(test)]
mod tests {
    use actix_web::test::TestRequest;

    use super::*;

    fn proxies(list: &[&str]) -> TrustedProxies {
        let text = serde_json::to_string(list).unwrap();
        serde_json::from_str(&text).unwrap()
    }

    fn through(peer: &str, forwarded_for: &str, trusted: &[&str]) -> Option<IpAddr> {
        let req = TestRequest::default()
            .peer_addr(peer.parse().unwrap())
            .insert_header(("x-forwarded-for", forwarded_for))
            .to_http_request();
        address_through(&req, Some(&proxies(trusted)))
    }

    #[test]
    fn forwarded_for_from_an_untrusted_peer_is_ignored() {
        let got = through("198.51.100.9:4000", "203.0.113.1", &[]);
        assert_eq!(got, "198.51.100.9".parse().ok());
    }

    #[test]
    fn a_trusted_proxy_names_the_client_and_a_spoofed_prefix_is_skipped() {
        let got = through("127.0.0.1:4000", "1.1.1.1, 203.0.113.7", &["127.0.0.1"]);
        assert_eq!(got, "203.0.113.7".parse().ok());
        let chain = through(
            "127.0.0.1:4000",
            "203.0.113.7, 10.0.0.2",
            &["127.0.0.1", "10.0.0.0/8"],
        );
        assert_eq!(chain, "203.0.113.7".parse().ok());
        let garbage = through("127.0.0.1:4000", "203.0.113.7, nonsense", &["127.0.0.1"]);
        assert_eq!(garbage, "127.0.0.1".parse().ok());
    }
}
