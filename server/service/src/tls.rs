//! TLS on the gRPC port, reloadable: the certificate, its key and (for mutual TLS) the client CA
//! are read at start and again on SIGHUP or when they change (`crate::reload`), so a renewed
//! certificate — cert-manager rewrites the mounted Secret — is served to new connections
//! without a restart (with the embedded store a
//! restart is an outage). Connections already open keep the configuration they were made with. A
//! reload that fails (a half-written file, a key that does not match the certificate) keeps the
//! previous configuration and says why.
//!
//! Handshakes run beside the accept loop, each within `HANDSHAKE_TIMEOUT` (which also bounds the
//! HTTP/2 preface after it), so a client that connects and never finishes its handshake holds
//! nothing but its own socket, and only until then; connections count against `--max-connections`
//! from the moment they are accepted.

use crate::conn::{accept_loop, Accepted, Conn, Gate};
use crate::settings::{ConfigError, ServeConfig};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::rustls::pki_types::pem::PemObject as _;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{RootCertStore, ServerConfig};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tokio_stream::wrappers::ReceiverStream;

/// Handshaken connections waiting for the server to take them.
const ACCEPTED_QUEUE: usize = 128;

/// The files TLS is read from.
#[derive(Debug, Clone)]
struct Files {
    cert: PathBuf,
    key: PathBuf,
    client_ca: Option<PathBuf>,
}

/// The gRPC port's TLS configuration, swapped whole on reload.
pub(crate) struct Tls {
    files: Files,
    config: RwLock<Arc<ServerConfig>>,
}

impl Tls {
    /// TLS from `--tls-cert`, `--tls-key` and `--tls-client-ca`; `None` without a certificate.
    /// Errors name the flag whose file is wrong.
    pub(crate) fn from_config(args: &ServeConfig) -> Result<Option<Self>, ConfigError> {
        let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) else {
            return Ok(None);
        };
        let files = Files {
            cert: cert.clone(),
            key: key.clone(),
            client_ca: args.tls_client_ca.clone(),
        };
        let config = build(&files).map_err(ConfigError)?;
        Ok(Some(Self {
            files,
            config: RwLock::new(Arc::new(config)),
        }))
    }

    /// Reads the files again; on success new connections get the new configuration, on failure
    /// the previous one stays.
    pub(crate) fn reload(&self) -> Result<(), String> {
        let config = build(&self.files)?;
        *self.config.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(config);
        Ok(())
    }

    fn current(&self) -> Arc<ServerConfig> {
        self.config
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

fn read_error(flag: &str, path: &Path, e: impl std::fmt::Display) -> String {
    format!("{flag} {}: {e}", path.display())
}

/// A rustls server configuration from the files, offering HTTP/2 (gRPC) by ALPN.
fn build(files: &Files) -> Result<ServerConfig, String> {
    let certs = CertificateDer::pem_file_iter(&files.cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| read_error("--tls-cert", &files.cert, e))?;
    if certs.is_empty() {
        return Err(read_error(
            "--tls-cert",
            &files.cert,
            "no certificate in it",
        ));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .map_err(|e| read_error("--tls-key", &files.key, e))?;
    let builder = ServerConfig::builder();
    let builder = match &files.client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let flag = "--tls-client-ca";
            let mut roots = RootCertStore::empty();
            for cert in
                CertificateDer::pem_file_iter(path).map_err(|e| read_error(flag, path, e))?
            {
                let cert = cert.map_err(|e| read_error(flag, path, e))?;
                roots.add(cert).map_err(|e| read_error(flag, path, e))?;
            }
            let verifier = WebPkiClientVerifier::builder(roots.into())
                .build()
                .map_err(|e| read_error(flag, path, e))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_single_cert(certs, key).map_err(|e| {
        format!(
            "--tls-cert {} with --tls-key {}: {e}",
            files.cert.display(),
            files.key.display()
        )
    })?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}

/// TLS connections accepted on `listener` within `gate`'s limit (Nagle off, as for plaintext),
/// each handshaken with the configuration current when it connected. The handshake and then the
/// HTTP/2 preface must arrive within `HANDSHAKE_TIMEOUT` of connecting. Ends when the receiving
/// side is dropped.
pub(crate) fn incoming(
    listener: TcpListener,
    gate: Gate,
    tls: Arc<Tls>,
) -> ReceiverStream<Result<Conn<TlsStream<TcpStream>>, std::io::Error>> {
    let (tx, rx) = mpsc::channel(ACCEPTED_QUEUE);
    let closed = tx.clone();
    tokio::spawn(accept_loop(
        listener,
        gate,
        async move { closed.closed().await },
        move |accepted| {
            let acceptor = TlsAcceptor::from(tls.current());
            let tx = tx.clone();
            // Handshakes run beside the accept loop.
            tokio::spawn(async move {
                let Accepted {
                    stream,
                    peer,
                    slot,
                    deadline,
                } = accepted;
                match tokio::time::timeout_at(deadline, acceptor.accept(stream)).await {
                    Ok(Ok(stream)) => {
                        let _ = tx.send(Ok(Conn::new(stream, slot, deadline))).await;
                    }
                    Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                    Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                }
            });
            std::future::ready(())
        },
    ));
    ReceiverStream::new(rx)
}
