//! The accept loop shared by the ports: a slot per open connection, new connections closed at
//! once when no slot is free, and a growing pause after a failed accept instead of a spin.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// Shortest and longest pause after a failed accept.
const BACKOFF_MIN: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// One port's connection budget: a slot per open connection. Clones share the budget.
#[derive(Clone, Debug)]
pub struct Gate {
    port: &'static str,
    max: usize,
    slots: Arc<Semaphore>,
}

impl Gate {
    /// A budget of `max` connections (at least 1) for the port named `port` in logs.
    pub fn new(port: &'static str, max: usize) -> Self {
        let max = max.clamp(1, Semaphore::MAX_PERMITS.min(u32::MAX as usize));
        Self {
            port,
            max,
            slots: Arc::new(Semaphore::new(max)),
        }
    }

    /// The most connections the port holds at once.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.max - self.slots.available_permits()
    }

    /// Resolves once every connection has closed.
    pub async fn closed(&self) {
        let all = u32::try_from(self.max).unwrap_or(u32::MAX);
        let _ = self.slots.acquire_many(all).await;
    }
}

/// A connection a port took.
pub struct Accepted {
    /// The connection (Nagle's algorithm off).
    pub stream: TcpStream,
    /// Who connected.
    pub peer: SocketAddr,
    /// Its slot in the port's budget, free again when dropped.
    pub slot: OwnedSemaphorePermit,
    /// When its handshake time (`HANDSHAKE_TIMEOUT`) runs out.
    pub deadline: Instant,
}

/// Accepts connections on `listener` until `until` resolves, handing each one that gets a slot in
/// `gate` to `take` (awaited before the next accept; spawn there for anything slow). A connection
/// beyond the budget is closed at once.
pub async fn accept_loop<F, Fut>(
    listener: TcpListener,
    gate: Gate,
    until: impl Future<Output = ()>,
    mut take: F,
) where
    F: FnMut(Accepted) -> Fut,
    Fut: Future<Output = ()>,
{
    tokio::pin!(until);
    let mut backoff = Duration::ZERO;
    // Connections closed since the budget was last found full (logged when it frees up).
    let mut refused: u64 = 0;
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut until => return,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            // The peer gave up while queued: nothing wrong with the listener.
            Err(e) if per_connection(&e) => continue,
            Err(e) => {
                if backoff.is_zero() {
                    tracing::warn!(port = gate.port, error = %e, open = gate.open(), "accepting connections fails; retrying with a pause");
                }
                backoff = (backoff * 2).clamp(BACKOFF_MIN, BACKOFF_MAX);
                tokio::select! {
                    () = tokio::time::sleep(backoff) => continue,
                    () = &mut until => return,
                }
            }
        };
        backoff = Duration::ZERO;
        let Ok(slot) = gate.slots.clone().try_acquire_owned() else {
            if refused == 0 {
                tracing::warn!(
                    port = gate.port,
                    max_connections = gate.max,
                    "connection limit reached: closing new connections until some close"
                );
            }
            refused += 1;
            drop(stream);
            continue;
        };
        if refused > 0 {
            tracing::info!(
                port = gate.port,
                refused,
                "below the connection limit again"
            );
            refused = 0;
        }
        // Nagle off: a gRPC answer is several small writes (headers, data, trailers), and with
        // Nagle on the last ones wait for the client's delayed ACK (40 ms on Linux).
        let _ = stream.set_nodelay(true);
        let deadline = Instant::now() + super::HANDSHAKE_TIMEOUT;
        take(Accepted {
            stream,
            peer,
            slot,
            deadline,
        })
        .await;
    }
}

/// Whether an accept error concerns only the connection being accepted.
fn per_connection(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn connections_beyond_the_budget_are_closed_at_once_and_slots_come_back() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let gate = Gate::new("test", 2);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(accept_loop(
            listener,
            gate.clone(),
            std::future::pending(),
            move |a| {
                let _ = tx.send(a);
                async {}
            },
        ));
        let _a = TcpStream::connect(addr).await.unwrap();
        let _b = TcpStream::connect(addr).await.unwrap();
        let first = rx.recv().await.unwrap();
        let _second = rx.recv().await.unwrap();
        assert_eq!(gate.open(), 2);
        // The third is closed by the server without a byte.
        let mut c = TcpStream::connect(addr).await.unwrap();
        let mut buf = [0u8; 1];
        assert_eq!(c.read(&mut buf).await.unwrap_or(0), 0);
        // One closes: the next connection gets its slot.
        drop(first);
        assert_eq!(gate.open(), 1);
        let _d = TcpStream::connect(addr).await.unwrap();
        let fourth = rx.recv().await.unwrap();
        assert!(fourth.peer.ip().is_loopback());
        assert_eq!(gate.open(), 2);
    }
}
