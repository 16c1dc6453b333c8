//! Running the gateway: checks the flags, connects (lazily) to the ledger, binds the proxy and
//! admin ports, prints one line `listening http=ADDR admin=ADDR` on stdout (scripts and tests read
//! it to learn the ports), and serves until `shutdown` resolves. Then `/readyz` answers 503, the
//! proxy stops accepting connections, and requests in flight — including forwards whose client
//! went away — finish and settle their keys (at most `--drain-timeout`).

use crate::args::{GatewayArgs, SemanticsArg};
use crate::config::ConfigError;
use crate::ledger::{Ledger, Settings};
use crate::{admin, conn, metrics, policy, proxy, tracker, unknown, upstream, Gateway};
use axum::Router;
use oncekey_client::{Client, ConnectOptions, RetryPolicy, Semantics};
use oncekey_server::conn::{Gate, ADMIN_MAX_CONNECTIONS};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// Where the ledger is and how to reach it (the client commands' `--server`, `--token`,
/// `--tenant` and TLS flags).
#[derive(Debug, Clone)]
pub struct LedgerConnection {
    /// The ledger's address, `http://…` or `https://…`.
    pub server: String,
    /// Credentials and TLS. Timeouts, retries and laziness are the gateway's own.
    pub options: ConnectOptions,
}

/// Why the gateway stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A flag is wrong; the message names it.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Serving failed.
    #[error("serving failed: {0}")]
    Serve(#[from] std::io::Error),
}

/// Each ledger call's per-attempt timeout: long enough for a loaded ledger, short enough that a
/// request whose ledger vanished gets its 503 in seconds.
const LEDGER_TIMEOUT: Duration = Duration::from_secs(5);

/// Retries of a failed ledger call: few and quick, since a client is waiting (and will retry with
/// the same key itself after a 503).
const LEDGER_RETRY: RetryPolicy = RetryPolicy {
    max_attempts: 3,
    initial_backoff: Duration::from_millis(50),
    max_backoff: Duration::from_millis(500),
};

/// How long the exit waits for admin connections to finish their requests.
const ADMIN_DRAIN: Duration = Duration::from_secs(2);

/// Runs the gateway on `--listen` and `--admin-listen` until `shutdown` resolves, then drains.
pub async fn run(
    args: GatewayArgs,
    ledger: LedgerConnection,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), Error> {
    args.clone().validate()?;
    let listener = bind("--listen", args.listen).await?;
    let admin_listener = bind("--admin-listen", args.admin_listen).await?;
    println!(
        "listening http={} admin={}",
        listener.local_addr()?,
        admin_listener.local_addr()?
    );
    serve(args, ledger, listener, admin_listener, shutdown).await
}

/// Runs the gateway on listeners the caller bound (`--listen` and `--admin-listen` are ignored)
/// until `shutdown` resolves, then drains. For embedding, e.g. in `oncekey bench`.
pub async fn serve(
    args: GatewayArgs,
    ledger: LedgerConnection,
    listener: TcpListener,
    admin_listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), Error> {
    let config = args.validate()?;
    let args = config.args.clone();
    let options = ConnectOptions {
        timeout: Some(LEDGER_TIMEOUT),
        connect_timeout: Some(Duration::from_secs(2)),
        retry: LEDGER_RETRY,
        lazy: true,
        ..ledger.options
    };
    let server = ledger.server.clone();
    let client = Client::connect(&ledger.server, options)
        .await
        .map_err(|e| ConfigError(format!("--server {}: {e}", ledger.server)))?;
    let ledger = Ledger::new(
        client,
        Settings {
            namespace: args.namespace.clone(),
            lease: args.lease,
            retention: args.retention,
            semantics: match args.semantics {
                SemanticsArg::AtLeastOnce => Semantics::AtLeastOnce,
                SemanticsArg::AtMostOnce => Semantics::AtMostOnce,
            },
            wait: args.wait,
        },
    );
    let upstream = upstream::Upstream::new(
        config.upstream_authority.clone(),
        config.upstream_prefix.clone(),
    );
    let gw = Arc::new(Gateway {
        policy: policy::Policy::new(config.retryable_status.clone()),
        config,
        ledger,
        upstream,
        unknowns: unknown::Unknowns::default(),
        metrics: metrics::Metrics::default(),
        tracker: tracker::Tracker::default(),
        draining: false.into(),
    });

    tracing::info!(
        http = %listener.local_addr()?,
        admin = %admin_listener.local_addr()?,
        upstream = %args.upstream,
        ledger = %server,
        namespace = %args.namespace,
        "oncekey gateway serving"
    );

    let timeouts = conn::Timeouts {
        header_read: args.header_read_timeout,
        idle: args.idle_timeout,
    };
    // The admin port outlives the drain, so that /readyz answers 503 ("draining") meanwhile.
    let admin_gate = Gate::new("gateway-admin", ADMIN_MAX_CONNECTIONS);
    let (admin_stop, admin_stopped) = watch::channel(false);
    let admin_task = tokio::spawn(conn::serve(
        admin_listener,
        admin_gate.clone(),
        timeouts,
        admin::router(gw.clone()),
        admin_stopped,
    ));
    let gate = Gate::new("gateway", gw.config.max_connections);
    tracing::info!(
        max_connections = gate.max(),
        header_read_timeout = ?timeouts.header_read,
        idle_timeout = ?timeouts.idle,
        "client connection limits"
    );
    let app = Router::new().fallback(proxy::handle).with_state(gw.clone());
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut server = std::pin::pin!(conn::serve(listener, gate.clone(), timeouts, app, stop_rx));

    tokio::select! {
        () = &mut server => {}
        () = shutdown => {
            tracing::info!(in_flight = gw.tracker.active(), "shutdown signal: draining");
            gw.draining.store(true, Ordering::Relaxed);
            stop_tx.send_replace(true);
            let drained = async {
                (&mut server).await;
                gate.closed().await;
                gw.tracker.idle().await;
            };
            if tokio::time::timeout(args.drain_timeout, drained).await.is_err() {
                tracing::warn!(in_flight = gw.tracker.active(), "drain timeout: exiting with requests still open");
            }
        }
    }
    stop_tx.send_replace(true);
    admin_stop.send_replace(true);
    let _ = admin_task.await;
    let _ = tokio::time::timeout(ADMIN_DRAIN, admin_gate.closed()).await;
    tracing::info!("stopped");
    Ok(())
}

async fn bind(flag: &str, addr: SocketAddr) -> Result<TcpListener, Error> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| ConfigError(format!("{flag} {addr}: {e}")).into())
}

/// Resolves on SIGTERM or SIGINT.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::error!("cannot install the signal handlers: stopping only when killed");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}
