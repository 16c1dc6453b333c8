//! Connection limits for the listening ports, below gRPC and HTTP: how many connections a port
//! holds at once, how long a new connection has to finish its TLS handshake and HTTP/2 preface,
//! and what a port does when the process runs out of file descriptors.
//!
//! A port at its limit closes new connections at once and keeps serving the ones it has. A
//! failed accept (out of descriptors, out of memory) waits before trying again, longer each time
//! up to a second, instead of spinning on a listening socket that stays readable. The gRPC port's
//! default limit leaves a fifth of the descriptors to the store, the admin port and the logs.
//!
//! Answers ready at the same moment leave in one write (`oncekey_coalesce`).
//!
//! Nothing here reads requests: the only protocol knowledge is the shape of the HTTP/2 preface.
//! Public so that `oncekey gateway` bounds its HTTP ports with the same budget and accept loop.

mod accept;
mod preface;

pub use accept::{accept_loop, Accepted, Gate};
pub use preface::Conn;

use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

/// How long a new connection has to finish its TLS handshake (with TLS) and send the HTTP/2
/// preface; past it, the connection is closed.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// The gRPC port's default limit never exceeds this many connections.
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;
/// Connections the admin port holds at once (scrapers and probes need a few).
pub const ADMIN_MAX_CONNECTIONS: usize = 32;
/// Accepted connections waiting for the server to take them.
const ACCEPTED_QUEUE: usize = 128;

/// The soft limit on open file descriptors (`ulimit -n`), when there is one.
pub fn descriptor_soft_limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current
}

/// The gRPC port's default connection limit under a descriptor soft limit of `soft`: the lower of
/// 10 000 and 80 % of it (at least 1).
pub fn default_max_connections(soft: Option<u64>) -> usize {
    let Some(soft) = soft else {
        return DEFAULT_MAX_CONNECTIONS;
    };
    usize::try_from(soft.saturating_mul(8) / 10)
        .unwrap_or(usize::MAX)
        .clamp(1, DEFAULT_MAX_CONNECTIONS)
}

/// Plaintext HTTP/2 connections accepted on `listener` within `gate`'s limit, each closed unless
/// it sends the HTTP/2 preface within `HANDSHAKE_TIMEOUT`. Ends when the receiver is dropped.
pub fn plaintext(
    listener: TcpListener,
    gate: Gate,
) -> ReceiverStream<Result<Conn<tokio::net::TcpStream>, std::io::Error>> {
    let (tx, rx) = mpsc::channel(ACCEPTED_QUEUE);
    let closed = tx.clone();
    tokio::spawn(accept_loop(
        listener,
        gate,
        async move { closed.closed().await },
        move |accepted| {
            let tx = tx.clone();
            async move {
                let conn = Conn::new(accepted.stream, accepted.slot, accepted.deadline);
                let _ = tx.send(Ok(conn)).await;
            }
        },
    ));
    ReceiverStream::new(rx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_limit_is_the_lower_of_ten_thousand_and_four_fifths_of_the_descriptors() {
        assert_eq!(default_max_connections(Some(256)), 204);
        assert_eq!(default_max_connections(Some(1024)), 819);
        assert_eq!(default_max_connections(Some(1 << 20)), 10_000);
        assert_eq!(default_max_connections(Some(1)), 1);
        assert_eq!(default_max_connections(None), 10_000);
        assert_eq!(default_max_connections(Some(u64::MAX)), 10_000);
    }
}
