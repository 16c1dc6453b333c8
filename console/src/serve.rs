//! Running the console: checks the flags, makes the session key, binds `--listen` (HTTPS with
//! `--tls-cert`/`--tls-key`), prints one line `listening http=ADDR` (or `https=ADDR`) on stdout,
//! and serves until `shutdown` resolves; then `/readyz` answers 503, no new connection is taken,
//! and the open ones finish their requests (at most `DRAIN`).
//!
//! Connections are bounded like `serve`'s and the gateway's (`oncekey_server::conn`,
//! `oncekey_gateway::serve_connection`): at most `MAX_CONNECTIONS`, the TLS handshake within its
//! deadline, then `TIMEOUTS` for request heads and idleness.

use crate::args::{read_session_key, ConfigError, ConsoleArgs};
use crate::ledger::Ledger;
use crate::routes::{router, App};
use crate::session::Sealer;
use oncekey_gateway::{serve_connection, Timeouts};
use oncekey_server::conn::{accept_loop, Accepted, Gate};
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::rustls::pki_types::pem::PemObject as _;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

/// Most browser connections open at once (operators, not traffic).
const MAX_CONNECTIONS: usize = 1024;
/// A connection's time limits: a whole request head within 10 s, and closed after 60 s without
/// a request (the Needs attention page's refresh keeps its connection busy more often).
const TIMEOUTS: Timeouts = Timeouts {
    header_read: Duration::from_secs(10),
    idle: Duration::from_secs(60),
};
/// How long the exit waits for open requests.
const DRAIN: Duration = Duration::from_secs(10);

/// Where the ledger is and how to reach it (the client commands' `--server` and TLS flags).
#[derive(Debug, Clone)]
pub struct LedgerConnection {
    /// `http://…` or `https://…`.
    pub server: String,
    /// TLS to the ledger (CA, client certificate for mutual TLS, name).
    pub tls: Option<oncekey_client::TlsOptions>,
}

/// Why the console stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A flag is wrong; the message names it.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Serving failed.
    #[error("serving failed: {0}")]
    Io(#[from] std::io::Error),
}

fn tls_config(cert: &std::path::Path, key: &std::path::Path) -> Result<ServerConfig, ConfigError> {
    let flag =
        |f: &str, p: &std::path::Path, e: String| ConfigError(format!("{f} {}: {e}", p.display()));
    let certs = CertificateDer::pem_file_iter(cert)
        .and_then(|c| c.collect::<Result<Vec<_>, _>>())
        .map_err(|e| flag("--tls-cert", cert, e.to_string()))?;
    if certs.is_empty() {
        return Err(flag("--tls-cert", cert, "no certificate in it".into()));
    }
    let private =
        PrivateKeyDer::from_pem_file(key).map_err(|e| flag("--tls-key", key, e.to_string()))?;
    let mut config = ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, private)
        .map_err(|e| flag("--tls-key", key, format!("does not fit --tls-cert: {e}")))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// Runs the console until `shutdown` resolves.
pub async fn run(
    args: ConsoleArgs,
    ledger: LedgerConnection,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), Error> {
    args.validate()?;
    let key = match &args.session_key_file {
        Some(path) => read_session_key(path)?,
        None => {
            tracing::warn!("no --session-key-file: sessions end when this process stops and do not work across replicas");
            rand::random()
        }
    };
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(TlsAcceptor::from(Arc::new(tls_config(cert, key)?))),
        _ => None,
    };
    let client = Ledger::new(&ledger.server, ledger.tls.as_ref()).map_err(ConfigError)?;
    let listener = TcpListener::bind(args.listen)
        .await
        .map_err(|e| ConfigError(format!("--listen {}: {e}", args.listen)))?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    println!("listening {scheme}={}", listener.local_addr()?);
    tracing::info!(listen = %listener.local_addr()?, ledger = %ledger.server, tls = tls.is_some(), "oncekey console serving");
    let app = Arc::new(App {
        ledger: client,
        sealer: Sealer::new(&key),
        args,
        tls: tls.is_some(),
        draining: false.into(),
    });
    let routes = router(app.clone());
    let gate = Gate::new("console", MAX_CONNECTIONS);
    let (stop_tx, stop_rx) = watch::channel(false);
    let until = {
        let mut stop = stop_rx.clone();
        async move {
            let _ = stop.wait_for(|s| *s).await;
        }
    };
    let accepting = accept_loop(listener, gate.clone(), until, |accepted| {
        tokio::spawn(connection(
            accepted,
            tls.clone(),
            routes.clone(),
            stop_rx.clone(),
        ));
        std::future::ready(())
    });
    tokio::pin!(accepting);
    tokio::select! {
        () = &mut accepting => {}
        () = shutdown => {
            tracing::info!("shutdown signal: draining");
            app.draining.store(true, Ordering::Relaxed);
        }
    }
    stop_tx.send_replace(true);
    accepting.await;
    if tokio::time::timeout(DRAIN, gate.closed()).await.is_err() {
        tracing::warn!(
            open = gate.open(),
            "drain timeout: exiting with connections still open"
        );
    }
    tracing::info!("stopped");
    Ok(())
}

async fn connection(
    accepted: Accepted,
    tls: Option<TlsAcceptor>,
    routes: axum::Router,
    stop: watch::Receiver<bool>,
) {
    let Accepted {
        stream,
        peer,
        slot,
        deadline,
    } = accepted;
    match tls {
        None => serve_connection(stream, peer, routes, TIMEOUTS, stop).await,
        Some(acceptor) => match tokio::time::timeout_at(deadline, acceptor.accept(stream)).await {
            Ok(Ok(stream)) => serve_connection(stream, peer, routes, TIMEOUTS, stop).await,
            Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
            Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
        },
    }
    drop(slot);
}
