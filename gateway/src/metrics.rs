//! The gateway's Prometheus metrics on the admin port's `/metrics`: requests by method and result,
//! upstream latency, Claim latency, and requests in flight. Labels are bounded: methods outside
//! the standard set count as `OTHER`, and keys, paths and callers are never labels.

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::time::Duration;

/// How a request ended, as a label value.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum Outcome {
    /// Forwarded upstream once and the response stored.
    forwarded,
    /// Answered with a stored response.
    replayed,
    /// 409: the key was in flight.
    conflict,
    /// 422: the key was used with another request.
    reused,
    /// 503: the ledger could not answer; nothing was forwarded.
    ledger_unavailable,
    /// Not keyed (other method or no key): passed through.
    passthrough,
    /// Forwarded, but the response was too large to store (507 from now on).
    too_large,
    /// 413: the request body was over the limit.
    request_too_large,
    /// 400: no key with `--require-key`, a malformed key, or an unreadable body.
    bad_request,
    /// The upstream answered 5xx, 408, 425 or 429: returned as is, not stored.
    upstream_error,
    /// 502 or 504: the upstream could not be reached, broke off or did not answer in time (or
    /// answered 1xx); the key was released.
    upstream_unreachable,
    /// 502 or 504 of an at-most-once request that may have reached the upstream: its outcome is
    /// unknown until reconciled.
    outcome_unknown,
    /// Answered with a stored final failure.
    failed,
    /// 409: an at-most-once request's outcome is unknown.
    needs_reconciliation,
    /// 409: the ledger's intent guard refused it (the same request under another key).
    duplicate_intent,
    /// Forwarded and returned, but the ledger did not record the response (it will be forwarded
    /// again after the lease lapses, or need reconciliation).
    unrecorded,
}

/// Labels of the request counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// The HTTP method (`OTHER` for non-standard ones).
    pub method: &'static str,
    /// How the request ended.
    pub result: Outcome,
}

/// Every gateway metric, registered once.
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    upstream_seconds: Histogram,
    claim_seconds: Histogram,
    in_flight: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut root = Registry::default();
        let registry = root.sub_registry_with_prefix("oncekey_gateway");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "requests",
            "Requests by method and result",
            requests.clone(),
        );
        // 100 µs .. ~13 s
        let upstream_seconds = Histogram::new(exponential_buckets(0.000_1, 2.0, 18));
        registry.register(
            "upstream_duration_seconds",
            "Time from sending a request upstream to its response headers",
            upstream_seconds.clone(),
        );
        let claim_seconds = Histogram::new(exponential_buckets(0.000_05, 2.0, 16));
        registry.register(
            "claim_duration_seconds",
            "Time the ledger took to answer a Claim (including --wait holds)",
            claim_seconds.clone(),
        );
        let in_flight = Gauge::default();
        registry.register(
            "in_flight_requests",
            "Requests being handled now",
            in_flight.clone(),
        );
        Metrics {
            registry: root,
            requests,
            upstream_seconds,
            claim_seconds,
            in_flight,
        }
    }
}

impl Metrics {
    /// Counts a finished request.
    pub fn request(&self, method: &http::Method, result: Outcome) {
        self.requests
            .get_or_create(&RequestLabels {
                method: method_label(method),
                result,
            })
            .inc();
    }

    /// Records an upstream round trip.
    pub fn upstream(&self, took: Duration) {
        self.upstream_seconds.observe(took.as_secs_f64());
    }

    /// Records a Claim.
    pub fn claim(&self, took: Duration) {
        self.claim_seconds.observe(took.as_secs_f64());
    }

    /// The gauge of requests in flight.
    pub fn in_flight(&self) -> &Gauge {
        &self.in_flight
    }

    /// The Prometheus text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

fn method_label(method: &http::Method) -> &'static str {
    use http::Method as M;
    match *method {
        M::GET => "GET",
        M::POST => "POST",
        M::PUT => "PUT",
        M::PATCH => "PATCH",
        M::DELETE => "DELETE",
        M::HEAD => "HEAD",
        M::OPTIONS => "OPTIONS",
        M::CONNECT => "CONNECT",
        M::TRACE => "TRACE",
        _ => "OTHER",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_counted_by_method_and_result() {
        let m = Metrics::default();
        m.request(&http::Method::POST, Outcome::replayed);
        m.request(&http::Method::POST, Outcome::replayed);
        m.request(
            &http::Method::from_bytes(b"BREW").unwrap(),
            Outcome::passthrough,
        );
        m.upstream(Duration::from_millis(3));
        let text = m.encode();
        assert!(
            text.contains(r#"oncekey_gateway_requests_total{method="POST",result="replayed"} 2"#),
            "{text}"
        );
        assert!(
            text.contains(r#"method="OTHER",result="passthrough""#),
            "{text}"
        );
        assert!(
            text.contains("oncekey_gateway_upstream_duration_seconds_count 1"),
            "{text}"
        );
    }
}
