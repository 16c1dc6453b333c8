//! Concurrency, crash durability, tenant isolation, bad input (`bad_input`), process lifecycle and
//! the operator CLI (`operator_cli`), against the real binary.

mod bad_input;
mod operator_cli;

use oncekey_api::v1::{self, ClaimOutcome, RecordStatus};
use oncekey_client::ConnectOptions;
use oncekey_tests::*;
use sha2::Digest;
use std::time::Duration;
use tonic::Code;

const NS: &str = "email.send";

#[tokio::test]
async fn sixty_four_concurrent_claims_one_acquired() {
    let server = Server::start(&[]);
    let c = server.client("acme").await;
    let calls: Vec<_> = (0..64)
        .map(|i| {
            let mut c = c.clone();
            tokio::spawn(async move {
                let req = v1::ClaimRequest {
                    owner: format!("worker-{i}"),
                    ..claim(NS, "hot", r#"{"to":"a@b.c"}"#)
                };
                c.claim(req).await.unwrap().into_inner()
            })
        })
        .collect();
    let mut acquired = 0;
    for call in calls {
        let reply = call.await.unwrap();
        match outcome(&reply) {
            ClaimOutcome::Acquired => acquired += 1,
            ClaimOutcome::InProgress => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(acquired, 1);
    let mut c = c;
    let record = c
        .lookup(lookup(NS, "hot"))
        .await
        .unwrap()
        .into_inner()
        .record
        .unwrap();
    assert_eq!((record.fencing_token, record.dedup_hits), (1, 63));
}

#[tokio::test]
async fn kill_nine_after_complete_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut server = Server::start_on(&data, &[]);
    let mut c = server.client("acme").await;
    for i in 0..50 {
        let key = format!("k-{i}");
        c.claim(claim(NS, &key, "{}")).await.unwrap();
        c.complete(complete(
            NS,
            &key,
            1,
            result(200, format!("result {i}").as_bytes()),
        ))
        .await
        .unwrap();
    }
    // A dedup hit (a non-fsynced counter write) just before the kill must not harm the record.
    c.claim(claim(NS, "k-0", "{}")).await.unwrap();
    server.kill9();

    let server = Server::start_on(&data, &[]);
    let mut c = server.client("acme").await;
    for i in 0..50 {
        let key = format!("k-{i}");
        let replay = c.claim(claim(NS, &key, "{}")).await.unwrap().into_inner();
        assert_eq!(outcome(&replay), ClaimOutcome::Completed, "{key}");
        let record = replay.record.unwrap();
        assert_eq!(status(&record), RecordStatus::Succeeded);
        assert_eq!(
            record.result.unwrap().body,
            format!("result {i}").as_bytes()
        );
    }
}

#[tokio::test]
async fn tenants_are_isolated_by_token() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    let hash = |t: &str| hex::encode(sha2::Sha256::digest(t.as_bytes()));
    std::fs::write(
        &tokens,
        format!(
            "# two tenants\nacme:{}\nglobex:{}\n",
            hash("token-a"),
            hash("token-b")
        ),
    )
    .unwrap();
    let server = Server::start(&["--tokens-file", tokens.to_str().unwrap()]);
    let mut a = server.client_with_token("token-a").await;
    let mut b = server.client_with_token("token-b").await;

    let ra = a
        .claim(claim(NS, "shared-key", r#"{"x":1}"#))
        .await
        .unwrap()
        .into_inner();
    // Same namespace and key, other tenant, other payload: a different record.
    let rb = b
        .claim(claim(NS, "shared-key", r#"{"x":2}"#))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (outcome(&ra), outcome(&rb)),
        (ClaimOutcome::Acquired, ClaimOutcome::Acquired)
    );
    a.complete(complete(
        NS,
        "shared-key",
        1,
        result(200, b"secret of acme"),
    ))
    .await
    .unwrap();
    let seen_by_b = b
        .lookup(lookup(NS, "shared-key"))
        .await
        .unwrap()
        .into_inner()
        .record
        .unwrap();
    assert_eq!(status(&seen_by_b), RecordStatus::Processing);
    assert!(seen_by_b.result.is_none());
    let err = b.lookup(lookup(NS, "only-acme")).await.unwrap_err();
    assert_eq!(reason(&err), "NOT_FOUND");

    let mut anonymous = server.connect(ConnectOptions::default()).await;
    let err = anonymous.claim(claim(NS, "x", "{}")).await.unwrap_err();
    assert_eq!(
        (err.code(), reason(&err).as_str()),
        (Code::Unauthenticated, "UNAUTHENTICATED")
    );
    let mut wrong = server.client_with_token("token-c").await;
    assert_eq!(
        wrong
            .lookup(lookup(NS, "shared-key"))
            .await
            .unwrap_err()
            .code(),
        Code::Unauthenticated
    );
    let mut spoof = server
        .connect(ConnectOptions {
            token: Some("token-b".into()),
            tenant: Some("acme".into()),
            ..Default::default()
        })
        .await;
    let err = spoof.lookup(lookup(NS, "shared-key")).await.unwrap_err();
    assert_eq!(
        (err.code(), reason(&err).as_str()),
        (Code::PermissionDenied, "PERMISSION_DENIED")
    );
    assert!(!err.message().contains("secret"));
}

#[tokio::test]
async fn sigterm_drains_and_exits_zero() {
    let mut server = Server::start(&[]);
    let mut c = server.client("acme").await;
    c.claim(claim(NS, "before-stop", "{}")).await.unwrap();
    // An RPC in flight at SIGTERM (a Claim waiting on the in-flight operation) still gets its answer.
    let mut waiter = c.clone();
    let waiting = tokio::spawn(async move {
        waiter
            .claim(v1::ClaimRequest {
                wait: Some(ms(30_000)),
                ..claim(NS, "before-stop", "{}")
            })
            .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let status = tokio::task::spawn_blocking(move || {
        let status = server.terminate(Duration::from_secs(20));
        (status, server.stderr())
    });
    let answer = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("answered during drain")
        .unwrap();
    assert_eq!(
        outcome(&answer.expect("an OK answer").into_inner()),
        ClaimOutcome::InProgress
    );
    let (status, stderr) = status.await.unwrap();
    assert_eq!(status.code(), Some(0), "stderr:\n{stderr}");
    assert!(
        stderr.contains("draining") && stderr.contains("stopped"),
        "{stderr}"
    );
}

#[tokio::test]
async fn configuration_errors_exit_64_naming_the_flag() {
    let (code, _, err) = run_cli(&[
        "serve",
        "--listen",
        "0.0.0.0:0",
        "--admin-listen",
        "127.0.0.1:0",
    ]);
    assert_eq!(code, 64, "{err}");
    assert!(
        err.contains("--tokens-file") && err.contains("--allow-unauthenticated"),
        "{err}"
    );
    let (code, _, err) = run_cli(&["serve", "--default-lease", "2h"]);
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("--default-lease"), "{err}");
    let (code, _, err) = run_cli(&["serve", "--embedded-cache-mib", "8"]);
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("--embedded-cache-mib"), "{err}");
    let (code, _, err) = run_cli(&[
        "serve",
        "--tokens-file",
        "/nonexistent/tokens",
        "--admin-listen",
        "127.0.0.1:0",
        "--listen",
        "127.0.0.1:0",
    ]);
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("--tokens-file"), "{err}");
}
