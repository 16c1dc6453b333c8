//! The admin HTTP endpoint: `/healthz` (the process answers), `/readyz` (the store answers and the
//! server is not draining) and `/metrics` (Prometheus text).

use crate::engine::Engine;
use crate::store::Store;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::net::TcpListener;

/// What the admin endpoint reads.
pub struct AdminState<S> {
    /// The engine (for store readiness).
    pub engine: Arc<Engine<S>>,
    /// Set when the server starts draining.
    pub draining: AtomicBool,
}

/// Serves the admin endpoint on `listener` until `shutdown` resolves.
pub async fn serve<S: Store>(
    listener: TcpListener,
    state: Arc<AdminState<S>>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz::<S>))
        .route("/metrics", get(metrics::<S>))
        .with_state(state);
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
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
