//! Observability against the real binary: exact Prometheus metric values after a duplicate-heavy
//! scenario, and spans exported over OTLP to an in-process collector, continuing the caller's trace.

use oncekey_api::v1::{self, ClaimOutcome};
use oncekey_tests::*;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const NS: &str = "obs.ns";

#[tokio::test]
async fn metrics_count_a_duplicate_heavy_scenario_exactly() {
    let server = Server::start(&[]);
    let mut c = server.client("acme").await;
    let ok = |r: &v1::ClaimResponse| outcome(r);

    assert_eq!(
        ok(&c.claim(claim(NS, "k1", "{}")).await.unwrap().into_inner()),
        ClaimOutcome::Acquired
    );
    for _ in 0..3 {
        assert_eq!(
            ok(&c.claim(claim(NS, "k1", "{}")).await.unwrap().into_inner()),
            ClaimOutcome::InProgress
        );
    }
    c.complete(complete(NS, "k1", 1, result(200, b"done")))
        .await
        .unwrap();
    for _ in 0..5 {
        assert_eq!(
            ok(&c.claim(claim(NS, "k1", "{}")).await.unwrap().into_inner()),
            ClaimOutcome::Completed
        );
    }
    c.claim(claim(NS, "k1", r#"{"other":1}"#))
        .await
        .unwrap_err();
    c.complete(complete(NS, "k1", 9, result(200, b"x")))
        .await
        .unwrap_err();
    let short = v1::ClaimRequest {
        lease_ttl: Some(ms(1000)),
        ..claim(NS, "k2", "{}")
    };
    c.claim(short.clone()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(
        ok(&c.claim(short).await.unwrap().into_inner()),
        ClaimOutcome::Acquired
    );
    c.lookup(lookup(NS, "absent")).await.unwrap_err();

    let want = [
        r#"oncekey_claims_total{tenant="acme",namespace="obs.ns",outcome="ACQUIRED"} 3"#,
        r#"oncekey_claims_total{tenant="acme",namespace="obs.ns",outcome="IN_PROGRESS"} 3"#,
        r#"oncekey_claims_total{tenant="acme",namespace="obs.ns",outcome="COMPLETED"} 5"#,
        r#"oncekey_rpc_requests_total{method="Claim",code="OK"} 11"#,
        r#"oncekey_rpc_requests_total{method="Claim",code="FAILED_PRECONDITION"} 1"#,
        r#"oncekey_rpc_requests_total{method="Complete",code="OK"} 1"#,
        r#"oncekey_rpc_requests_total{method="Complete",code="FAILED_PRECONDITION"} 1"#,
        r#"oncekey_rpc_requests_total{method="Lookup",code="NOT_FOUND"} 1"#,
        "oncekey_lease_takeovers_total 1",
        "oncekey_leases_lost_total 1",
        "oncekey_keepalive_streams_open 0",
    ];
    // An RPC is counted when its response body is done, a moment after the client has it.
    let mut text = String::new();
    for _ in 0..50 {
        text = scrape(&server.admin).await;
        if want
            .iter()
            .all(|line| text.lines().any(|l| l.starts_with(line)))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for line in want {
        assert!(
            text.lines().any(|l| l.starts_with(line)),
            "missing {line:?} in:\n{text}"
        );
    }
    assert!(
        !text.contains("k1") && !text.contains("k2"),
        "keys must never be labels"
    );
    assert!(
        text.contains("oncekey_store_operation_duration_seconds_count{op=\"replace\"}"),
        "{text}"
    );
}

async fn scrape(admin: &str) -> String {
    let (code, body) = http_get(admin, "/metrics").await;
    assert_eq!(code, 200, "{body}");
    body
}

#[derive(Clone, Default)]
struct Collector {
    spans: Arc<Mutex<Vec<Span>>>,
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut spans = self.spans.lock().unwrap();
        for resource in request.into_inner().resource_spans {
            for scope in resource.scope_spans {
                spans.extend(scope.spans);
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

fn attr(span: &Span, key: &str) -> Option<String> {
    span.attributes.iter().find(|a| a.key == key).and_then(|a| {
        match a.value.as_ref()?.value.as_ref()? {
            Value::StringValue(s) => Some(s.clone()),
            other => Some(format!("{other:?}")),
        }
    })
}

#[tokio::test]
async fn spans_reach_an_otlp_collector_under_the_callers_trace() {
    let collector = Collector::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let service = TraceServiceServer::new(collector.clone());
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );

    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with_env(
        &dir.path().join("data"),
        &["--otlp-endpoint", &endpoint],
        &[("OTEL_BSP_SCHEDULE_DELAY", "100")],
    );
    let mut c = server.client("acme").await;
    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let parent_id = "00f067aa0ba902b7";
    let mut request = tonic::Request::new(claim(NS, "customer-4711", "{}"));
    request.metadata_mut().insert(
        "traceparent",
        format!("00-{trace_id}-{parent_id}-01").parse().unwrap(),
    );
    c.claim(request).await.unwrap();

    let mut claim_span = None;
    for _ in 0..100 {
        claim_span = collector
            .spans
            .lock()
            .unwrap()
            .iter()
            .find(|s| s.name == "oncekey.v1.Ledger/Claim")
            .cloned();
        if claim_span.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let span = claim_span.unwrap_or_else(|| {
        panic!(
            "no Claim span exported; server stderr:\n{}",
            server.stderr()
        )
    });
    assert_eq!(
        hex::encode(&span.trace_id),
        trace_id,
        "the caller's trace continues"
    );
    assert_eq!(hex::encode(&span.parent_span_id), parent_id);
    assert_eq!(attr(&span, "tenant").as_deref(), Some("acme"));
    assert_eq!(attr(&span, "namespace").as_deref(), Some(NS));
    assert_eq!(attr(&span, "outcome").as_deref(), Some("ACQUIRED"));
    assert_eq!(attr(&span, "grpc.code").as_deref(), Some("OK"));
    let key_hash = attr(&span, "key_hash").expect("a hashed key");
    assert!(
        !key_hash.contains("4711") && key_hash.len() == 16,
        "{key_hash}"
    );
    assert!(
        span.attributes
            .iter()
            .all(|a| !format!("{:?}", a.value).contains("customer-4711")),
        "raw key leaked"
    );
}

#[tokio::test]
async fn json_logs_are_one_object_per_line_without_raw_keys() {
    let mut server = Server::start(&["--log-format", "json"]);
    let mut c = server.client("acme").await;
    c.claim(claim(NS, "customer-4711", "{}")).await.unwrap();
    let status = server.terminate(Duration::from_secs(20));
    assert_eq!(status.code(), Some(0));
    let stderr = server.stderr();
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(lines.len() >= 3, "{stderr}");
    for line in lines {
        let event: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(
            event["level"].is_string() && event["timestamp"].is_string(),
            "{line}"
        );
    }
    assert!(
        stderr.contains("\"message\":\"shutdown signal: draining\""),
        "{stderr}"
    );
    assert!(
        !stderr.contains("customer-4711"),
        "a raw key reached the logs"
    );
}
