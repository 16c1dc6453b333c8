//! Prometheus metrics served on the admin port's `/metrics`: RPCs by method and code, Claim outcomes
//! by tenant and namespace (the dedup-hit rate is COMPLETED+FAILED+IN_PROGRESS over all Claims),
//! lease takeovers and losses, open keep-alive streams, store latency and conditional-write
//! conflicts, records swept, and the records needing attention (refreshed from the store every
//! few seconds, never counted per scrape).
//!
//! Label cardinality is bounded: keys are never labels, and at most `max_series` distinct
//! (tenant, namespace) pairs get their own series. Each tenant gets a fair share of them
//! (`max_series / 8`, at least 1): its namespaces past its share count under (tenant, `_other`),
//! so one tenant with many namespaces cannot push every other tenant's into `_other`; tenants
//! first seen once the cap is reached share (`_other`, `_other`). Requests refused by admission
//! are counted by the limit that refused them, never by tenant.

mod labels;
#[cfg(test)]
mod tests;

pub use labels::*;

use oncekey_ledger::ClaimOutcome;
use prometheus_client::collector::Collector;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::collections::HashMap;
use std::sync::{OnceLock, RwLock};
use std::time::Duration;

/// Every Oncekey metric, registered once.
pub struct Metrics {
    registry: Registry,
    rpcs: Family<RpcLabels, Counter>,
    rpc_seconds: Family<MethodLabels, Histogram>,
    claims: Family<ClaimLabels, Counter>,
    takeovers: Counter,
    leases_lost: Counter,
    keepalive_open: Gauge,
    claims_held: Gauge,
    store_seconds: Family<StoreLabels, Histogram>,
    conflicts: Family<StoreLabels, Counter>,
    swept: Counter,
    reload: crate::reload::ReloadMetrics,
    admission_refused: Family<LimitLabels, Counter>,
    intent_duplicates: Family<ActionLabels, Counter>,
    budget_refused: Counter,
    records_erased: Counter,
    tenant_erasures: Counter,
    needing_attention: Family<AttentionLabels, Gauge>,
    /// The Claim counters by tenant and namespace: the hot path finds its counter without
    /// building (allocating) a label set.
    series: RwLock<Series>,
    max_series: usize,
    per_tenant: usize,
}

/// The Claim counters of every (tenant, namespace) pair with a series.
#[derive(Default)]
struct Series {
    tenants: HashMap<String, TenantSeries>,
    /// Pairs with their own series (not counting the `_other` ones).
    named: usize,
    /// (`_other`, `_other`): tenants first seen once the cap was reached.
    other: PairCounters,
}

/// One tenant's Claim counters.
#[derive(Default)]
struct TenantSeries {
    namespaces: HashMap<String, PairCounters>,
    /// (tenant, `_other`): its namespaces past its share.
    other: PairCounters,
}

/// The Claim counters of one (tenant, namespace) pair, indexed by `ClaimOutcome as usize`.
type PairCounters = [OnceLock<Counter>; ClaimOutcome::ALL.len()];

/// Where one Claim answer is counted.
enum Slot<'s> {
    /// The pair's own series.
    Pair(&'s PairCounters),
    /// (tenant, `_other`).
    TenantOther(&'s PairCounters),
    /// (`_other`, `_other`).
    Other,
}

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
        Self::with_collectors(max_series, store)
    }

    /// `new`, plus the metrics of `collectors` (a store's, a store wrapper's), each under the
    /// `oncekey_` prefix.
    pub fn with_collectors(
        max_series: usize,
        collectors: impl IntoIterator<Item = Box<dyn Collector>>,
    ) -> Self {
        // The process metrics keep their standard names; Oncekey's own are prefixed.
        let mut root = Registry::default();
        root.register_collector(Box::new(super::process::ProcessCollector));
        let registry = root.sub_registry_with_prefix("oncekey");
        for collector in collectors {
            registry.register_collector(collector);
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
        let claims_held = Gauge::default();
        registry.register(
            "claims_held",
            "Claims held by wait now, every tenant's (each tenant's at most its held-claims limit)",
            claims_held.clone(),
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
        let admission_refused = Family::<LimitLabels, Counter>::default();
        registry.register(
            "admission_refused",
            "Claim, Lookup and ListRecords refused with RATE_LIMITED, by the limit that refused them (held: a Claim that would have been held by wait beyond its tenant's bound)",
            admission_refused.clone(),
        );
        for limit in ["rate", "inflight", "held"] {
            let _ = admission_refused.get_or_create(&LimitLabels { limit });
        }
        let intent_duplicates = Family::<ActionLabels, Counter>::default();
        registry.register(
            "intent_duplicates",
            "Claims of a new key whose arguments another live key of the namespace was claimed \
             with within the intent window, by what the intent guard did: warned, refused \
             (DUPLICATE_INTENT) or repeated (let through by repeat_intent)",
            intent_duplicates.clone(),
        );
        for action in ["warned", "refused", "repeated"] {
            let _ = intent_duplicates.get_or_create(&ActionLabels { action });
        }
        let budget_refused = Counter::default();
        registry.register(
            "budget_refused",
            "Claims of a new child operation refused for its parent's run budget (BUDGET_EXHAUSTED)",
            budget_refused.clone(),
        );
        let records_erased = Counter::default();
        registry.register(
            "records_erased",
            "records erased by EraseTenant (each purged as by a forced Purge)",
            records_erased.clone(),
        );
        let tenant_erasures = Counter::default();
        registry.register(
            "tenant_erasures",
            "EraseTenant calls that found their tenant without a live record (erasure completed)",
            tenant_erasures.clone(),
        );
        let needing_attention = Family::<AttentionLabels, Gauge>::default();
        registry.register(
            "records_needing_attention",
            "records of every tenant that need someone: UNKNOWN (an at-most-once outcome to \
             reconcile), AWAITING_APPROVAL, PROCESSING_LAPSED (an at-least-once holder stopped); \
             refreshed every few seconds",
            needing_attention.clone(),
        );
        for why in oncekey_ledger::Attention::ALL {
            let _ = needing_attention.get_or_create(&AttentionLabels { status: why.name() });
        }
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
            claims_held,
            store_seconds,
            conflicts,
            swept,
            admission_refused,
            intent_duplicates,
            budget_refused,
            records_erased,
            tenant_erasures,
            needing_attention,
            reload,
            series: RwLock::default(),
            max_series,
            per_tenant: Self::per_tenant_share(max_series),
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

    /// How many namespaces of one tenant get their own series when `max_series` pairs may.
    pub fn per_tenant_share(max_series: usize) -> usize {
        (max_series / 8).max(1)
    }

    /// One Claim answer.
    pub fn claim(&self, tenant: &str, namespace: &str, outcome: ClaimOutcome) {
        let series = self.series.read().unwrap_or_else(|e| e.into_inner());
        let counter = match self.find(&series, tenant, namespace) {
            Some(Slot::Pair(counters)) => self.counter(counters, tenant, namespace, outcome),
            Some(Slot::TenantOther(counters)) => self.counter(counters, tenant, OTHER, outcome),
            Some(Slot::Other) => self.counter(&series.other, OTHER, OTHER, outcome),
            None => {
                drop(series);
                let mut guard = self.series.write().unwrap_or_else(|e| e.into_inner());
                let series = &mut *guard;
                if self.find(series, tenant, namespace).is_none() {
                    let entry = series.tenants.entry(tenant.to_owned()).or_default();
                    entry
                        .namespaces
                        .insert(namespace.to_owned(), PairCounters::default());
                    series.named += 1;
                }
                drop(guard);
                return self.claim(tenant, namespace, outcome);
            }
        };
        counter.inc();
    }

    /// Where a Claim of (tenant, namespace) is counted, or `None` when it gets a series of its
    /// own that does not exist yet.
    fn find<'s>(&self, series: &'s Series, tenant: &str, namespace: &str) -> Option<Slot<'s>> {
        let full = series.named >= self.max_series;
        match series.tenants.get(tenant) {
            Some(t) => match t.namespaces.get(namespace) {
                Some(pair) => Some(Slot::Pair(pair)),
                None if full || t.namespaces.len() >= self.per_tenant => {
                    Some(Slot::TenantOther(&t.other))
                }
                None => None,
            },
            None if full => Some(Slot::Other),
            None => None,
        }
    }

    /// The counter of `outcome` among `counters`, registered on first use.
    fn counter<'c>(
        &self,
        counters: &'c PairCounters,
        tenant: &str,
        namespace: &str,
        outcome: ClaimOutcome,
    ) -> &'c Counter {
        counters[outcome as usize].get_or_init(|| {
            self.claims
                .get_or_create(&ClaimLabels {
                    tenant: tenant.to_owned(),
                    namespace: namespace.to_owned(),
                    outcome: outcome.name(),
                })
                .clone()
        })
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

    /// The gauge of Claims held by `wait` now, which the engine moves as Claims are held and
    /// answered.
    pub fn claims_held(&self) -> Gauge {
        self.claims_held.clone()
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

    /// The records needing attention, as last counted.
    pub fn needing_attention(&self, counts: &oncekey_ledger::AttentionCounts) {
        for why in oncekey_ledger::Attention::ALL {
            let value = i64::try_from(counts.get(why)).unwrap_or(i64::MAX);
            self.needing_attention
                .get_or_create(&AttentionLabels { status: why.name() })
                .set(value);
        }
    }

    /// A request refused by admission; `limit` is `rate` or `inflight`.
    pub fn admission_refused(&self, limit: &'static str) {
        self.admission_refused
            .get_or_create(&LimitLabels { limit })
            .inc();
    }

    /// A suspected duplicate intent, by what the guard did (`warned`, `refused`, `repeated`).
    pub fn intent_duplicate(&self, action: &'static str) {
        self.intent_duplicates
            .get_or_create(&ActionLabels { action })
            .inc();
    }

    /// A child's Claim refused for its parent's run budget.
    pub fn budget_refused(&self) {
        self.budget_refused.inc();
    }

    /// Records erased by one EraseTenant call.
    pub fn records_erased(&self, n: u64) {
        self.records_erased.inc_by(n);
    }

    /// A tenant found without a live record by EraseTenant: its erasure completed.
    pub fn tenant_erased(&self) {
        self.tenant_erasures.inc();
    }
}
