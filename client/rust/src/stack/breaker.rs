//! A circuit breaker: after `failure_threshold` consecutive transient failures (the server or the
//! network is down) it refuses calls at once with [`Error::CircuitOpen`] for `cool_down`, then lets
//! one probe through (half-open): its success closes the circuit, its failure opens it again.
//!
//! Answers that prove the server is up (any success, a non-transient error such as
//! FAILED_PRECONDITION, or RESOURCE_EXHAUSTED: the server asking this caller to slow down) reset
//! the count. One breaker is shared by every clone of a client.

use super::{BoxFuture, Counters};
use crate::error::Error;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// When the breaker opens and how long it stays open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerPolicy {
    /// Consecutive transient failures that open the circuit (default 10).
    pub failure_threshold: u32,
    /// How long an open circuit refuses calls before letting one probe through (default 5 s).
    pub cool_down: Duration,
}

impl Default for BreakerPolicy {
    fn default() -> Self {
        BreakerPolicy {
            failure_threshold: 10,
            cool_down: Duration::from_secs(5),
        }
    }
}

impl BreakerPolicy {
    /// A breaker that never opens.
    pub fn disabled() -> Self {
        BreakerPolicy {
            failure_threshold: u32::MAX,
            ..Default::default()
        }
    }
}

/// The state of a circuit breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CircuitState {
    /// Calls go through.
    #[default]
    Closed,
    /// Calls are refused until the cool-down ends.
    Open,
    /// One probe is in flight; other calls are refused until it answers.
    HalfOpen,
}

#[derive(Debug)]
enum State {
    Closed { failures: u32 },
    Open { until: Instant },
    HalfOpen,
}

#[derive(Debug)]
struct Shared {
    policy: BreakerPolicy,
    state: Mutex<State>,
    counters: Arc<Counters>,
}

/// The breaker layer; clones share one breaker.
#[derive(Debug, Clone)]
pub struct CircuitBreakerLayer {
    shared: Arc<Shared>,
}

impl CircuitBreakerLayer {
    /// A closed breaker with `policy`, counting refused calls in `counters`.
    pub fn new(policy: BreakerPolicy, counters: Arc<Counters>) -> Self {
        CircuitBreakerLayer {
            shared: Arc::new(Shared {
                policy,
                state: Mutex::new(State::Closed { failures: 0 }),
                counters,
            }),
        }
    }

    /// The breaker's state now.
    pub fn state(&self) -> CircuitState {
        match *self.shared.lock() {
            State::Closed { .. } => CircuitState::Closed,
            State::Open { until } if Instant::now() < until => CircuitState::Open,
            // The cool-down is over: the next call will probe.
            State::Open { .. } | State::HalfOpen => CircuitState::HalfOpen,
        }
    }
}

impl<S> tower::Layer<S> for CircuitBreakerLayer {
    type Service = CircuitBreaker<S>;

    fn layer(&self, inner: S) -> CircuitBreaker<S> {
        CircuitBreaker {
            inner,
            shared: self.shared.clone(),
        }
    }
}

/// The breaker middleware.
#[derive(Debug, Clone)]
pub struct CircuitBreaker<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Admits a call (`Ok(is_probe)`) or refuses it with the time left until the next probe.
    fn admit(&self) -> Result<bool, Duration> {
        let mut state = self.lock();
        match *state {
            State::Closed { .. } => Ok(false),
            State::Open { until } => {
                let now = Instant::now();
                if now < until {
                    Err(until - now)
                } else {
                    *state = State::HalfOpen;
                    Ok(true)
                }
            }
            State::HalfOpen => Err(Duration::ZERO),
        }
    }

    fn record(&self, failed: bool) {
        let mut state = self.lock();
        let open = State::Open {
            until: Instant::now() + self.policy.cool_down,
        };
        *state = match (&*state, failed) {
            (_, false) => State::Closed { failures: 0 },
            (State::Closed { failures }, true) => {
                let failures = failures.saturating_add(1);
                if failures >= self.policy.failure_threshold {
                    tracing::warn!(failures, "circuit breaker open");
                    open
                } else {
                    State::Closed { failures }
                }
            }
            (State::HalfOpen, true) | (State::Open { .. }, true) => open,
        };
    }
}

/// Gives the probe slot back if a probe is dropped before it answers.
struct ProbeGuard {
    shared: Option<Arc<Shared>>,
}

impl Drop for ProbeGuard {
    fn drop(&mut self) {
        if let Some(shared) = self.shared.take() {
            let mut state = shared.lock();
            if let State::HalfOpen = *state {
                *state = State::Open {
                    until: Instant::now(),
                };
            }
        }
    }
}

impl<S, Req> tower::Service<Req> for CircuitBreaker<S>
where
    S: tower::Service<Req, Error = Error>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
{
    type Response = S::Response;
    type Error = Error;
    type Future = BoxFuture<S::Response>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let probe = match self.shared.admit() {
            Ok(probe) => probe,
            Err(retry_in) => {
                Counters::bump(&self.shared.counters.rejected);
                return Box::pin(std::future::ready(Err(Error::CircuitOpen(retry_in))));
            }
        };
        let future = self.inner.call(req);
        let shared = self.shared.clone();
        let guard = ProbeGuard {
            shared: probe.then(|| shared.clone()),
        };
        Box::pin(async move {
            let mut guard = guard;
            let result = future.await;
            guard.shared = None;
            shared.record(matches!(&result, Err(e) if is_outage(e)));
            result
        })
    }
}

/// Whether `e` says the server is down or unreachable. A RESOURCE_EXHAUSTED answer (e.g. a
/// tenant over its rate limit) is transient, so it is retried after the pushback, but the server
/// sent it: opening the circuit would turn "slow down" into failing every call for the cool-down.
fn is_outage(e: &Error) -> bool {
    e.is_transient() && !matches!(e.status(), Some(s) if s.code() == tonic::Code::ResourceExhausted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    use tower::ServiceExt;

    #[derive(Clone)]
    struct Switch {
        up: Arc<AtomicBool>,
        calls: Arc<AtomicU32>,
    }

    impl tower::Service<()> for Switch {
        type Response = ();
        type Error = Error;
        type Future = std::future::Ready<Result<(), Error>>;
        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Error>> {
            Poll::Ready(Ok(()))
        }
        fn call(&mut self, _: ()) -> Self::Future {
            self.calls.fetch_add(1, Ordering::SeqCst);
            std::future::ready(if self.up.load(Ordering::SeqCst) {
                Ok(())
            } else {
                Err(tonic::Status::unavailable("down").into())
            })
        }
    }

    #[tokio::test]
    async fn opens_after_consecutive_failures_and_half_opens_after_cool_down() {
        let layer = CircuitBreakerLayer::new(
            BreakerPolicy {
                failure_threshold: 3,
                cool_down: Duration::from_millis(200),
            },
            Arc::default(),
        );
        let switch = Switch {
            up: Arc::new(AtomicBool::new(false)),
            calls: Arc::default(),
        };
        let svc = tower::ServiceBuilder::new()
            .layer(layer.clone())
            .service(switch.clone());
        for _ in 0..3 {
            let e = svc.clone().oneshot(()).await.unwrap_err();
            assert_eq!(e.code(), tonic::Code::Unavailable);
        }
        assert_eq!(layer.state(), CircuitState::Open);
        // Open: fails fast without calling.
        let e = svc.clone().oneshot(()).await.unwrap_err();
        assert!(matches!(e, Error::CircuitOpen(_)), "{e:?}");
        assert_eq!(switch.calls.load(Ordering::SeqCst), 3);

        // After the cool-down one probe goes through; it fails, so the circuit opens again.
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert_eq!(layer.state(), CircuitState::HalfOpen);
        assert!(svc.clone().oneshot(()).await.is_err());
        assert_eq!(switch.calls.load(Ordering::SeqCst), 4);
        assert!(matches!(
            svc.clone().oneshot(()).await,
            Err(Error::CircuitOpen(_))
        ));

        // The server is back: the next probe closes the circuit.
        switch.up.store(true, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(250)).await;
        svc.clone().oneshot(()).await.unwrap();
        assert_eq!(layer.state(), CircuitState::Closed);
        svc.clone().oneshot(()).await.unwrap();
    }

    #[tokio::test]
    async fn permanent_errors_prove_the_server_is_up() {
        let layer = CircuitBreakerLayer::new(
            BreakerPolicy {
                failure_threshold: 2,
                cool_down: Duration::from_secs(60),
            },
            Arc::default(),
        );
        layer.shared.record(true);
        layer.shared.record(false);
        layer.shared.record(true);
        assert_eq!(layer.state(), CircuitState::Closed);
        layer.shared.record(true);
        assert_eq!(layer.state(), CircuitState::Open);
    }

    #[tokio::test]
    async fn rate_limiting_is_not_an_outage() {
        let layer = CircuitBreakerLayer::new(
            BreakerPolicy {
                failure_threshold: 2,
                cool_down: Duration::from_secs(60),
            },
            Arc::default(),
        );
        let limited = tower::service_fn(|()| async {
            Err::<(), Error>(tonic::Status::resource_exhausted("slow down").into())
        });
        let svc = tower::ServiceBuilder::new()
            .layer(layer.clone())
            .service(limited);
        for _ in 0..10 {
            let e = svc.clone().oneshot(()).await.unwrap_err();
            assert_eq!(e.code(), tonic::Code::ResourceExhausted);
        }
        assert_eq!(layer.state(), CircuitState::Closed);
    }
}
