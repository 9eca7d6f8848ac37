//! A downstream that speaks HTTPS only, with a certificate for 127.0.0.1
//! signed by a certificate authority made for the test by the `openssl`
//! command: a process trusts it only when told (`SSL_CERT_FILE`). It applies
//! every effect it is sent and answers 201.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{ServerConfig, crypto};

pub struct TlsDownstream {
    /// `https://127.0.0.1:<port>/refunds`
    pub url: String,
    /// Idempotency keys of the effects received over TLS, in order.
    calls: Arc<Mutex<Vec<String>>>,
    dir: tempfile::TempDir,
}

impl TlsDownstream {
    pub async fn start() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let acceptor = TlsAcceptor::from(Arc::new(server_config(dir.path())));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        let port = listener.local_addr().expect("address").port();
        let calls = Arc::new(Mutex::new(Vec::new()));
        let seen = calls.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, seen) = (acceptor.clone(), seen.clone());
                tokio::spawn(async move {
                    // A client that does not trust the certificate ends
                    // the handshake: nothing is received.
                    if let Ok(mut tls) = acceptor.accept(tcp).await {
                        answer(&mut tls, &seen).await;
                    }
                });
            }
        });
        Self {
            url: format!("https://127.0.0.1:{port}/refunds"),
            calls,
            dir,
        }
    }

    /// The certificate authority's certificate, as a PEM bundle.
    pub fn authority(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    pub fn calls(&self) -> Vec<String> {
        self.calls.lock().expect("calls").clone()
    }

    pub async fn wait_calls(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(15);
        while self.calls().len() < n {
            assert!(Instant::now() < deadline, "{n} calls: {:?}", self.calls());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn sink_toml(&self) -> String {
        format!(
            "[[sinks]]\nkind = \"http\"\nurl = \"{}\"\ntimeout_ms = 5000\n",
            self.url
        )
    }
}

/// Makes the authority and the server's certificate in `dir`; returns the
/// server's TLS configuration.
fn server_config(dir: &Path) -> ServerConfig {
    std::fs::write(
        dir.join("leaf.ext"),
        "subjectAltName = IP:127.0.0.1\nbasicConstraints = CA:FALSE\n\
         keyUsage = digitalSignature\nextendedKeyUsage = serverAuth\n",
    )
    .expect("extensions written");
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    openssl(
        dir,
        &["req", "-x509"],
        &ec,
        &[
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=Unicity test authority",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign",
        ],
    );
    openssl(
        dir,
        &["req"],
        &ec,
        &[
            "-keyout",
            "leaf.key",
            "-out",
            "leaf.csr",
            "-subj",
            "/CN=127.0.0.1",
        ],
    );
    openssl(
        dir,
        &["x509", "-req"],
        &[],
        &[
            "-in",
            "leaf.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "leaf.pem",
            "-days",
            "2",
            "-extfile",
            "leaf.ext",
        ],
    );
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(dir.join("leaf.pem"))
        .expect("certificate read")
        .collect::<Result<_, _>>()
        .expect("certificate parsed");
    let key = PrivateKeyDer::from_pem_file(dir.join("leaf.key")).expect("key read");
    ServerConfig::builder_with_provider(Arc::new(crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("server configuration")
}

fn openssl(dir: &Path, command: &[&str], key: &[&str], args: &[&str]) {
    let output = Command::new("openssl")
        .current_dir(dir)
        .args(command)
        .args(key)
        .args(args)
        .output()
        .expect("the openssl command runs (package openssl)");
    assert!(
        output.status.success(),
        "openssl {command:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Reads one request (headers, then as many bytes as it declares) and
/// answers 201, recording its Idempotency-Key.
async fn answer<S: AsyncReadExt + AsyncWriteExt + Unpin>(
    stream: &mut S,
    seen: &Mutex<Vec<String>>,
) {
    let mut request = Vec::new();
    let mut chunk = [0u8; 4096];
    let body_at = loop {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => request.extend_from_slice(&chunk[..n]),
        }
        if let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
    };
    let head = String::from_utf8_lossy(&request[..body_at]).into_owned();
    let header = |name: &str| {
        head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name)
                .then(|| value.trim().to_owned())
        })
    };
    let length: usize = header("content-length")
        .and_then(|l| l.parse().ok())
        .unwrap_or(0);
    while request.len() < body_at + length {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => request.extend_from_slice(&chunk[..n]),
        }
    }
    seen.lock()
        .expect("calls")
        .push(header("idempotency-key").unwrap_or_default());
    let body = r#"{"id":"tls_applied"}"#;
    let reply = format!(
        "HTTP/1.1 201 Created\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(reply.as_bytes()).await;
    let _ = stream.shutdown().await;
}
