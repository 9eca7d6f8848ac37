//! TLS for every call out (sinks, status and provider look-ups): rustls with
//! the ring provider, which the database driver builds already, and the
//! operating system's certificate store (`ca-certificates` on Debian;
//! `SSL_CERT_FILE` names another bundle).

/// Makes ring the process's TLS provider; does nothing once one is
/// installed. Every HTTP client is built after it: reqwest panics without one.
pub fn install() {
    // An error only says a provider is installed already, which then stays.
    let _ = rustls::crypto::ring::default_provider().install_default();
}
