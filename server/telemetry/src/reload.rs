//! The metrics of reloads (tokens file, TLS files, CQL client TLS files, key ring): counted here, beside the
//! other Oncekey metrics; the service's `reload` module does the reloading and reports outcomes.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Labels of the reload counters.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WhatLabels {
    /// `tls`, `tokens`, `cql_tls` or `encryption-keys`.
    pub what: &'static str,
}

/// The reload metrics (registered with the other Oncekey metrics).
#[derive(Clone, Debug, Default)]
pub struct ReloadMetrics {
    reloads: Family<WhatLabels, Counter>,
    failures: Family<WhatLabels, Counter>,
    /// One unlabelled series, present only while TLS is on.
    certificate_expiry: Family<Vec<(String, String)>, Gauge>,
}

impl ReloadMetrics {
    /// Registers the metrics under `registry` (prefixed `oncekey_` there).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "reloads",
            "tokens file (what=tokens), TLS certificate (what=tls), CQL client TLS (what=cql_tls) or key ring (what=encryption-keys) reloads that took effect",
            self.reloads.clone(),
        );
        registry.register(
            "reload_failures",
            "reloads of the tokens file, TLS files, CQL client TLS files or key ring that failed, keeping the previous ones",
            self.failures.clone(),
        );
        registry.register(
            "tls_certificate_expiry_seconds",
            "notAfter of the gRPC port's serving certificate, in seconds since the Unix epoch",
            self.certificate_expiry.clone(),
        );
    }

    /// Counts one reload of `what` that took effect (`ok`) or failed.
    pub fn outcome(&self, what: &'static str, ok: bool) {
        let family = if ok { &self.reloads } else { &self.failures };
        family.get_or_create(&WhatLabels { what }).inc();
    }

    /// Reloads of `what` that failed so far.
    pub fn failures(&self, what: &'static str) -> u64 {
        self.failures.get_or_create(&WhatLabels { what }).get()
    }

    /// Reloads of `what` that took effect so far.
    pub fn reloads(&self, what: &'static str) -> u64 {
        self.reloads.get_or_create(&WhatLabels { what }).get()
    }

    /// The exported certificate expiry (`None` when not exported).
    pub fn certificate_expiry(&self) -> Option<i64> {
        self.certificate_expiry
            .get(&Vec::new())
            .map(|gauge| gauge.get())
    }

    /// Exports the serving certificate's notAfter (seconds since the Unix epoch).
    pub fn set_certificate_expiry(&self, unix_seconds: i64) {
        self.certificate_expiry
            .get_or_create(&Vec::new())
            .set(unix_seconds);
    }
}
