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
pub(crate) struct InFlight {
    counter: Arc<Counter>,
    metrics: Arc<Metrics>,
}

impl InFlight {
    /// A layer reporting to `metrics`.
    pub(crate) fn new(metrics: Arc<Metrics>) -> Self {
        Self {
            counter: Arc::default(),
            metrics,
        }
    }

    /// Resolves when no request is in flight.
    pub(crate) async fn idle(&self) {
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
    pub(crate) fn active(&self) -> usize {
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
        "/oncekey.v1.Ledger/Approve" => "Approve",
        "/oncekey.v1.Ledger/Reject" => "Reject",
        "/oncekey.v1.Ledger/Purge" => "Purge",
        "/oncekey.v1.Ledger/ListRecords" => "ListRecords",
        "/oncekey.v1.Ledger/ListDuplicateIntents" => "ListDuplicateIntents",
        "/oncekey.v1.Ledger/Rekey" => "Rekey",
        "/oncekey.v1.Ledger/EraseTenant" => "EraseTenant",
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
pub(crate) struct InFlightService<S> {
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

/// Which of tonic's own refusals a response is, told by type, not by tonic's wording: a
/// trailers-only response (its status in the headers) with INTERNAL or OUT_OF_RANGE and no
/// `grpc-status-details-bin`. Every status this server's handlers answer carries an ErrorInfo in
/// that header (`api::error`), so a bare one comes from tonic itself, before any handler ran:
/// INTERNAL for a request it could not decode (malformed protobuf, a string that is not UTF-8, a
/// unary call without its message), OUT_OF_RANGE for one over the decoding limit. tonic offers no
/// typed hook for these (its codec turns the decode error into a message string inside the
/// generated service), so this is the one place that knows; the check runs on every response and
/// costs two header lookups.
fn refusal(headers: &http::HeaderMap) -> Option<Refusal> {
    if headers.contains_key("grpc-status-details-bin") {
        return None;
    }
    match headers.get("grpc-status")?.as_bytes() {
        b"13" => Some(Refusal::Undecodable),
        b"11" => Some(Refusal::TooLarge),
        _ => None,
    }
}

/// The contract's answer to an undecodable request: INVALID_ARGUMENT with ErrorInfo and a
/// BadRequest naming the request itself (docs/api.md#errors), not an unclassified INTERNAL.
fn invalid_request() -> http::Response<tonic::body::Body> {
    let error = crate::api::error::ApiError::invalid(
        "request",
        "not a valid message of this RPC (malformed protobuf, a string field that is not UTF-8, or no message at all)",
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

    fn headers(status: tonic::Status) -> http::HeaderMap {
        let mut h = http::HeaderMap::new();
        status.add_header(&mut h).unwrap();
        h
    }

    #[test]
    fn every_ledger_rpc_has_a_label_of_its_own() {
        use prost::Message;
        let set = prost_types::FileDescriptorSet::decode(oncekey_api::FILE_DESCRIPTOR_SET).unwrap();
        let (package, ledger) = set
            .file
            .iter()
            .flat_map(|f| f.service.iter().map(move |s| (f.package(), s)))
            .find(|(_, s)| s.name() == "Ledger")
            .expect("the Ledger service");
        let methods: Vec<&str> = ledger.method.iter().map(|m| m.name()).collect();
        assert!(methods.contains(&"ListRecords"), "{methods:?}");
        for method in methods {
            let path = format!("/{package}.Ledger/{method}");
            assert_eq!(method_label(&path), method, "{path}");
        }
        assert_eq!(method_label("/oncekey.v1.Ledger/Nope"), "other");
    }

    #[test]
    fn tonics_own_refusals_are_recognised_whatever_their_wording() {
        let too_large = tonic::Status::out_of_range(
            "Error, decoded message length too large: found 2000000 bytes, the limit is: 1000 bytes",
        );
        assert_eq!(refusal(&headers(too_large)), Some(Refusal::TooLarge));
        for message in [
            "failed to decode Protobuf message: invalid wire type value: 7",
            "Missing request message.",
            "",
        ] {
            let status = tonic::Status::internal(message);
            assert_eq!(
                refusal(&headers(status)),
                Some(Refusal::Undecodable),
                "{message:?}"
            );
        }
    }

    #[test]
    fn statuses_of_this_servers_handlers_are_left_alone() {
        // Every handler error carries an ErrorInfo, whatever its code or message.
        let ours = crate::api::error::ApiError::Engine(crate::engine::EngineError::Store(
            crate::store::StoreError::Corrupt("cannot decode the stored record".into()),
        ));
        let status = tonic::Status::from(ours);
        assert_eq!(status.code(), tonic::Code::Internal);
        assert_eq!(refusal(&headers(status)), None);
        for status in [
            tonic::Status::ok(""),
            tonic::Status::not_found("service not registered"),
            tonic::Status::unimplemented(""),
        ] {
            assert_eq!(refusal(&headers(status)), None);
        }
        assert_eq!(refusal(&http::HeaderMap::new()), None);
    }
}
