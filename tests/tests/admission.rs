//! Per-tenant admission, end to end against the real binary: a tenant over its request rate or
//! in-flight limit gets RESOURCE_EXHAUSTED `RATE_LIMITED` with RetryInfo and the
//! `grpc-retry-pushback-ms` trailer while other tenants are served; Complete, Fail, Renew and
//! KeepAlive are never refused; the limits file's overrides apply and SIGHUP reloads them (a bad
//! file is refused at startup and kept out on reload); the Rust client backs off and succeeds.
//!
//! Rates are tiny (one request per 100 s) so that "over the limit" never depends on how fast
//! this machine runs the test; nothing here asserts a duration.

use oncekey_api::v1::{self, ClaimOutcome};
use oncekey_client::{Claim, Claimed, Client, ConnectOptions, LedgerRpc, OperationKey};
use oncekey_tests::*;
use std::path::Path;
use std::time::{Duration, Instant};
use tonic::Code;
use tonic_types::StatusExt;

const NS: &str = "payments.charge";

/// The limit a RATE_LIMITED status names, after checking everything such a refusal must carry:
/// code, reason, RetryInfo and a pushback trailer that agrees with it.
fn refused_by(status: &tonic::Status) -> String {
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert_eq!(reason(status), "RATE_LIMITED");
    let delay = status
        .get_details_retry_info()
        .and_then(|r| r.retry_delay)
        .unwrap_or_else(|| panic!("RATE_LIMITED without a RetryInfo delay: {status:?}"));
    assert!(delay > Duration::ZERO, "{delay:?}");
    let pushback: u64 = status
        .metadata()
        .get("grpc-retry-pushback-ms")
        .unwrap_or_else(|| panic!("no grpc-retry-pushback-ms trailer: {status:?}"))
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(Duration::from_millis(pushback), delay);
    status.get_details_error_info().unwrap().metadata["limit"].clone()
}

fn is_rate_limited(status: &tonic::Status) -> bool {
    status.code() == Code::ResourceExhausted
}

/// A Lookup of a key that does not exist: NOT_FOUND when admitted, RATE_LIMITED when refused.
async fn probe(c: &mut LedgerRpc) -> Result<(), tonic::Status> {
    match c.lookup(lookup(NS, "absent")).await {
        Err(s) if s.code() == Code::NotFound => Ok(()),
        Err(s) => Err(s),
        Ok(_) => panic!("a record that was never claimed"),
    }
}

/// Retries `f` until it holds (a server-side change such as a reload takes effect shortly after
/// the signal); panics after a generous deadline.
async fn eventually<F, Fut>(what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(60);
    while !f().await {
        assert!(Instant::now() < deadline, "never happened: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn sighup(server: &Server) {
    let ok = std::process::Command::new("kill")
        .args(["-HUP", &server.pid().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -HUP");
}

fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("{series} not in /metrics:\n{text}"))
}

#[tokio::test]
async fn a_tenant_over_its_rate_is_refused_with_pushback_while_another_is_served() {
    let server = Server::start(&["--tenant-rate", "0.01", "--tenant-burst", "2"]);
    let noisy = server.client("noisy").await;
    let flood: Vec<_> = (0..20)
        .map(|i| {
            let mut c = noisy.clone();
            tokio::spawn(async move { c.claim(claim(NS, &format!("n-{i}"), "{}")).await })
        })
        .collect();
    let mut quiet = server.client("quiet").await;
    for key in ["q-1", "q-2"] {
        let r = quiet
            .claim(claim(NS, key, "{}"))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(outcome(&r), ClaimOutcome::Acquired);
    }
    let (mut admitted, mut refused) = (0, 0);
    for task in flood {
        match task.await.unwrap() {
            Ok(r) => {
                assert_eq!(outcome(r.get_ref()), ClaimOutcome::Acquired);
                admitted += 1;
            }
            Err(status) => {
                assert_eq!(refused_by(&status), "rate");
                assert!(!status.message().contains("noisy"), "{status:?}");
                refused += 1;
            }
        }
    }
    // A bucket of 2 refilling once per 100 s: at most 2 of the 20 get through.
    assert!(admitted <= 2, "{admitted} admitted");
    assert_eq!(admitted + refused, 20);
    let (_, text) = http_get(&server.admin, "/metrics").await;
    assert_eq!(
        metric(&text, r#"oncekey_admission_refused_total{limit="rate"}"#),
        f64::from(refused)
    );
    assert_eq!(
        metric(
            &text,
            r#"oncekey_rpc_requests_total{method="Claim",code="RESOURCE_EXHAUSTED"}"#
        ),
        f64::from(refused)
    );
    // Refused Claims never reached the ledger: only the admitted ones were answered.
    assert_eq!(
        metric(
            &text,
            r#"oncekey_claims_total{tenant="noisy",namespace="payments.charge",outcome="ACQUIRED"}"#
        ),
        f64::from(admitted)
    );
    assert!(!text.contains(r#"tenant="noisy",namespace="_other""#));
}

#[tokio::test]
async fn settlements_and_keep_alives_are_never_refused_over_the_rate() {
    let server = Server::start(&["--tenant-rate", "0.01", "--tenant-burst", "2"]);
    let mut c = server.client("acme").await;
    for key in ["a", "b"] {
        let r = c.claim(claim(NS, key, "{}")).await.unwrap().into_inner();
        assert_eq!(outcome(&r), ClaimOutcome::Acquired);
    }
    // The bucket is empty now: Claims and Lookups are refused …
    for i in 0..10 {
        let status = c
            .claim(claim(NS, &format!("x-{i}"), "{}"))
            .await
            .unwrap_err();
        assert_eq!(refused_by(&status), "rate");
    }
    assert_eq!(refused_by(&probe(&mut c).await.unwrap_err()), "rate");
    // … yet the holder of a lease renews, keeps alive, completes and fails.
    let renewed = c
        .renew(v1::RenewRequest {
            namespace: NS.into(),
            key: "a".into(),
            lease_token: 1,
            lease_ttl: Some(ms(60_000)),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(renewed.lease.unwrap().token, 1);
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    tx.send(v1::KeepAliveRequest {
        namespace: NS.into(),
        key: "a".into(),
        lease_token: 1,
        lease_ttl: Some(ms(60_000)),
    })
    .await
    .unwrap();
    let mut leases = c
        .keep_alive(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    let lease = tokio::time::timeout(Duration::from_secs(30), leases.message())
        .await
        .expect("a first Lease")
        .unwrap()
        .expect("a Lease, not the end of the stream");
    assert_eq!(lease.token, 1);
    c.complete(complete(NS, "a", 1, result(200, b"done")))
        .await
        .unwrap();
    c.fail(fail(NS, "b", 1, v1::Disposition::Retryable, "later"))
        .await
        .unwrap();
    // Still over the rate afterwards: the settlements were let through, not the limit lifted.
    assert_eq!(refused_by(&probe(&mut c).await.unwrap_err()), "rate");
}

#[tokio::test]
async fn a_claim_held_by_wait_counts_in_flight_and_settlements_still_pass() {
    let server = Server::start(&["--tenant-inflight", "1"]);
    let mut c = server.client("acme").await;
    let r = c.claim(claim(NS, "k", "{}")).await.unwrap().into_inner();
    assert_eq!(outcome(&r), ClaimOutcome::Acquired);
    // A duplicate with `wait` is held until the holder settles: one RPC in flight.
    let mut waiter = c.clone();
    let held = tokio::spawn(async move {
        waiter
            .claim(v1::ClaimRequest {
                wait: Some(ms(60_000)),
                ..claim(NS, "k", "{}")
            })
            .await
    });
    // Let the held Claim be admitted before the first probe: with one RPC allowed in flight, a
    // probe that arrived first would get the slot and the Claim would be the one refused.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!held.is_finished(), "the Claim with wait is held");
    let deadline = Instant::now() + Duration::from_secs(60);
    let limit = loop {
        match probe(&mut c).await {
            Err(status) => break refused_by(&status),
            Ok(()) => {
                assert!(
                    Instant::now() < deadline,
                    "a Lookup never refused while the Claim is held"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    assert_eq!(limit, "inflight");
    assert!(!held.is_finished());
    // Another tenant is not affected by acme's held Claim.
    probe(&mut server.client("globex").await).await.unwrap();
    // Settlements pass although acme is at its in-flight limit; completing releases the waiter.
    c.renew(v1::RenewRequest {
        namespace: NS.into(),
        key: "k".into(),
        lease_token: 1,
        lease_ttl: Some(ms(60_000)),
    })
    .await
    .unwrap();
    c.complete(complete(NS, "k", 1, result(200, b"done")))
        .await
        .unwrap();
    let answer = held.await.unwrap().unwrap().into_inner();
    assert_eq!(outcome(&answer), ClaimOutcome::Completed);
    // Its answer sent, the held Claim no longer counts.
    eventually("the tenant admitted again", || {
        let mut c = c.clone();
        async move { probe(&mut c).await.is_ok() }
    })
    .await;
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

#[tokio::test]
async fn limits_file_overrides_apply_and_sighup_reloads_them() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("limits");
    write(&file, "# vip has no limit\nvip rate=0\n");
    let limits = file.to_str().unwrap();
    let server = Server::start(&[
        "--tenant-rate",
        "0.01",
        "--tenant-burst",
        "1",
        "--limits-file",
        limits,
    ]);
    let mut vip = server.client("vip").await;
    let mut plain = server.client("plain").await;
    for _ in 0..5 {
        probe(&mut vip).await.unwrap();
    }
    probe(&mut plain).await.unwrap();
    assert_eq!(refused_by(&probe(&mut plain).await.unwrap_err()), "rate");

    write(&file, "plain rate=1000 burst=1000\nvip rate=0.01 burst=1\n");
    sighup(&server);
    eventually("plain admitted after the reload", || {
        let mut plain = plain.clone();
        async move { probe(&mut plain).await.is_ok() }
    })
    .await;
    for _ in 0..5 {
        probe(&mut plain).await.unwrap();
    }
    probe(&mut vip).await.unwrap();
    assert_eq!(refused_by(&probe(&mut vip).await.unwrap_err()), "rate");

    // A bad file is logged and changes nothing.
    write(&file, "plain rate=1000\nvip rate=fast\n");
    sighup(&server);
    eventually("the failed reload logged", || {
        let stderr = server.stderr();
        async move { stderr.contains("limits file reload failed") }
    })
    .await;
    let stderr = server.stderr();
    let line = stderr
        .lines()
        .find(|l| l.contains("limits file reload failed"))
        .unwrap();
    assert!(line.contains("line 2"), "{line}");
    for _ in 0..5 {
        probe(&mut plain).await.unwrap();
    }
    assert!(is_rate_limited(&probe(&mut vip).await.unwrap_err()));
}

#[test]
fn bad_limits_at_startup_exit_64_naming_the_flag_or_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("limits");
    write(&file, "acme rate=10\nglobex rate=10 inflight=lots\n");
    let data = dir.path().join("data");
    let serve = |extra: &[&str], env: &[(&str, &str)]| {
        let out = std::process::Command::new(binary())
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--admin-listen",
                "127.0.0.1:0",
            ])
            .arg("--data-dir")
            .arg(&data)
            .args(extra)
            .envs(env.iter().copied())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, stderr) = serve(&["--limits-file", file.to_str().unwrap()], &[]);
    assert_eq!(code, Some(64), "{stderr}");
    assert!(stderr.contains("--limits-file"), "{stderr}");
    assert!(stderr.contains("line 2"), "{stderr}");
    assert!(stderr.contains("inflight"), "{stderr}");
    // Every flag is also an environment variable, checked the same way.
    let (code, stderr) = serve(&[], &[("ONCEKEY_TENANT_RATE", "-5")]);
    assert_eq!(code, Some(64), "{stderr}");
    assert!(stderr.contains("--tenant-rate"), "{stderr}");
}

#[tokio::test]
async fn the_rust_client_backs_off_after_the_pushback_and_succeeds() {
    // One Claim every 2 s: three in a row need the client to wait for the server's pushback.
    let server = Server::start(&["--tenant-rate", "0.5", "--tenant-burst", "1"]);
    let client = Client::connect(
        &server.grpc,
        ConnectOptions {
            tenant: Some("agent".into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    for i in 0..3 {
        let key = OperationKey::new(NS, [format!("order-{i}"), "v1".into()]).unwrap();
        let claimed = client
            .claim(&Claim::new(&key, &serde_json::json!({ "n": i })).unwrap())
            .await
            .unwrap_or_else(|e| panic!("claim {i}: {e}"));
        assert!(matches!(claimed, Claimed::Acquired { .. }), "{claimed:?}");
    }
    // Refused at least once, and each time the one retry after the pushback was admitted (a
    // guessed backoff would have been refused again: the next token was up to 2 s away).
    let stats = client.stats();
    assert!((1..=2).contains(&stats.retries), "{stats:?}");
    let (_, text) = http_get(&server.admin, "/metrics").await;
    assert!(metric(&text, r#"oncekey_admission_refused_total{limit="rate"}"#) >= 1.0);
}
