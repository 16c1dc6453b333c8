//! The gateway's client connections, on the proxy and the admin port: at most `--max-connections`
//! open at once — beyond it new connections are closed at once and the open ones keep being
//! served (the accept loop and budget of `oncekey serve`, `oncekey_server::conn`) — each served as
//! HTTP/1.1 or cleartext HTTP/2 and closed when its time limits say so (`activity`): no whole
//! request head within `--header-read-timeout`, or no request for `--idle-timeout`. A request in
//! flight is never cut by them, however long the upstream takes.
//!
//! Nothing here reads requests; the router gets each one with the client's address as
//! `ConnectInfo`.

mod activity;

pub use activity::Timeouts;

use activity::{Activity, Tracked, Watched};
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::Router;
use http::Request;
use hyper::body::Incoming;
use hyper::service::Service as _;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use oncekey_server::conn::{accept_loop, Accepted, Gate};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::time::Instant;

/// How long a connection being closed for its time limits may take to say goodbye (an HTTP/2
/// GOAWAY) before it is dropped.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// Serves `app` on `listener` within `gate`'s budget until `stop` turns true; then stops
/// accepting and shuts the open connections down gracefully (each after its requests in flight).
/// Returns once it stopped accepting; `gate.closed()` says when the last connection closed.
pub async fn serve(
    listener: TcpListener,
    gate: Gate,
    timeouts: Timeouts,
    app: Router,
    stop: watch::Receiver<bool>,
) {
    let until = {
        let mut stop = stop.clone();
        async move {
            let _ = stop.wait_for(|s| *s).await;
        }
    };
    accept_loop(listener, gate, until, |accepted| {
        tokio::spawn(connection(accepted, app.clone(), timeouts, stop.clone()));
        std::future::ready(())
    })
    .await;
}

/// Serves one connection until it closes, its time limits close it, or `stop`.
async fn connection(
    accepted: Accepted,
    app: Router,
    timeouts: Timeouts,
    stop: watch::Receiver<bool>,
) {
    let Accepted {
        stream, peer, slot, ..
    } = accepted;
    serve_connection(stream, peer, app, timeouts, stop).await;
    drop(slot);
}

/// Serves `app` on one connection already accepted (plain, or after a TLS handshake) as HTTP/1.1
/// or HTTP/2, with `timeouts`, until it closes, its time limits close it, or `stop` (then
/// gracefully, after its requests in flight). Also `oncekey console`'s.
pub async fn serve_connection<IO>(
    io: IO,
    peer: SocketAddr,
    app: Router,
    timeouts: Timeouts,
    mut stop: watch::Receiver<bool>,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let activity = Activity::new();
    let io = TokioIo::new(Watched::new(io, activity.clone()));
    let app = TowerToHyperService::new(app);
    let service = {
        let activity = activity.clone();
        hyper::service::service_fn(move |mut request: Request<Incoming>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            let busy = activity.begin(request.version());
            let call = app.call(request);
            async move {
                let response = call.await?;
                Ok::<_, Infallible>(response.map(|body| Body::new(Tracked::new(body, busy))))
            }
        })
    };
    let builder = auto::Builder::new(TokioExecutor::new());
    let connection = builder.serve_connection(io, service);
    tokio::pin!(connection);
    let mut stopping = false;
    let mut dropping_at: Option<Instant> = None;
    loop {
        // While a request is in flight nothing is due: look again after the shorter limit,
        // the soonest anything can be due once it ends.
        let wake = dropping_at.unwrap_or_else(|| {
            activity
                .due(&timeouts)
                .unwrap_or_else(|| Instant::now() + timeouts.header_read.min(timeouts.idle))
        });
        tokio::select! {
            _ = connection.as_mut() => break,
            () = tokio::time::sleep_until(wake) => {
                if dropping_at.is_some() {
                    break;
                }
                if activity.due(&timeouts).is_some_and(|due| due <= Instant::now()) {
                    connection.as_mut().graceful_shutdown();
                    dropping_at = Some(Instant::now() + CLOSE_GRACE);
                }
            }
            _ = stop.wait_for(|s| *s), if !stopping => {
                stopping = true;
                connection.as_mut().graceful_shutdown();
            }
        }
    }
}
