//! Prometheus metrics served on the admin port's `/metrics`: RPCs by method and code, Claim outcomes
//! by tenant and namespace (the dedup-hit rate is COMPLETED+FAILED+IN_PROGRESS over all Claims),
//! lease takeovers and losses, open keep-alive streams, store latency and conditional-write
//! conflicts, records swept.
//!
//! Label cardinality is bounded: keys are never labels, and at most `max_series` distinct
//! (tenant, namespace) pairs get their own series; the rest share `_other`.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::collections::HashMap;
use std::sync::{OnceLock, RwLock};
use std::time::Duration;

/// The label for (tenant, namespace) pairs past the cap.
pub const OTHER: &str = "_other";

/// Labels of an RPC counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RpcLabels {
    /// The RPC, e.g. `Claim`.
    pub method: &'static str,
    /// The gRPC status code name, e.g. `OK` or `FAILED_PRECONDITION`.
    pub code: &'static str,
}

/// Labels of an RPC latency histogram.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MethodLabels {
    /// The RPC.
    pub method: &'static str,
}

/// A Claim outcome as a label value.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types, clippy::upper_case_acronyms)]
pub enum Outcome {
    /// Acquired.
    ACQUIRED,
    /// Replayed a result.
    COMPLETED,
    /// Replayed a final error.
    FAILED,
    /// Someone else holds it.
    IN_PROGRESS,
    /// At-most-once outcome unknown.
    NEEDS_RECONCILIATION,
}

/// Labels of the Claim outcome counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClaimLabels {
    /// Tenant (or `_other`).
    pub tenant: String,
    /// Namespace (or `_other`).
    pub namespace: String,
    /// What the Claim answered.
    pub outcome: Outcome,
}

/// Labels of store metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StoreLabels {
    /// `get`, `insert`, `replace`, `delete` or `sweep`.
    pub op: &'static str,
}

/// Every Oncekey metric, registered once.
pub struct Metrics {
    registry: Registry,
    rpcs: Family<RpcLabels, Counter>,
    rpc_seconds: Family<MethodLabels, Histogram>,
    claims: Family<ClaimLabels, Counter>,
    takeovers: Counter,
    leases_lost: Counter,
    keepalive_open: Gauge,
    store_seconds: Family<StoreLabels, Histogram>,
    conflicts: Family<StoreLabels, Counter>,
    swept: Counter,
    reload: crate::reload::ReloadMetrics,
    /// tenant → namespace → the Claim counters of that pair, one per outcome once seen: the hot
    /// path finds its counter without building (allocating) a label set.
    series: RwLock<HashMap<String, HashMap<String, PairCounters>>>,
    max_series: usize,
}

/// The Claim counters of one (tenant, namespace) pair, indexed by `Outcome as usize`.
type PairCounters = [OnceLock<Counter>; 5];

fn latency_histogram() -> Histogram {
    // 50 µs .. ~1.6 s
    Histogram::new(exponential_buckets(0.000_05, 2.0, 16))
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new(Self::DEFAULT_MAX_SERIES)
    }
}

impl Metrics {
    /// How many (tenant, namespace) label pairs get their own series by default.
    pub const DEFAULT_MAX_SERIES: usize = 200;

    /// A registry with every metric; at most `max_series` (tenant, namespace) label pairs.
    pub fn new(max_series: usize) -> Self {
        Self::with_store(max_series, None)
    }

    /// `new`, plus the store's own metrics (`Store::collector`).
    pub fn with_store(max_series: usize, store: Option<Box<dyn Collector>>) -> Self {
        // The process metrics keep their standard names; Oncekey's own are prefixed.
        let mut root = Registry::default();
        root.register_collector(Box::new(super::process::ProcessCollector));
        let registry = root.sub_registry_with_prefix("oncekey");
        if let Some(store) = store {
            registry.register_collector(store);
        }
        let rpcs = Family::<RpcLabels, Counter>::default();
        registry.register(
            "rpc_requests",
            "gRPC requests by method and status code",
            rpcs.clone(),
        );
        let rpc_seconds = Family::<MethodLabels, Histogram>::new_with_constructor(
            latency_histogram as fn() -> Histogram,
        );
        registry.register(
            "rpc_duration_seconds",
            "gRPC request latency by method",
            rpc_seconds.clone(),
        );
        let claims = Family::<ClaimLabels, Counter>::default();
        registry.register(
            "claims",
            "Claim answers by tenant, namespace and outcome",
            claims.clone(),
        );
        let takeovers = Counter::default();
        registry.register(
            "lease_takeovers",
            "expired at-least-once leases taken over by a new holder",
            takeovers.clone(),
        );
        let leases_lost = Counter::default();
        registry.register(
            "leases_lost",
            "Complete/Fail/Renew refused with LEASE_LOST",
            leases_lost.clone(),
        );
        let keepalive_open = Gauge::default();
        registry.register(
            "keepalive_streams_open",
            "KeepAlive streams open now",
            keepalive_open.clone(),
        );
        let store_seconds = Family::<StoreLabels, Histogram>::new_with_constructor(
            latency_histogram as fn() -> Histogram,
        );
        registry.register(
            "store_operation_duration_seconds",
            "store operation latency",
            store_seconds.clone(),
        );
        let conflicts = Family::<StoreLabels, Counter>::default();
        registry.register(
            "store_cas_conflicts",
            "conditional writes refused because the record changed",
            conflicts.clone(),
        );
        let swept = Counter::default();
        registry.register(
            "records_swept",
            "expired records removed by the sweeper",
            swept.clone(),
        );
        let reload = crate::reload::ReloadMetrics::default();
        reload.register(registry);
        Self {
            registry: root,
            rpcs,
            rpc_seconds,
            claims,
            takeovers,
            leases_lost,
            keepalive_open,
            store_seconds,
            conflicts,
            swept,
            reload,
            series: RwLock::new(HashMap::new()),
            max_series,
        }
    }

    /// The tokens-file and TLS reload metrics.
    pub fn reload(&self) -> &crate::reload::ReloadMetrics {
        &self.reload
    }

    /// The Prometheus text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// One finished RPC.
    pub fn rpc(&self, method: &'static str, code: tonic::Code, elapsed: Duration) {
        self.rpcs
            .get_or_create(&RpcLabels {
                method,
                code: code_name(code),
            })
            .inc();
        self.rpc_seconds
            .get_or_create(&MethodLabels { method })
            .observe(elapsed.as_secs_f64());
    }

    /// One Claim answer.
    pub fn claim(&self, tenant: &str, namespace: &str, outcome: Outcome) {
        let series = self.series.read().unwrap_or_else(|e| e.into_inner());
        let pair = series.get(tenant).and_then(|n| n.get(namespace));
        if let Some(counter) = pair.and_then(|c| c[outcome as usize].get()) {
            counter.inc();
            return;
        }
        drop(series);
        self.claim_counter(tenant, namespace, outcome).inc();
    }

    /// The counter of a Claim answer, registered on first use; pairs past the cap share `_other`.
    fn claim_counter(&self, tenant: &str, namespace: &str, outcome: Outcome) -> Counter {
        let mut series = self.series.write().unwrap_or_else(|e| e.into_inner());
        let known = series
            .get(tenant)
            .is_some_and(|n| n.contains_key(namespace));
        let pairs: usize = series.values().map(HashMap::len).sum();
        if !known && pairs >= self.max_series {
            return self
                .claims
                .get_or_create(&ClaimLabels {
                    tenant: OTHER.to_owned(),
                    namespace: OTHER.to_owned(),
                    outcome,
                })
                .clone();
        }
        let pair = series
            .entry(tenant.to_owned())
            .or_default()
            .entry(namespace.to_owned())
            .or_default();
        pair[outcome as usize]
            .get_or_init(|| {
                self.claims
                    .get_or_create(&ClaimLabels {
                        tenant: tenant.to_owned(),
                        namespace: namespace.to_owned(),
                        outcome,
                    })
                    .clone()
            })
            .clone()
    }

    /// A lease taken over after it expired.
    pub fn takeover(&self) {
        self.takeovers.inc();
    }

    /// A request refused with LEASE_LOST.
    pub fn lease_lost(&self) {
        self.leases_lost.inc();
    }

    /// A keep-alive stream opened (+1) or closed (-1).
    pub fn keepalive(&self, delta: i64) {
        self.keepalive_open.inc_by(delta);
    }

    /// One store operation.
    pub fn store_op(&self, op: &'static str, elapsed: Duration) {
        self.store_seconds
            .get_or_create(&StoreLabels { op })
            .observe(elapsed.as_secs_f64());
    }

    /// A conditional write refused.
    pub fn conflict(&self, op: &'static str) {
        self.conflicts.get_or_create(&StoreLabels { op }).inc();
    }

    /// Records removed by the sweeper.
    pub fn swept(&self, n: usize) {
        self.swept.inc_by(n as u64);
    }
}

/// The canonical upper-snake name of a gRPC code.
pub fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code as C;
    match code {
        C::Ok => "OK",
        C::Cancelled => "CANCELLED",
        C::Unknown => "UNKNOWN",
        C::InvalidArgument => "INVALID_ARGUMENT",
        C::DeadlineExceeded => "DEADLINE_EXCEEDED",
        C::NotFound => "NOT_FOUND",
        C::AlreadyExists => "ALREADY_EXISTS",
        C::PermissionDenied => "PERMISSION_DENIED",
        C::ResourceExhausted => "RESOURCE_EXHAUSTED",
        C::FailedPrecondition => "FAILED_PRECONDITION",
        C::Aborted => "ABORTED",
        C::OutOfRange => "OUT_OF_RANGE",
        C::Unimplemented => "UNIMPLEMENTED",
        C::Internal => "INTERNAL",
        C::Unavailable => "UNAVAILABLE",
        C::DataLoss => "DATA_LOSS",
        C::Unauthenticated => "UNAUTHENTICATED",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_past_the_cap_share_other() {
        let m = Metrics::new(2);
        m.claim("t", "a", Outcome::ACQUIRED);
        m.claim("t", "b", Outcome::COMPLETED);
        m.claim("t", "c", Outcome::COMPLETED);
        m.claim("u", "d", Outcome::COMPLETED);
        // Known pairs count through their cached counters, new outcomes of them included.
        m.claim("t", "a", Outcome::ACQUIRED);
        m.claim("t", "a", Outcome::IN_PROGRESS);
        let text = m.encode();
        assert!(
            text.contains(r#"oncekey_claims_total{tenant="t",namespace="a",outcome="ACQUIRED"} 2"#),
            "{text}"
        );
        assert!(
            text.contains(
                r#"oncekey_claims_total{tenant="t",namespace="a",outcome="IN_PROGRESS"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"oncekey_claims_total{tenant="_other",namespace="_other",outcome="COMPLETED"} 2"#
            ),
            "{text}"
        );
        assert!(!text.contains(r#"namespace="c""#));
    }
}
