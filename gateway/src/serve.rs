//! Running the gateway: checks the flags, connects (lazily) to the ledger, binds the proxy and
//! admin ports, prints one line `listening http=ADDR admin=ADDR` on stdout (scripts and tests read
//! it to learn the ports), and serves until `shutdown` resolves. Then `/readyz` answers 503, the
//! proxy stops accepting connections, and requests in flight — including forwards whose client
//! went away — finish and settle their keys (at most `--drain-timeout`).

use crate::args::{ConfigError, GatewayArgs, SemanticsArg};
use crate::ledger::{Ledger, Settings};
use crate::{admin, metrics, proxy, tracker, upstream, Gateway};
use axum::serve::ListenerExt;
use axum::Router;
use oncekey_client::{Client, ConnectOptions, RetryPolicy, Semantics};
use std::future::{Future, IntoFuture};
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
        config,
        ledger,
        upstream,
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

    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = move || {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    };
    // The admin port outlives the drain, so that /readyz answers 503 ("draining") meanwhile.
    let (admin_stop, admin_stopped) = tokio::sync::oneshot::channel::<()>();
    let admin_task = tokio::spawn(
        axum::serve(admin_listener, admin::router(gw.clone()))
            .with_graceful_shutdown(async {
                let _ = admin_stopped.await;
            })
            .into_future(),
    );
    let app = Router::new().fallback(proxy::handle).with_state(gw.clone());
    let listener = listener.tap_io(|tcp| {
        // A response is several small writes; Nagle would hold the last ones for the peer's ACK.
        let _ = tcp.set_nodelay(true);
    });
    let mut server = std::pin::pin!(axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(stopped())
    .into_future());

    tokio::select! {
        result = &mut server => result?,
        () = shutdown => {
            tracing::info!(in_flight = gw.tracker.active(), "shutdown signal: draining");
            gw.draining.store(true, Ordering::Relaxed);
            stop_tx.send_replace(true);
            let drained = async {
                let result = (&mut server).await;
                gw.tracker.idle().await;
                result
            };
            match tokio::time::timeout(args.drain_timeout, drained).await {
                Ok(result) => result?,
                Err(_) => tracing::warn!(in_flight = gw.tracker.active(), "drain timeout: exiting with requests still open"),
            }
        }
    }
    stop_tx.send_replace(true);
    let _ = admin_stop.send(());
    let _ = admin_task.await;
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
