//! The admin HTTP endpoint: `/healthz` (the process answers), `/readyz` (the store answers and the
//! server is not draining) and `/metrics` (Prometheus text).
//!
//! HTTP/1.1 only, with its own connection limit (`ADMIN_MAX_CONNECTIONS`, beyond which new
//! connections are closed at once) and a header timeout that also closes idle keep-alive
//! connections, so that clients that connect and stall cannot hold the port.

use crate::conn::{accept_loop, Gate, ADMIN_MAX_CONNECTIONS};
use crate::engine::Engine;
use crate::store::Store;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// What the admin endpoint reads.
pub(crate) struct AdminState<S> {
    /// The engine (for store readiness).
    pub engine: Arc<Engine<S>>,
    /// Set when the server starts draining.
    pub draining: AtomicBool,
}

/// How long a request's headers may take to arrive, counted from the connection's start or the
/// previous response (so it is also the idle timeout of a keep-alive connection).
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long shutdown waits for admin connections to finish their requests.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Serves the admin endpoint on `listener` until `shutdown` resolves.
pub(crate) async fn serve<S: Store>(
    listener: TcpListener,
    state: Arc<AdminState<S>>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz::<S>))
        .route("/metrics", get(metrics::<S>))
        .with_state(state);
    let gate = Gate::new("admin", ADMIN_MAX_CONNECTIONS);
    let (stop_tx, stop_rx) = watch::channel(false);
    accept_loop(listener, gate.clone(), shutdown, |accepted| {
        let service = TowerToHyperService::new(app.clone());
        let mut stop = stop_rx.clone();
        tokio::spawn(async move {
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT);
            let connection = http.serve_connection(TokioIo::new(accepted.stream), service);
            tokio::pin!(connection);
            let stopping = tokio::select! {
                _ = connection.as_mut() => false,
                stopped = stop.wait_for(|stop| *stop) => stopped.is_ok(),
            };
            if stopping {
                connection.as_mut().graceful_shutdown();
                let _ = connection.await;
            }
            drop(accepted.slot);
        });
        std::future::ready(())
    })
    .await;
    stop_tx.send_replace(true);
    let _ = tokio::time::timeout(DRAIN_TIMEOUT, gate.closed()).await;
    Ok(())
}

async fn readyz<S: Store>(State(state): State<Arc<AdminState<S>>>) -> (StatusCode, String) {
    if state.draining.load(Ordering::Relaxed) {
        return (StatusCode::SERVICE_UNAVAILABLE, "draining\n".into());
    }
    match state.engine.store().check_ready().await {
        Ok(()) => (StatusCode::OK, "ready\n".into()),
        Err(e) => {
            tracing::warn!(error = %e, "store not ready");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "store unavailable\n".into(),
            )
        }
    }
}

async fn metrics<S: Store>(
    State(state): State<Arc<AdminState<S>>>,
) -> ([(axum::http::HeaderName, &'static str); 1], String) {
    let mut text = format!(
        "# HELP oncekey_build_info Oncekey build information.\n# TYPE oncekey_build_info gauge\noncekey_build_info{{version=\"{}\"}} 1\n",
        env!("CARGO_PKG_VERSION")
    );
    text.push_str(&state.engine.metrics().encode());
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
}
