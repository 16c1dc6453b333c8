//! Counts RPCs in flight so that shutdown can wait for exactly them: a request counts from its
//! arrival until its response body is fully sent (or dropped). Idle keep-alive connections do not
//! count, so a drain is not held up by clients that merely stay connected.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
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
}

impl InFlight {
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

/// Holds one unit of the count until dropped.
struct Guard(Arc<Counter>);

impl Guard {
    fn new(counter: &Arc<Counter>) -> Self {
        counter.active.fetch_add(1, Ordering::SeqCst);
        Guard(counter.clone())
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if self.0.active.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

impl<S> tower::Layer<S> for InFlight {
    type Service = InFlightService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        InFlightService {
            inner,
            counter: self.counter.clone(),
        }
    }
}

/// The service `InFlight` wraps around the gRPC router.
#[derive(Clone)]
pub struct InFlightService<S> {
    inner: S,
    counter: Arc<Counter>,
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
        let guard = Guard::new(&self.counter);
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            Ok(response.map(|body| {
                tonic::body::Body::new(Guarded {
                    body,
                    _guard: guard,
                })
            }))
        })
    }
}

/// A response body that keeps its request counted until it is done.
struct Guarded {
    body: tonic::body::Body,
    _guard: Guard,
}

impl http_body::Body for Guarded {
    type Data = <tonic::body::Body as http_body::Body>::Data;
    type Error = <tonic::body::Body as http_body::Body>::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}
