//! The outermost gRPC layer: counts RPCs in flight so that shutdown can wait for exactly them, and
//! records every RPC's method, status code and latency in the metrics — including those refused
//! before a handler runs (UNAUTHENTICATED). A request counts from its arrival until its response
//! body is fully sent or dropped; idle keep-alive connections do not count, so a drain is not held
//! up by clients that merely stay connected.

use crate::telemetry::metrics::Metrics;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;
use tokio::sync::Notify;

#[derive(Default)]
struct Counter {
    active: AtomicUsize,
    idle: Notify,
}

/// A tower layer counting in-flight requests; clones share the count.
#[derive(Clone, Default)]
pub struct InFlight {
    counter: Arc<Counter>,
    metrics: Arc<Metrics>,
}

impl InFlight {
    /// A layer reporting to `metrics`.
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Self {
            counter: Arc::default(),
            metrics,
        }
    }

    /// Resolves when no request is in flight.
    pub async fn idle(&self) {
        loop {
            let idle = self.counter.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if self.counter.active.load(Ordering::SeqCst) == 0 {
                return;
            }
            idle.await;
        }
    }

    /// The number of requests in flight.
    pub fn active(&self) -> usize {
        self.counter.active.load(Ordering::SeqCst)
    }
}

/// Holds one unit of the count until dropped, then records the RPC.
struct Guard {
    counter: Arc<Counter>,
    metrics: Arc<Metrics>,
    method: &'static str,
    started: Instant,
    /// The grpc-status seen in the response headers or trailers.
    code: Option<tonic::Code>,
}

impl Guard {
    fn new(layer: &InFlightService<impl Sized>, method: &'static str) -> Self {
        layer.counter.active.fetch_add(1, Ordering::SeqCst);
        Guard {
            counter: layer.counter.clone(),
            metrics: layer.metrics.clone(),
            method,
            started: Instant::now(),
            code: None,
        }
    }

    fn observe(&mut self, headers: &http::HeaderMap) {
        if let Some(status) = headers.get("grpc-status").and_then(|v| v.to_str().ok()) {
            self.code = status.parse::<i32>().ok().map(tonic::Code::from);
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        // No status at all: the client went away before the answer was complete.
        let code = self.code.unwrap_or(tonic::Code::Cancelled);
        self.metrics.rpc(self.method, code, self.started.elapsed());
        if self.counter.active.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.counter.idle.notify_waiters();
        }
    }
}

/// The metric label of a request path: known RPCs by name, anything else `other` (paths are
/// caller-chosen, so they must not become labels).
fn method_label(path: &str) -> &'static str {
    match path {
        "/oncekey.v1.Ledger/Claim" => "Claim",
        "/oncekey.v1.Ledger/Complete" => "Complete",
        "/oncekey.v1.Ledger/Fail" => "Fail",
        "/oncekey.v1.Ledger/Renew" => "Renew",
        "/oncekey.v1.Ledger/KeepAlive" => "KeepAlive",
        "/oncekey.v1.Ledger/Lookup" => "Lookup",
        "/grpc.health.v1.Health/Check" => "Health.Check",
        "/grpc.health.v1.Health/Watch" => "Health.Watch",
        p if p.starts_with("/grpc.reflection.") => "Reflection",
        _ => "other",
    }
}

impl<S> tower::Layer<S> for InFlight {
    type Service = InFlightService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        InFlightService {
            inner,
            counter: self.counter.clone(),
            metrics: self.metrics.clone(),
        }
    }
}

/// The service `InFlight` wraps around the gRPC router.
#[derive(Clone)]
pub struct InFlightService<S> {
    inner: S,
    counter: Arc<Counter>,
    metrics: Arc<Metrics>,
}

type BoxFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S, B> tower::Service<http::Request<B>> for InFlightService<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<tonic::body::Body>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let mut guard = Guard::new(self, method_label(request.uri().path()));
        let response = self.inner.call(request);
        Box::pin(async move {
            let mut response = response.await?;
            match refusal(response.headers()) {
                Some(Refusal::Undecodable) => response = invalid_request(),
                Some(Refusal::TooLarge) => response = too_large(),
                None => {}
            }
            guard.observe(response.headers());
            Ok(response.map(|body| tonic::body::Body::new(Guarded { body, guard })))
        })
    }
}

/// A request tonic refused before any handler saw it, with a bare status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    /// Not a valid message (tonic answers INTERNAL).
    Undecodable,
    /// Over the service's decoding limit (tonic answers OUT_OF_RANGE).
    TooLarge,
}

/// Which of tonic's own refusals a response (trailers-only: the status is in its headers) is.
fn refusal(headers: &http::HeaderMap) -> Option<Refusal> {
    let code = headers.get("grpc-status")?.as_bytes();
    // Only these two codes are decoded further: the check runs on every response.
    if code != b"13" && code != b"11" {
        return None;
    }
    let status = tonic::Status::from_header_map(headers)?;
    let message = status.message();
    match status.code() {
        tonic::Code::Internal if message.contains("decode") => Some(Refusal::Undecodable),
        tonic::Code::OutOfRange if message.contains("message length too large") => {
            Some(Refusal::TooLarge)
        }
        _ => None,
    }
}

/// The contract's answer to an undecodable request: INVALID_ARGUMENT with ErrorInfo and a
/// BadRequest naming the request itself (CONTRACT §7), not an unclassified INTERNAL.
fn invalid_request() -> http::Response<tonic::body::Body> {
    let error = crate::api::error::ApiError::invalid(
        "request",
        "not a valid message of this RPC (malformed protobuf or a string field that is not UTF-8)",
    );
    tonic::Status::from(error).into_http()
}

/// The contract's answer to a message over the transport's size limit: INVALID_ARGUMENT with
/// ErrorInfo `TOO_LARGE` and a BadRequest naming the request, instead of a bare OUT_OF_RANGE.
fn too_large() -> http::Response<tonic::body::Body> {
    let error = crate::api::error::ApiError::too_large(
        "request",
        "the message is larger than any valid request of this server (its fields have size limits)",
    );
    tonic::Status::from(error).into_http()
}

/// A response body that keeps its request counted until it is done, reading grpc-status from
/// its trailers.
struct Guarded {
    body: tonic::body::Body,
    guard: Guard,
}

impl http_body::Body for Guarded {
    type Data = <tonic::body::Body as http_body::Body>::Data;
    type Error = <tonic::body::Body as http_body::Body>::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let frame = Pin::new(&mut self.body).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &frame {
            if let Some(trailers) = frame.trailers_ref() {
                let trailers = trailers.clone();
                self.guard.observe(&trailers);
            }
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(status: &str, message: &str) -> http::HeaderMap {
        let mut h = http::HeaderMap::new();
        h.insert("grpc-status", status.parse().unwrap());
        h.insert("grpc-message", message.parse().unwrap());
        h
    }

    #[test]
    fn tonics_own_refusals_are_recognised() {
        let too_large = tonic::Status::out_of_range(
            "Error, decoded message length too large: found 2000000 bytes, the limit is: 1000 bytes",
        );
        let mut h = http::HeaderMap::new();
        too_large.add_header(&mut h).unwrap();
        assert_eq!(refusal(&h), Some(Refusal::TooLarge));
        assert_eq!(
            refusal(&headers("13", "failed to decode Protobuf message")),
            Some(Refusal::Undecodable)
        );
        assert_eq!(refusal(&headers("11", "something else")), None);
        assert_eq!(refusal(&headers("0", "")), None);
        assert_eq!(
            refusal(&headers("11", "message%20length%20too%20large")),
            Some(Refusal::TooLarge)
        );
        assert_eq!(refusal(&http::HeaderMap::new()), None);
    }
}
