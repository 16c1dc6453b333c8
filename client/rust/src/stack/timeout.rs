//! The per-attempt timeout: an attempt that gets no answer within the client's timeout (plus the
//! time the server may hold a Claim that asked to `wait`) fails with [`Error::Timeout`], which the
//! retry layer treats as DEADLINE_EXCEEDED.

use super::{BoxFuture, Call};
use crate::error::Error;
use std::task::{Context, Poll};
use std::time::Duration;

/// The timeout layer.
#[derive(Debug, Clone, Copy)]
pub struct TimeoutLayer {
    timeout: Duration,
}

impl TimeoutLayer {
    /// Times out each attempt after `timeout` (plus a Claim's `wait`).
    pub fn new(timeout: Duration) -> Self {
        TimeoutLayer { timeout }
    }
}

impl<S> tower::Layer<S> for TimeoutLayer {
    type Service = Timeout<S>;

    fn layer(&self, inner: S) -> Timeout<S> {
        Timeout {
            inner,
            timeout: self.timeout,
        }
    }
}

/// The timeout middleware.
#[derive(Debug, Clone)]
pub struct Timeout<S> {
    inner: S,
    timeout: Duration,
}

impl<S> tower::Service<Call> for Timeout<S>
where
    S: tower::Service<Call, Error = Error>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = Error;
    type Future = BoxFuture<S::Response>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, call: Call) -> Self::Future {
        let limit = self.timeout.saturating_add(call.server_wait());
        let future = self.inner.call(call);
        Box::pin(async move {
            tokio::time::timeout(limit, future)
                .await
                .map_err(|_| Error::Timeout(limit))?
        })
    }
}
