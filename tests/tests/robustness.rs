//! Concurrency, crash durability, tenant isolation, bad input and process lifecycle, against the
//! real binary.

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
async fn bad_input_names_the_field_and_changes_nothing() {
    let server = Server::start(&["--max-result-bytes", "1024"]);
    let mut c = server.client("acme").await;
    let base = || claim(NS, "k", "{}");
    let cases: Vec<(v1::ClaimRequest, &str, &str)> = vec![
        (
            v1::ClaimRequest {
                namespace: "Bad NS".into(),
                ..base()
            },
            "INVALID_FIELD",
            "namespace",
        ),
        (
            v1::ClaimRequest {
                key: String::new(),
                ..base()
            },
            "INVALID_FIELD",
            "key",
        ),
        (
            v1::ClaimRequest {
                key: "a\u{7}b".into(),
                ..base()
            },
            "INVALID_FIELD",
            "key",
        ),
        (
            v1::ClaimRequest {
                key: "k".repeat(257),
                ..base()
            },
            "TOO_LARGE",
            "key",
        ),
        (
            v1::ClaimRequest {
                arguments: None,
                ..base()
            },
            "INVALID_FIELD",
            "fingerprint",
        ),
        (
            v1::ClaimRequest {
                arguments: Some(v1::claim_request::Arguments::Fingerprint(vec![0; 16])),
                ..base()
            },
            "INVALID_FIELD",
            "fingerprint",
        ),
        (claim(NS, "k", "{\"a\":"), "INVALID_FIELD", "payload_json"),
        (
            claim(NS, "k", r#"{"a":1,"a":2}"#),
            "INVALID_FIELD",
            "payload_json",
        ),
        (
            v1::ClaimRequest {
                lease_ttl: Some(ms(500)),
                ..base()
            },
            "INVALID_FIELD",
            "lease_ttl",
        ),
        (
            v1::ClaimRequest {
                lease_ttl: Some(ms(3_600_001)),
                ..base()
            },
            "INVALID_FIELD",
            "lease_ttl",
        ),
        (
            v1::ClaimRequest {
                retention: Some(ms(59_000)),
                ..base()
            },
            "INVALID_FIELD",
            "retention",
        ),
        (
            v1::ClaimRequest {
                wait: Some(ms(61_000)),
                ..base()
            },
            "INVALID_FIELD",
            "wait",
        ),
        // A nanosecond over the maximum is over it.
        (
            v1::ClaimRequest {
                lease_ttl: Some(prost_types::Duration {
                    seconds: 3600,
                    nanos: 1,
                }),
                ..base()
            },
            "INVALID_FIELD",
            "lease_ttl",
        ),
        (
            v1::ClaimRequest {
                wait: Some(prost_types::Duration {
                    seconds: 60,
                    nanos: 1,
                }),
                ..base()
            },
            "INVALID_FIELD",
            "wait",
        ),
        (
            v1::ClaimRequest {
                semantics: 42,
                ..base()
            },
            "INVALID_FIELD",
            "semantics",
        ),
        (
            v1::ClaimRequest {
                owner: "o".repeat(257),
                ..base()
            },
            "TOO_LARGE",
            "owner",
        ),
        (
            v1::ClaimRequest {
                parent: Some(v1::OperationRef {
                    namespace: "ok".into(),
                    key: String::new(),
                }),
                ..base()
            },
            "INVALID_FIELD",
            "parent.key",
        ),
    ];
    for (req, want_reason, want_field) in cases {
        let err = c.claim(req).await.unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{want_field}: {err:?}");
        assert_eq!(
            (reason(&err).as_str(), bad_field(&err).as_str()),
            (want_reason, want_field)
        );
    }
    assert_eq!(
        c.lookup(lookup(NS, "k")).await.unwrap_err().code(),
        Code::NotFound,
        "nothing was created"
    );

    c.claim(base()).await.unwrap();
    let big = c
        .complete(complete(NS, "k", 1, result(200, &[7; 1025])))
        .await
        .unwrap_err();
    assert_eq!(
        (reason(&big).as_str(), bad_field(&big).as_str()),
        ("TOO_LARGE", "result.body")
    );
    let mut many = result(200, b"");
    many.metadata = (0..33).map(|i| (format!("k{i}"), "v".into())).collect();
    let err = c.complete(complete(NS, "k", 1, many)).await.unwrap_err();
    assert_eq!(bad_field(&err), "result.metadata");
    let err = c
        .complete(complete(NS, "k", 0, result(200, b"")))
        .await
        .unwrap_err();
    assert_eq!(bad_field(&err), "lease_token");
    let err = c
        .fail(fail(NS, "k", 1, v1::Disposition::Unspecified, "x"))
        .await
        .unwrap_err();
    assert_eq!(bad_field(&err), "disposition");
    let mut huge = fail(NS, "k", 1, v1::Disposition::Final, "x");
    huge.error.as_mut().unwrap().details = vec![0; 64 * 1024 + 1];
    assert_eq!(bad_field(&c.fail(huge).await.unwrap_err()), "error.details");
    let record = c
        .lookup(lookup(NS, "k"))
        .await
        .unwrap()
        .into_inner()
        .record
        .unwrap();
    assert_eq!(
        (status(&record), record.fencing_token),
        (RecordStatus::Processing, 1),
        "still untouched"
    );

    let mut bad_tenant = server.client("not a tenant").await;
    assert_eq!(
        bad_tenant.lookup(lookup(NS, "k")).await.unwrap_err().code(),
        Code::InvalidArgument
    );
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

#[tokio::test]
async fn operator_cli_claims_completes_replays_and_looks_up() {
    let server = Server::start(&[]);
    let s = server.grpc.as_str();
    let (code, out, err) = run_cli(&[
        "claim",
        "billing.invoice",
        "inv-7",
        "--payload",
        r#"{"n":7}"#,
        "--server",
        s,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\"ACQUIRED\""), "{out}");
    let (code, _, err) = run_cli(&[
        "complete",
        "billing.invoice",
        "inv-7",
        "--lease-token",
        "1",
        "--code",
        "201",
        "--body",
        "sent",
        "--server",
        s,
    ]);
    assert_eq!(code, 0, "{err}");
    let (_, out, _) = run_cli(&[
        "claim",
        "billing.invoice",
        "inv-7",
        "--payload",
        r#"{ "n" : 7 }"#,
        "--server",
        s,
    ]);
    assert!(
        out.contains("\"COMPLETED\"") && out.contains("\"sent\""),
        "{out}"
    );
    let (_, out, _) = run_cli(&["lookup", "billing.invoice", "inv-7", "--server", s]);
    assert!(
        out.contains("\"SUCCEEDED\"") && out.contains("\"dedup_hits\": 1"),
        "{out}"
    );
    let (code, _, err) = run_cli(&[
        "claim",
        "billing.invoice",
        "inv-7",
        "--payload",
        "{}",
        "--server",
        s,
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("KEY_REUSED"), "{err}");
    let (code, out, err) = run_cli(&[
        "lookup",
        "billing.invoice",
        "inv-7",
        "--history",
        "--server",
        s,
    ]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("billing.invoice/inv-7  SUCCEEDED"),
        "{out}"
    );
    assert!(
        lines[1].contains("CLAIM") && lines[1].contains("ACQUIRED"),
        "{out}"
    );
    assert!(
        lines[2].contains("COMPLETE") && lines[2].contains("SUCCEEDED"),
        "{out}"
    );
    assert!(
        lines[3].contains("CLAIM") && lines[3].contains("COMPLETED"),
        "{out}"
    );
    let (code, out, err) = run_cli(&["health", "--server", s]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\"SERVING\""), "{out}");
    let (code, out, _) = run_cli(&["token", "new", "--tenant", "acme"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("token: okt_") && out.contains("tokens-file line: acme:"),
        "{out}"
    );
}

#[tokio::test]
async fn operator_cli_speaks_tls_and_mutual_tls() {
    let certs = tempfile::tempdir().unwrap();
    make_certificates(certs.path());
    let path = |name: &str| certs.path().join(name).to_str().unwrap().to_owned();
    let server = Server::start(&[
        "--tls-cert",
        &path("server.pem"),
        "--tls-key",
        &path("server.key"),
        "--tls-client-ca",
        &path("ca.pem"),
    ]);
    let url = server.grpc.replace("http://", "https://");
    let (ca, cert, key) = (path("ca.pem"), path("client.pem"), path("client.key"));
    let tls = [
        "--tls-ca",
        &ca,
        "--tls-client-cert",
        &cert,
        "--tls-client-key",
        &key,
        "--tls-domain",
        "localhost",
    ];

    let mut health = vec!["health", "--server", &url];
    health.extend(tls);
    let (code, out, err) = run_cli(&health);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("SERVING"), "{out}");
    let mut claim_args = vec!["claim", "tls.ns", "k", "--payload", "{}", "--server", &url];
    claim_args.extend(tls);
    let (code, out, err) = run_cli(&claim_args);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\"ACQUIRED\""), "{out}");

    // Without a client certificate the server refuses the handshake; without TLS too.
    let (code, _, _) = run_cli(&[
        "health",
        "--server",
        &url,
        "--tls-ca",
        &ca,
        "--tls-domain",
        "localhost",
    ]);
    assert_ne!(code, 0);
    let (code, _, _) = run_cli(&["health", "--server", &server.grpc]);
    assert_ne!(code, 0);
}
