//! The per-tenant bound on Claims held by `wait`, end to end against the real binary: beyond
//! `--tenant-held-claims` a Claim that would be held is refused RESOURCE_EXHAUSTED
//! `RATE_LIMITED` (limit `held`) with RetryInfo and the `grpc-retry-pushback-ms` trailer, while
//! a Claim without `wait`, a Claim that is answered at once and another tenant's held Claims go
//! on; the bound is on by default, and the limits file overrides it per tenant.
//!
//! Whether the Claims are held is read from `/metrics` (`oncekey_claims_held`), never guessed
//! from a sleep; nothing here asserts a duration.

use oncekey_api::v1::{self, ClaimOutcome};
use oncekey_tests::*;
use std::time::{Duration, Instant};
use tonic::Code;
use tonic_types::StatusExt;

const NS: &str = "payments.charge";

fn held_claim(key: &str) -> v1::ClaimRequest {
    v1::ClaimRequest {
        wait: Some(ms(60_000)),
        ..claim(NS, key, "{}")
    }
}

/// Claims held now, from `/metrics`.
async fn held_now(server: &Server) -> f64 {
    let (_, text) = http_get(&server.admin, "/metrics").await;
    text.lines()
        .find_map(|l| l.strip_prefix("oncekey_claims_held ")?.trim().parse().ok())
        .unwrap_or_else(|| panic!("oncekey_claims_held not in /metrics:\n{text}"))
}

async fn until_held(server: &Server, n: f64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while held_now(server).await != n {
        assert!(Instant::now() < deadline, "never {n} Claims held");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Checks what a held-claims refusal carries; returns its pushback.
fn refused_for_held(status: &tonic::Status) -> Duration {
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert_eq!(reason(status), "RATE_LIMITED");
    let info = status.get_details_error_info().unwrap();
    assert_eq!(info.metadata["limit"], "held", "{status:?}");
    let delay = status
        .get_details_retry_info()
        .and_then(|r| r.retry_delay)
        .unwrap_or_else(|| panic!("no RetryInfo: {status:?}"));
    let pushback: u64 = status
        .metadata()
        .get("grpc-retry-pushback-ms")
        .unwrap_or_else(|| panic!("no grpc-retry-pushback-ms trailer: {status:?}"))
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(Duration::from_millis(pushback), delay);
    assert!(delay > Duration::ZERO);
    delay
}

/// Starts `n` Claims with `wait` of `key` as `tenant`, and waits until the server holds them.
async fn hold(
    server: &Server,
    tenant: &str,
    key: &str,
    n: usize,
    already: f64,
) -> Vec<tokio::task::JoinHandle<Result<tonic::Response<v1::ClaimResponse>, tonic::Status>>> {
    let client = server.client(tenant).await;
    let tasks = (0..n)
        .map(|_| {
            let mut c = client.clone();
            let key = key.to_owned();
            tokio::spawn(async move { c.claim(held_claim(&key)).await })
        })
        .collect();
    until_held(server, already + n as f64).await;
    tasks
}

#[tokio::test]
async fn claims_held_beyond_the_tenant_bound_are_refused_with_pushback_others_go_on() {
    let server = Server::start(&["--tenant-held-claims", "3"]);
    let mut acme = server.client("acme").await;
    let mut globex = server.client("globex").await;
    for (c, key) in [(&mut acme, "a"), (&mut globex, "g")] {
        let r = c.claim(claim(NS, key, "{}")).await.unwrap().into_inner();
        assert_eq!(outcome(&r), ClaimOutcome::Acquired);
    }
    let acme_held = hold(&server, "acme", "a", 3, 0.0).await;

    // A fourth Claim that would be held is refused, and changes nothing.
    let before = acme.lookup(lookup(NS, "a")).await.unwrap().into_inner();
    let refused = acme.claim(held_claim("a")).await.unwrap_err();
    refused_for_held(&refused);
    assert!(!refused.message().contains("acme"), "{refused:?}");
    let after = acme.lookup(lookup(NS, "a")).await.unwrap().into_inner();
    assert_eq!(
        after.record, before.record,
        "a refused Claim writes nothing"
    );
    // Not held, not refused: a Claim without wait, and a Claim with wait answered at once.
    let r = acme.claim(claim(NS, "a", "{}")).await.unwrap().into_inner();
    assert_eq!(outcome(&r), ClaimOutcome::InProgress);
    let r = acme.claim(held_claim("fresh")).await.unwrap().into_inner();
    assert_eq!(outcome(&r), ClaimOutcome::Acquired);

    // Another tenant holds its own three meanwhile, and works as usual.
    let globex_held = hold(&server, "globex", "g", 3, 3.0).await;
    let r = globex
        .claim(claim(NS, "g2", "{}"))
        .await
        .unwrap()
        .into_inner();
    let token = r.lease.unwrap().token;
    globex
        .complete(complete(NS, "g2", token, result(200, b"ok")))
        .await
        .unwrap();

    // The holders settle: every held Claim gets the outcome, and acme may hold again.
    for (c, key, held) in [(&mut acme, "a", acme_held), (&mut globex, "g", globex_held)] {
        c.complete(complete(NS, key, 1, result(200, b"done")))
            .await
            .unwrap();
        for task in held {
            let answer = task.await.unwrap().unwrap().into_inner();
            assert_eq!(outcome(&answer), ClaimOutcome::Completed);
        }
    }
    until_held(&server, 0.0).await;
    let r = acme.claim(claim(NS, "b", "{}")).await.unwrap().into_inner();
    assert_eq!(outcome(&r), ClaimOutcome::Acquired);
    let again = hold(&server, "acme", "b", 3, 0.0).await;
    refused_for_held(&acme.claim(held_claim("b")).await.unwrap_err());
    acme.complete(complete(NS, "b", 1, result(200, b"done")))
        .await
        .unwrap();
    for task in again {
        task.await.unwrap().unwrap();
    }
    let (_, text) = http_get(&server.admin, "/metrics").await;
    assert!(
        text.contains(r#"oncekey_admission_refused_total{limit="held"} 2"#),
        "{text}"
    );
}

#[tokio::test]
async fn the_bound_is_on_by_default_and_the_limits_file_overrides_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("limits");
    std::fs::write(&file, "small held-claims=1\nfree held-claims=0\n").unwrap();
    let server = Server::start(&["--limits-file", file.to_str().unwrap()]);
    // The default: 1000.
    let mut plain = server.client("plain").await;
    plain.claim(claim(NS, "p", "{}")).await.unwrap();
    let plain_held = hold(&server, "plain", "p", 1000, 0.0).await;
    refused_for_held(&plain.claim(held_claim("p")).await.unwrap_err());
    // An override.
    let mut small = server.client("small").await;
    small.claim(claim(NS, "s", "{}")).await.unwrap();
    let small_held = hold(&server, "small", "s", 1, 1000.0).await;
    refused_for_held(&small.claim(held_claim("s")).await.unwrap_err());
    // `0` turns the bound off for a tenant: past the default's 1000.
    let mut free = server.client("free").await;
    free.claim(claim(NS, "f", "{}")).await.unwrap();
    let free_held = hold(&server, "free", "f", 1001, 1001.0).await;
    for (c, key) in [(&mut plain, "p"), (&mut small, "s"), (&mut free, "f")] {
        c.complete(complete(NS, key, 1, result(200, b"done")))
            .await
            .unwrap();
    }
    for task in plain_held.into_iter().chain(small_held).chain(free_held) {
        let answer = task.await.unwrap().unwrap().into_inner();
        assert_eq!(outcome(&answer), ClaimOutcome::Completed);
    }
    let (_, help, _) = run_cli(&["serve", "--help"]);
    assert!(
        help.contains("--tenant-held-claims") && help.contains("[default: 1000]"),
        "{help}"
    );
}
