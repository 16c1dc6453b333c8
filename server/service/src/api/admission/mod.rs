//! Per-tenant admission: one tenant's flood must not slow the others. A tower layer between the
//! authenticating interceptor and the Ledger service refuses a tenant's Claim, Lookup and
//! ListRecords once the tenant is over its request rate (a token bucket) or has too many RPCs in
//! progress (Claims held by `wait` included), before the request is even decoded. The answer is
//! RESOURCE_EXHAUSTED with reason `RATE_LIMITED`, a `google.rpc.RetryInfo` and the
//! `grpc-retry-pushback-ms` trailer, which the client libraries honour.
//!
//! Complete, Fail, Renew, KeepAlive — every other RPC — are never refused here: refusing a
//! settlement could lose an outcome and let a takeover repeat the effect. Unary ones still count
//! as in progress. Limits come from the `--tenant-*` flags and the `--limits-file` overrides
//! (`policy`), reloaded on SIGHUP; the per-tenant state lives in `table`.

mod bucket;
mod intent;
mod policy;
mod table;

pub use intent::IntentRules;
pub use policy::DEFAULT_TENANT_HELD_CLAIMS;
pub use policy::{AdmissionConfig, LimitsFileError, Policy, TenantLimits};
pub use table::{Kind, Permit};
use table::{Refusal, Table};

use super::auth::Tenant;
use super::error::ApiError;
use super::guard::{Guard, GuardLayer, Guarded};
use crate::store::ConfigError;
use crate::telemetry::metrics::Metrics;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// The RPCs admission may refuse: new work and reads. A new read-only or work-creating RPC is
/// one more line here.
const ADMITTED: &[&str] = &[
    "/oncekey.v1.Ledger/Claim",
    "/oncekey.v1.Ledger/Lookup",
    "/oncekey.v1.Ledger/ListRecords",
    "/oncekey.v1.Ledger/ListDuplicateIntents",
];

/// Streaming RPCs: neither refused nor counted as in progress (a stream may stay open for hours).
const STREAMS: &[&str] = &["/oncekey.v1.Ledger/KeepAlive"];

/// When a request refused for too many RPCs in progress should come back: no one knows when an
/// RPC ends, so a short delay, spread so that refused callers do not all return at once.
fn inflight_retry() -> Duration {
    Duration::from_millis(rand::random_range(50..150))
}

/// How a request path is treated.
pub fn kind(path: &str) -> Kind {
    if ADMITTED.contains(&path) {
        Kind::Admitted
    } else if STREAMS.contains(&path) {
        Kind::Free
    } else {
        Kind::Counted
    }
}

struct Inner {
    policy: RwLock<Arc<Policy>>,
    table: Arc<Table>,
    args: AdmissionConfig,
    metrics: Arc<Metrics>,
}

/// The admission state shared by every connection: the limits and every limited tenant's state.
/// Cheap to clone; it is also the tower layer (`Admission::layer`).
#[derive(Clone)]
pub struct Admission {
    inner: Arc<Inner>,
}

impl Admission {
    /// Admission as the settings say, reading the limits file now; refusals are counted in `metrics`.
    pub fn from_config(args: &AdmissionConfig, metrics: Arc<Metrics>) -> Result<Self, ConfigError> {
        Ok(Self::new(args.policy()?, args.clone(), metrics))
    }

    /// Admission with no limits (every request passes).
    pub fn off() -> Self {
        let args = AdmissionConfig::default();
        Self::new(
            Policy::new(TenantLimits::OFF, Default::default()),
            args,
            Arc::default(),
        )
    }

    fn new(policy: Policy, args: AdmissionConfig, metrics: Arc<Metrics>) -> Self {
        Self {
            inner: Arc::new(Inner {
                policy: RwLock::new(Arc::new(policy)),
                table: Arc::default(),
                args,
                metrics,
            }),
        }
    }

    /// The limits in force.
    pub fn policy(&self) -> Arc<Policy> {
        self.inner
            .policy
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Re-reads the limits file; on error the limits in force stay. Returns how many tenants it
    /// names.
    pub fn reload(&self) -> Result<usize, LimitsFileError> {
        let Some(path) = &self.inner.args.limits_file else {
            return Ok(0);
        };
        let defaults = self.policy_defaults();
        // The flag's intent rules were checked at startup; the file's replace them per tenant.
        let rules = IntentRules::from_flags(&self.inner.args.intent_guard).unwrap_or_default();
        let policy = Policy::from_file(defaults, path)?.with_intent_defaults(rules);
        let n = policy.overrides();
        *self.inner.policy.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(policy);
        Ok(n)
    }

    fn policy_defaults(&self) -> TenantLimits {
        self.inner.args.defaults()
    }

    /// The limits file, if there is one.
    pub fn limits_file(&self) -> Option<&PathBuf> {
        self.inner.args.limits_file.as_ref()
    }

    /// With a limits file: re-reads it on every SIGHUP (in a task of its own), logging the
    /// outcome; a bad file keeps the limits in force. The handler is in place when this returns,
    /// so a SIGHUP right after startup cannot terminate the process.
    pub fn reload_on_sighup(&self) -> std::io::Result<()> {
        use tokio::signal::unix::{signal, SignalKind};
        if self.limits_file().is_none() {
            return Ok(());
        }
        let mut hup = signal(SignalKind::hangup())?;
        let admission = self.clone();
        tokio::spawn(async move {
            while hup.recv().await.is_some() {
                match admission.reload() {
                    Ok(n) => tracing::info!(tenants = n, "limits file reloaded"),
                    Err(e) => tracing::error!(
                        error = %e,
                        "limits file reload failed; keeping the previous limits"
                    ),
                }
            }
        });
        Ok(())
    }

    /// Admits or refuses one request of `kind` from `tenant`, counting refusals.
    pub fn admit(&self, tenant: &str, kind: Kind) -> Result<Permit, ApiError> {
        let policy = self.policy();
        if policy.is_off() {
            return Ok(Permit::none());
        }
        self.inner
            .table
            .admit(&policy, tenant, kind, Instant::now())
            .map_err(|refusal| {
                let (limit, retry_after) = match refusal {
                    Refusal::Rate(wait) => ("rate", wait),
                    Refusal::Inflight => ("inflight", inflight_retry()),
                };
                self.inner.metrics.admission_refused(limit);
                tracing::debug!(tenant = %tenant, limit, "request refused by admission");
                ApiError::RateLimited { limit, retry_after }
            })
    }

    /// Tenants with admission state now (for tests and diagnostics).
    pub fn tenants_tracked(&self) -> usize {
        self.inner.table.tenants()
    }

    /// This admission as a tower layer.
    pub fn layer(&self) -> AdmissionLayer {
        GuardLayer(self.clone())
    }
}

/// The tower layer of [`Admission`].
pub type AdmissionLayer = GuardLayer<Admission>;

/// The Ledger service behind admission.
pub type AdmissionService<S> = Guarded<S, Admission>;

impl Guard for Admission {
    type Permit = Permit;

    fn check<B>(&self, request: &http::Request<B>) -> Result<Permit, ApiError> {
        // The interceptor in front put the caller's tenant here (or refused the request).
        match request.extensions().get::<Tenant>() {
            Some(tenant) => self.admit(&tenant.0, kind(request.uri().path())),
            None => Ok(Permit::none()),
        }
    }

    fn respond(
        permit: Permit,
        response: http::Response<tonic::body::Body>,
    ) -> http::Response<tonic::body::Body> {
        // An answer without a body left to send (e.g. an error) is complete now.
        if !permit.counts() || http_body::Body::is_end_stream(response.body()) {
            return response;
        }
        response.map(|body| {
            tonic::body::Body::new(Held {
                body,
                _permit: permit,
            })
        })
    }
}

/// A response body that keeps its RPC counted as in progress until it is sent or dropped (a
/// Claim held by `wait` is in progress until its answer goes out).
struct Held {
    body: tonic::body::Body,
    _permit: Permit,
}

impl http_body::Body for Held {
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

#[cfg(test)]
mod tests;
