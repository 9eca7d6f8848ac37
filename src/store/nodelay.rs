//! `TCP_NODELAY` on the process's TCP connections to PostgreSQL.
//!
//! sqlx 0.9.0 opens its TCP sockets without it (sqlx issue #4335; fixed
//! upstream by #4336, not released as of 0.9.0). Without it, a statement that
//! does not leave in one segment has its tail held back by Nagle's algorithm
//! until the server's delayed ACK: measured ~40 ms for any statement over ~16
//! KiB, such as a batch's journal rows or a large body. sqlx offers no hook on
//! the socket, so each new connection (the pool's `after_connect`) finds the
//! process's sockets whose peer is the database server and sets the option on
//! those that lack it. Remove this once sqlx sets it itself.

use std::net::SocketAddr;
use std::str::FromStr;

use sea_orm::sqlx::postgres::PgConnectOptions;

/// The addresses a PostgreSQL URL's TCP connections go to: empty for a Unix
/// socket (no Nagle there) or a URL sqlx cannot read (it will fail to connect).
pub async fn server_addresses(url: &str) -> Vec<SocketAddr> {
    let Ok(options) = PgConnectOptions::from_str(url) else {
        return Vec::new();
    };
    let host = options.get_host();
    if host.starts_with('/') {
        return Vec::new();
    }
    let host = host.trim_matches(['[', ']']).to_owned();
    match tokio::net::lookup_host((host.as_str(), options.get_port())).await {
        Ok(addresses) => addresses.collect(),
        Err(_) => Vec::new(),
    }
}

/// Sets `TCP_NODELAY` on every socket of this process connected to one of
/// `servers`; returns how many it set.
#[cfg(target_os = "linux")]
pub fn set_on_connections_to(servers: &[SocketAddr]) -> usize {
    connections_to(servers)
        .into_iter()
        .filter(|&(fd, nodelay)| !nodelay && with_socket(fd, |s| s.set_tcp_nodelay(true)).is_ok())
        .count()
}

#[cfg(not(target_os = "linux"))]
pub fn set_on_connections_to(_servers: &[SocketAddr]) -> usize {
    0
}

/// This process's sockets connected to one of `servers`, with whether each
/// has `TCP_NODELAY` set.
#[cfg(target_os = "linux")]
pub fn connections_to(servers: &[SocketAddr]) -> Vec<(i32, bool)> {
    if servers.is_empty() {
        return Vec::new();
    }
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let Some(fd) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let is_socket = std::fs::read_link(entry.path())
            .is_ok_and(|target| target.to_string_lossy().starts_with("socket:"));
        if !is_socket {
            continue;
        }
        let peer = with_socket(fd, |s| s.peer_addr())
            .ok()
            .and_then(|a| a.as_socket());
        if peer.is_some_and(|peer| servers.contains(&peer))
            && let Ok(nodelay) = with_socket(fd, |s| s.tcp_nodelay())
        {
            found.push((fd, nodelay));
        }
    }
    found
}

#[cfg(not(target_os = "linux"))]
pub fn connections_to(_servers: &[SocketAddr]) -> Vec<(i32, bool)> {
    Vec::new()
}

/// Runs `f` on the socket behind `fd`, which this code does not own.
#[cfg(target_os = "linux")]
fn with_socket<T>(
    fd: i32,
    f: impl FnOnce(&socket2::SockRef<'_>) -> std::io::Result<T>,
) -> std::io::Result<T> {
    // SAFETY: the descriptor is only borrowed for the socket-option and
    // address calls below, never closed or read. If another thread closes it
    // meanwhile, the calls fail (EBADF) or reach whatever reused the number;
    // the only change made is `TCP_NODELAY`, and only after the peer check.
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    f(&socket2::SockRef::from(&fd))
}
