//! Retries a transient failure by resending the identical request, after an exponential backoff
//! with full jitter, or after exactly the delay the server asked for in `grpc-retry-pushback-ms`
//! (gRFC A6; a negative pushback stops retrying).
//!
//! Only [`Error::is_transient`] failures are retried: never INVALID_ARGUMENT, UNAUTHENTICATED,
//! PERMISSION_DENIED, FAILED_PRECONDITION, nor a call the circuit breaker refused.

use super::Counters;
use crate::error::Error;
use rand::Rng;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// How transient failures are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in total, the first included (default 5); 1 disables retries.
    pub max_attempts: u32,
    /// The backoff ceiling before the first retry (default 500 ms); it doubles on each retry.
    pub initial_backoff: Duration,
    /// The largest backoff ceiling (default 15 s).
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 5,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(15),
        }
    }
}

impl RetryPolicy {
    /// No retries: every call is sent once.
    pub fn never() -> Self {
        RetryPolicy {
            max_attempts: 1,
            ..Default::default()
        }
    }

    /// The backoff ceiling before retry number `retry` (1-based): `initial * 2^(retry-1)`, capped.
    pub fn ceiling(&self, retry: u32) -> Duration {
        let factor = 2u32.saturating_pow(retry.saturating_sub(1).min(31));
        self.initial_backoff
            .saturating_mul(factor)
            .min(self.max_backoff)
    }

    /// A full-jitter backoff before retry number `retry`: uniform in `[0, ceiling(retry)]`.
    pub fn backoff(&self, retry: u32) -> Duration {
        let ceiling = self.ceiling(retry);
        let nanos = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(rand::rng().random_range(0..=nanos))
    }
}

/// The tower retry policy of one call: [`RetryPolicy`] plus how many attempts it has made.
#[derive(Debug, Clone)]
pub struct Retrying {
    policy: RetryPolicy,
    attempts: u32,
    counters: Arc<Counters>,
}

/// The retry middleware.
pub type Retry<S> = tower::retry::Retry<Retrying, S>;

/// The retry layer.
pub type RetryLayer = tower::retry::RetryLayer<Retrying>;

impl Retrying {
    /// A layer retrying with `policy`, counting retries in `counters`.
    pub fn layer(policy: RetryPolicy, counters: Arc<Counters>) -> RetryLayer {
        tower::retry::RetryLayer::new(Retrying {
            policy,
            attempts: 1,
            counters,
        })
    }

    /// How long to wait before resending after `error`, or `None` to give up.
    fn delay(&self, error: &Error) -> Option<Duration> {
        if !error.is_transient() || self.attempts >= self.policy.max_attempts {
            return None;
        }
        match error.pushback() {
            Some(pushback) => pushback,
            None => Some(self.policy.backoff(self.attempts)),
        }
    }
}

impl<Req: Clone, Res> tower::retry::Policy<Req, Res, Error> for Retrying {
    type Future = Pin<Box<dyn Future<Output = ()> + Send>>;

    fn retry(&mut self, _req: &mut Req, result: &mut Result<Res, Error>) -> Option<Self::Future> {
        let error = result.as_ref().err()?;
        let delay = self.delay(error)?;
        self.attempts += 1;
        Counters::bump(&self.counters.retries);
        tracing::debug!(attempt = self.attempts, delay_ms = delay.as_millis() as u64, error = %error, "retrying");
        Some(Box::pin(tokio::time::sleep(delay)))
    }

    fn clone_request(&mut self, req: &Req) -> Option<Req> {
        Some(req.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use tower::{Service, ServiceExt};

    /// Fails with `error()` the first `failures` times, then answers the request.
    #[derive(Clone)]
    struct Flaky {
        calls: Arc<AtomicU32>,
        failures: u32,
        error: fn() -> tonic::Status,
    }

    impl Service<&'static str> for Flaky {
        type Response = &'static str;
        type Error = Error;
        type Future = std::future::Ready<Result<&'static str, Error>>;
        fn poll_ready(
            &mut self,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Result<(), Error>> {
            std::task::Poll::Ready(Ok(()))
        }
        fn call(&mut self, req: &'static str) -> Self::Future {
            let n = self.calls.fetch_add(1, Ordering::SeqCst);
            std::future::ready(if n < self.failures {
                Err((self.error)().into())
            } else {
                Ok(req)
            })
        }
    }

    fn fast() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 5,
            initial_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(4),
        }
    }

    async fn run(
        failures: u32,
        error: fn() -> tonic::Status,
    ) -> (Result<&'static str, Error>, u32) {
        let calls = Arc::new(AtomicU32::new(0));
        let svc = tower::ServiceBuilder::new()
            .layer(Retrying::layer(fast(), Arc::default()))
            .service(Flaky {
                calls: calls.clone(),
                failures,
                error,
            });
        let result = svc.oneshot("same request").await;
        (result, calls.load(Ordering::SeqCst))
    }

    #[tokio::test]
    async fn retries_transient_failures_with_the_identical_request() {
        let (result, calls) = run(3, || tonic::Status::unavailable("down")).await;
        assert_eq!((result.unwrap(), calls), ("same request", 4));
        let (result, calls) = run(1, || tonic::Status::resource_exhausted("busy")).await;
        assert_eq!((result.unwrap(), calls), ("same request", 2));
        let (result, calls) = run(1, || tonic::Status::deadline_exceeded("slow")).await;
        assert_eq!((result.unwrap(), calls), ("same request", 2));
    }

    #[tokio::test]
    async fn gives_up_after_max_attempts() {
        let (result, calls) = run(100, || tonic::Status::unavailable("down")).await;
        assert_eq!(result.unwrap_err().code(), tonic::Code::Unavailable);
        assert_eq!(calls, 5);
    }

    #[tokio::test]
    async fn never_retries_permanent_failures() {
        for error in [
            (|| tonic::Status::invalid_argument("x")) as fn() -> tonic::Status,
            || tonic::Status::unauthenticated("x"),
            || tonic::Status::permission_denied("x"),
            || tonic::Status::failed_precondition("x"),
        ] {
            let (result, calls) = run(100, error).await;
            assert!(result.is_err());
            assert_eq!(calls, 1);
        }
    }

    #[tokio::test]
    async fn honors_pushback() {
        fn pushed(ms: &'static str) -> tonic::Status {
            let mut s = tonic::Status::unavailable("busy");
            s.metadata_mut()
                .insert(crate::error::RETRY_PUSHBACK_HEADER, ms.parse().unwrap());
            s
        }
        // A negative pushback: do not retry.
        let (result, calls) = run(100, || pushed("-1")).await;
        assert!(result.is_err());
        assert_eq!(calls, 1);
        // A positive one: wait exactly that long (far longer than the 4 ms backoff ceiling).
        let started = std::time::Instant::now();
        let (result, calls) = run(1, || pushed("300")).await;
        assert_eq!((result.unwrap(), calls), ("same request", 2));
        assert!(started.elapsed() >= Duration::from_millis(300));
    }

    #[test]
    fn backoff_is_exponential_full_jitter_and_capped() {
        let p = RetryPolicy::default();
        assert_eq!(p.ceiling(1), Duration::from_millis(500));
        assert_eq!(p.ceiling(2), Duration::from_secs(1));
        assert_eq!(p.ceiling(6), Duration::from_secs(15));
        assert_eq!(p.ceiling(60), Duration::from_secs(15));
        for retry in 1..10 {
            assert!(p.backoff(retry) <= p.ceiling(retry));
        }
        let spread: std::collections::HashSet<_> = (0..20).map(|_| p.backoff(3)).collect();
        assert!(spread.len() > 1, "jittered");
    }
}
