//! The tower stack every unary RPC goes through, outermost first:
//! [`RetryLayer`] (exponential backoff with full jitter, `grpc-retry-pushback-ms`), the
//! [`CircuitBreakerLayer`] (fails fast after consecutive transport failures), the
//! [`TimeoutLayer`] (per attempt), and [`LedgerService`], which sends one typed request over the
//! shared HTTP/2 channel.
//!
//! Requests are typed ([`Call`]) so that a retry resends the identical message: same key, same
//! fingerprint, same lease token. Streams (KeepAlive) do not go through this stack.

mod breaker;
mod retry;
mod timeout;

pub use breaker::{BreakerPolicy, CircuitBreaker, CircuitBreakerLayer, CircuitState};
pub use retry::{RetryLayer, RetryPolicy, Retrying};
pub use timeout::{Timeout, TimeoutLayer};

use crate::credentials::LedgerRpc;
use crate::error::Error;
use oncekey_api::v1;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

/// One unary RPC with its request.
#[derive(Debug, Clone)]
pub enum Call {
    /// `Ledger.Claim`.
    Claim(v1::ClaimRequest),
    /// `Ledger.Complete`.
    Complete(v1::CompleteRequest),
    /// `Ledger.Fail`.
    Fail(v1::FailRequest),
    /// `Ledger.Renew`.
    Renew(v1::RenewRequest),
    /// `Ledger.Lookup`.
    Lookup(v1::LookupRequest),
    /// `Ledger.Approve`.
    Approve(v1::ApproveRequest),
    /// `Ledger.Reject`.
    Reject(v1::RejectRequest),
    /// `Ledger.Purge`.
    Purge(v1::PurgeRequest),
    /// `Ledger.ListRecords`.
    ListRecords(v1::ListRecordsRequest),
}

impl Call {
    /// How long the server may legitimately hold this call beyond a normal answer (Claim.wait).
    pub fn server_wait(&self) -> Duration {
        match self {
            Call::Claim(c) => c
                .wait
                .map(crate::types::duration_from_wire)
                .unwrap_or_default(),
            _ => Duration::ZERO,
        }
    }
}

/// The answer to a [`Call`], of the same RPC.
#[derive(Debug, Clone)]
pub enum Reply {
    /// `Ledger.Claim`.
    Claim(v1::ClaimResponse),
    /// `Ledger.Complete`.
    Complete(v1::CompleteResponse),
    /// `Ledger.Fail`.
    Fail(v1::FailResponse),
    /// `Ledger.Renew`.
    Renew(v1::RenewResponse),
    /// `Ledger.Lookup`.
    Lookup(v1::LookupResponse),
    /// `Ledger.Approve`.
    Approve(v1::ApproveResponse),
    /// `Ledger.Reject`.
    Reject(v1::RejectResponse),
    /// `Ledger.Purge`.
    Purge(v1::PurgeResponse),
    /// `Ledger.ListRecords`.
    ListRecords(v1::ListRecordsResponse),
}

/// Counters of what the stack did, shared by every clone of a client.
#[derive(Debug, Default)]
pub struct Counters {
    pub(crate) calls: AtomicU64,
    pub(crate) attempts: AtomicU64,
    pub(crate) retries: AtomicU64,
    pub(crate) rejected: AtomicU64,
}

impl Counters {
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// A snapshot of a client's counters (see [`crate::Client::stats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Typed unary calls made.
    pub calls: u64,
    /// Requests sent (calls plus retries, minus calls the breaker refused).
    pub attempts: u64,
    /// Retries after a transient failure.
    pub retries: u64,
    /// Attempts the open circuit breaker refused without sending.
    pub rejected: u64,
    /// The breaker's state now.
    pub circuit: CircuitState,
}

/// The innermost service: sends one [`Call`] through the generated client.
#[derive(Clone)]
pub struct LedgerService {
    rpc: LedgerRpc,
    counters: Arc<Counters>,
}

impl LedgerService {
    /// Wraps the generated client, counting each attempt in `counters`.
    pub fn new(rpc: LedgerRpc, counters: Arc<Counters>) -> Self {
        LedgerService { rpc, counters }
    }
}

/// A boxed, sendable response future.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = Result<T, Error>> + Send>>;

impl tower::Service<Call> for LedgerService {
    type Response = Reply;
    type Error = Error;
    type Future = BoxFuture<Reply>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        // The generated client waits for the channel itself.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, call: Call) -> Self::Future {
        Counters::bump(&self.counters.attempts);
        let mut rpc = self.rpc.clone();
        Box::pin(async move {
            Ok(match call {
                Call::Claim(r) => Reply::Claim(rpc.claim(r).await?.into_inner()),
                Call::Complete(r) => Reply::Complete(rpc.complete(r).await?.into_inner()),
                Call::Fail(r) => Reply::Fail(rpc.fail(r).await?.into_inner()),
                Call::Renew(r) => Reply::Renew(rpc.renew(r).await?.into_inner()),
                Call::Lookup(r) => Reply::Lookup(rpc.lookup(r).await?.into_inner()),
                Call::Approve(r) => Reply::Approve(rpc.approve(r).await?.into_inner()),
                Call::Reject(r) => Reply::Reject(rpc.reject(r).await?.into_inner()),
                Call::Purge(r) => Reply::Purge(rpc.purge(r).await?.into_inner()),
                Call::ListRecords(r) => Reply::ListRecords(rpc.list_records(r).await?.into_inner()),
            })
        })
    }
}

/// The assembled stack.
pub type Stack = retry::Retry<CircuitBreaker<Timeout<LedgerService>>>;

/// Builds the stack over `rpc` with tower's `ServiceBuilder`.
pub fn build(
    rpc: LedgerRpc,
    timeout: Duration,
    retry: RetryPolicy,
    breaker: &CircuitBreakerLayer,
    counters: Arc<Counters>,
) -> Stack {
    tower::ServiceBuilder::new()
        .layer(Retrying::layer(retry, counters.clone()))
        .layer(breaker.clone())
        .layer(TimeoutLayer::new(timeout))
        .service(LedgerService::new(rpc, counters))
}
