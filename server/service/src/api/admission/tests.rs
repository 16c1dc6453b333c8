//! The admission layer as the gRPC server sees it: requests with a tenant and a path in, the
//! refusal's status, details and trailer out, and the in-flight count held until the answer's
//! body is done.

use super::*;
use std::collections::HashMap;
use std::convert::Infallible;
use tonic_types::StatusExt;
use tower::{Layer, Service, ServiceExt};

/// Answers OK with a one-message body, counting calls.
#[derive(Clone, Default)]
struct Ok200(Arc<std::sync::atomic::AtomicUsize>);

impl Service<http::Request<()>> for Ok200 {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Self::Response, Infallible>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, _: http::Request<()>) -> Self::Future {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let body = tonic::body::Body::new(String::from("answer"));
        std::future::ready(Ok(http::Response::new(body)))
    }
}

fn admission(rate: f64, burst: u32, inflight: u32) -> Admission {
    let policy = Policy::new(
        TenantLimits {
            rate,
            burst,
            inflight,
            held_claims: 0,
        },
        HashMap::new(),
    );
    Admission::new(policy, AdmissionConfig::default(), Arc::default())
}

fn request(tenant: &str, rpc: &str) -> http::Request<()> {
    let mut request = http::Request::builder()
        .uri(format!("/oncekey.v1.Ledger/{rpc}"))
        .body(())
        .unwrap();
    request.extensions_mut().insert(Tenant(tenant.to_owned()));
    request
}

async fn call(
    service: &mut AdmissionService<Ok200>,
    tenant: &str,
    rpc: &str,
) -> http::Response<tonic::body::Body> {
    service
        .ready()
        .await
        .unwrap()
        .call(request(tenant, rpc))
        .await
        .unwrap()
}

#[test]
fn only_claim_lookup_and_list_records_are_subject_to_admission() {
    for rpc in ["Claim", "Lookup", "ListRecords"] {
        assert_eq!(kind(&format!("/oncekey.v1.Ledger/{rpc}")), Kind::Admitted);
    }
    for rpc in ["Complete", "Fail", "Renew", "Approve", "Reject", "Purge"] {
        assert_eq!(kind(&format!("/oncekey.v1.Ledger/{rpc}")), Kind::Counted);
    }
    assert_eq!(kind("/oncekey.v1.Ledger/KeepAlive"), Kind::Free);
}

#[tokio::test]
async fn over_its_rate_a_tenant_gets_rate_limited_with_retry_info_and_pushback() {
    let admission = admission(2.0, 1, 0);
    let inner = Ok200::default();
    let mut service = admission.layer().layer(inner.clone());
    let first = call(&mut service, "acme", "Claim").await;
    assert!(first.headers().get("grpc-status").is_none());
    let refused = call(&mut service, "acme", "Lookup").await;
    let status = tonic::Status::from_header_map(refused.headers()).expect("a status");
    assert_eq!(status.code(), tonic::Code::ResourceExhausted);
    let info = status.get_details_error_info().expect("ErrorInfo");
    assert_eq!(info.reason, "RATE_LIMITED");
    assert_eq!(info.domain, oncekey_api::ERROR_DOMAIN);
    assert_eq!(info.metadata["limit"], "rate");
    // Two requests a second: the next token is at most 500 ms away.
    let delay = status
        .get_details_retry_info()
        .and_then(|r| r.retry_delay)
        .expect("RetryInfo with a delay");
    assert!(delay > Duration::ZERO && delay <= Duration::from_millis(500));
    let pushback: u64 = refused.headers()["grpc-retry-pushback-ms"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(Duration::from_millis(pushback), delay);
    assert!(!status.message().contains("acme"), "{}", status.message());
    // The refused request never reached the service; another tenant is served.
    assert_eq!(inner.0.load(std::sync::atomic::Ordering::SeqCst), 1);
    let other = call(&mut service, "globex", "Claim").await;
    assert!(other.headers().get("grpc-status").is_none());
    let text = admission.inner.metrics.encode();
    assert!(
        text.contains(r#"oncekey_admission_refused_total{limit="rate"} 1"#),
        "{text}"
    );
}

#[tokio::test]
async fn settlements_pass_even_over_every_limit() {
    let admission = admission(0.001, 1, 1);
    let mut service = admission.layer().layer(Ok200::default());
    let held = call(&mut service, "acme", "Claim").await;
    for rpc in ["Claim", "Lookup"] {
        let refused = call(&mut service, "acme", rpc).await;
        assert_eq!(refused.headers()["grpc-status"], "8", "{rpc}");
    }
    for rpc in [
        "Complete",
        "Fail",
        "Renew",
        "KeepAlive",
        "Approve",
        "Reject",
        "Purge",
    ] {
        let passed = call(&mut service, "acme", rpc).await;
        assert!(passed.headers().get("grpc-status").is_none(), "{rpc}");
    }
    drop(held);
}

#[tokio::test]
async fn an_rpc_counts_as_in_flight_until_its_answer_body_is_done() {
    let admission = admission(0.0, 0, 1);
    let mut service = admission.layer().layer(Ok200::default());
    let held = call(&mut service, "acme", "Claim").await;
    let refused = call(&mut service, "acme", "Claim").await;
    let status = tonic::Status::from_header_map(refused.headers()).expect("a status");
    assert_eq!(
        status.get_details_error_info().unwrap().metadata["limit"],
        "inflight"
    );
    assert!(refused.headers().contains_key("grpc-retry-pushback-ms"));
    assert_eq!(admission.inner.table.inflight("acme"), 1);
    drop(held);
    assert_eq!(admission.inner.table.inflight("acme"), 0);
    let again = call(&mut service, "acme", "Claim").await;
    assert!(again.headers().get("grpc-status").is_none());
}

#[tokio::test]
async fn without_limits_nothing_is_tracked() {
    let admission = Admission::off();
    let mut service = admission.layer().layer(Ok200::default());
    for _ in 0..100 {
        let r = call(&mut service, "acme", "Claim").await;
        assert!(r.headers().get("grpc-status").is_none());
    }
    assert_eq!(admission.tenants_tracked(), 0);
}

#[test]
fn a_reload_changes_the_limits_and_a_bad_file_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("limits");
    std::fs::write(&path, "acme rate=1 burst=1\n").unwrap();
    let args = AdmissionConfig {
        limits_file: Some(path.clone()),
        ..Default::default()
    };
    let admission = Admission::from_config(&args, Arc::default()).unwrap();
    assert!(admission.admit("acme", Kind::Admitted).is_ok());
    assert!(admission.admit("acme", Kind::Admitted).is_err());
    assert!(admission.admit("globex", Kind::Admitted).is_ok());
    std::fs::write(&path, "# acme is free now\nglobex rate=1 burst=1\n").unwrap();
    assert_eq!(admission.reload().unwrap(), 1);
    assert!(admission.admit("acme", Kind::Admitted).is_ok());
    assert!(admission.admit("globex", Kind::Admitted).is_ok());
    assert!(admission.admit("globex", Kind::Admitted).is_err());
    std::fs::write(&path, "globex rate=lots\n").unwrap();
    let err = admission.reload().unwrap_err().to_string();
    assert!(err.contains("line 1"), "{err}");
    assert!(admission.admit("globex", Kind::Admitted).is_err());
    assert!(admission.admit("acme", Kind::Admitted).is_ok());
}
