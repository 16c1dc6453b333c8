//! The gateway's admin endpoint on `--admin-listen`: `/healthz` (the process answers), `/readyz`
//! (the ledger answers and lets the gateway's token claim — the `ledger` scope —, and the gateway
//! is not draining; otherwise 503 naming the cause) and
//! `/metrics` (Prometheus text).

use crate::Gateway;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// How long `/readyz` waits for the ledger.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// The admin routes.
pub fn router(gw: Arc<Gateway>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(gw)
}

/// 200 `ready`, or 503 with the cause: `draining`, or `ledger unavailable: WHY`.
async fn readyz(State(gw): State<Arc<Gateway>>) -> (StatusCode, String) {
    if gw.draining.load(Ordering::Relaxed) {
        return (StatusCode::SERVICE_UNAVAILABLE, "draining\n".into());
    }
    match gw.ledger.probe(PROBE_TIMEOUT).await {
        Ok(()) => (StatusCode::OK, "ready\n".into()),
        Err(e) => {
            tracing::warn!(error = %e, "ledger not ready");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("ledger unavailable: {e}\n"),
            )
        }
    }
}

async fn metrics(
    State(gw): State<Arc<Gateway>>,
) -> ([(axum::http::HeaderName, &'static str); 1], String) {
    let mut text = format!(
        "# HELP oncekey_gateway_build_info Oncekey gateway build information.\n# TYPE oncekey_gateway_build_info gauge\noncekey_gateway_build_info{{version=\"{}\"}} 1\n",
        env!("CARGO_PKG_VERSION")
    );
    text.push_str(&gw.metrics.encode());
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
}
