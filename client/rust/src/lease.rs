//! The lease an operation runs under, and the background task that keeps it alive through the
//! server's `KeepAlive` stream while the operation runs.
//!
//! The task reopens the stream after a transport failure or a server restart (the server's first
//! renewal then says whether the lease still holds), and marks the lease lost when the server
//! answers LEASE_LOST (or ALREADY_SETTLED: someone settled it with this token). When the server
//! ends the stream with KEEPALIVE_REPLACED, a newer stream on the same lease (another keep-alive
//! of this operation) keeps it alive: the task stops without reopening, and the lease is not lost.
//! It never retries anything else blindly, and it stops the moment its guard is dropped, so a
//! caller that goes away lets the lease run out.

use crate::connect::Client;
use crate::error::{Error, Reason};
use crate::key::OperationKey;
use crate::types::LeaseGrant;
use std::time::{Duration, SystemTime};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The lease an operation runs under, handed to the closure of [`crate::Once::run`]. Cheap to
/// clone.
///
/// Pass [`Lease::fencing_token`] to downstream systems that can fence (reject writes carrying a
/// smaller token than one they have seen). Long operations can `select!` on [`Lease::lost`] to stop
/// early once another holder has taken the operation over.
#[derive(Debug, Clone)]
pub struct Lease {
    key: OperationKey,
    grant: LeaseGrant,
    state: watch::Receiver<State>,
}

#[derive(Debug, Clone, Copy)]
struct State {
    expires_at: SystemTime,
    lost: bool,
}

impl Lease {
    /// The fencing token: +1 on every acquisition of this operation.
    pub fn fencing_token(&self) -> u64 {
        self.grant.token
    }

    /// Which acquisition this is (1 for the first; more after takeovers and retryable failures).
    pub fn attempt(&self) -> u32 {
        self.grant.attempt
    }

    /// The operation this lease is on.
    pub fn key(&self) -> &OperationKey {
        &self.key
    }

    /// When the lease runs out unless renewed again (updated by every renewal).
    pub fn expires_at(&self) -> SystemTime {
        self.state.borrow().expires_at
    }

    /// True once the server said the lease is lost: another holder took the operation over (or it
    /// was reconciled or settled with this token). Completing it will fail with LEASE_LOST.
    pub fn is_lost(&self) -> bool {
        self.state.borrow().lost
    }

    /// Resolves when the lease is lost; never resolves while it holds.
    pub async fn lost(&self) {
        let mut state = self.state.clone();
        if state.wait_for(|s| s.lost).await.is_err() {
            // The keep-alive has stopped without losing the lease: it will never be lost now.
            std::future::pending::<()>().await;
        }
    }
}

/// Stops the keep-alive task when dropped (the lease then runs out normally).
#[derive(Debug)]
pub struct KeepAliveGuard {
    task: JoinHandle<()>,
}

impl Client {
    /// Keeps an acquired lease alive through the server's `KeepAlive` stream, renewing to
    /// `lease_ttl` (server default when `None`), until the returned guard is dropped: for callers
    /// that drive Claim, Complete and Fail themselves (as `oncekey gateway` does) but want the same
    /// keep-alive as [`crate::Once::run`]. Drop the guard before settling.
    pub fn hold_lease(
        &self,
        key: &OperationKey,
        grant: LeaseGrant,
        lease_ttl: Option<Duration>,
    ) -> (Lease, KeepAliveGuard) {
        keep_alive(self, key, grant, lease_ttl)
    }
}

impl Drop for KeepAliveGuard {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts keeping `grant` alive, renewing to `lease_ttl` (server default when `None`).
pub(crate) fn keep_alive(
    client: &Client,
    key: &OperationKey,
    grant: LeaseGrant,
    lease_ttl: Option<Duration>,
) -> (Lease, KeepAliveGuard) {
    let (tx, rx) = watch::channel(State {
        expires_at: grant.expires_at,
        lost: false,
    });
    let ttl = lease_ttl.unwrap_or(Duration::from_secs(30));
    let task = tokio::spawn(run(
        client.clone(),
        key.clone(),
        grant.token,
        lease_ttl,
        ttl,
        tx,
    ));
    let lease = Lease {
        key: key.clone(),
        grant,
        state: rx,
    };
    (lease, KeepAliveGuard { task })
}

async fn run(
    client: Client,
    key: OperationKey,
    token: u64,
    lease_ttl: Option<Duration>,
    ttl: Duration,
    state: watch::Sender<State>,
) {
    let max_backoff = (ttl / 3).clamp(Duration::from_millis(100), Duration::from_secs(5));
    let mut backoff = Duration::from_millis(100).min(max_backoff);
    loop {
        let end = match client.keep_alive(&key, token, lease_ttl).await {
            Ok(mut stream) => loop {
                match stream.next().await {
                    Some(Ok(lease)) => {
                        backoff = Duration::from_millis(100).min(max_backoff);
                        state.send_modify(|s| s.expires_at = lease.expires_at);
                    }
                    Some(Err(e)) => break Some(e),
                    // Ended OK while we still hold it: the server is shutting down (or the record
                    // settled); reopening tells which.
                    None => break None,
                }
            },
            Err(e) => Some(e),
        };
        if let Some(e) = end {
            match e.reason() {
                Some(Reason::LeaseLost) | Some(Reason::AlreadySettled) => {
                    tracing::warn!(namespace = %key.namespace(), token, "lease lost");
                    state.send_modify(|s| s.lost = true);
                    return;
                }
                Some(Reason::KeepaliveReplaced) => {
                    // Another stream keeps this lease alive now; reopening would only replace it
                    // in turn. Not a loss: the lease holds.
                    tracing::info!(namespace = %key.namespace(), token, "keep-alive handed over to a newer stream");
                    return;
                }
                _ if !reopenable(&e) => {
                    tracing::warn!(namespace = %key.namespace(), error = %e, "keep-alive stopped");
                    return;
                }
                _ => {
                    tracing::debug!(namespace = %key.namespace(), error = %e, "keep-alive interrupted")
                }
            }
        }
        let jittered = backoff.mul_f64(0.5 + rand::random::<f64>() / 2.0);
        tokio::time::sleep(jittered).await;
        backoff = (backoff * 2).min(max_backoff);
    }
}

/// Errors after which reopening the stream may work: transport trouble, not a refusal.
fn reopenable(e: &Error) -> bool {
    e.is_transient()
        || matches!(
            e.code(),
            tonic::Code::Unknown | tonic::Code::Internal | tonic::Code::Cancelled
        )
}
