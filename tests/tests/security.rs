//! Security, end to end against the real binary: tenant isolation for every RPC, unknown / missing /
//! revoked tokens (SIGHUP reload), TLS and mutual TLS with certificates made for the run, and no
//! token, stored body or raw key in the server's logs (RUST_LOG=debug) or in error messages.

use oncekey_api::v1::{self, ClaimOutcome, RecordStatus};
use oncekey_client::{ConnectOptions, LedgerRpc, TlsOptions};
use oncekey_tests::*;
use sha2::Digest;
use std::path::Path;
use std::time::{Duration, Instant};
use tonic::Code;

const NS: &str = "payments.charge";
// Distinctive markers: none may ever appear in a log line or an error message.
const TOKEN_A: &str = "tok-A-7c1f9e3b5d-NEVERLOGGED";
const TOKEN_B: &str = "tok-B-2a8d4f6c0e-NEVERLOGGED";
const TOKEN_B2: &str = "tok-B2-9f0e1d2c3b-NEVERLOGGED";
const KEY: &str = "rawkey-5e7a91c3-NEVERLOGGED";
const ONLY_A: &str = "rawkey-only-acme-3b8d-NEVERLOGGED";
const BODY_A: &[u8] = b"body-of-acme-4d2c8e-NEVERLOGGED";
const BODY_B: &[u8] = b"body-of-globex-1f6a0b-NEVERLOGGED";
const PAYLOAD_MARK: &str = "payload-secret-6e3f-NEVERLOGGED";

fn hash(token: &str) -> String {
    hex::encode(sha2::Sha256::digest(token.as_bytes()))
}

fn write_tokens(path: &Path, entries: &[(&str, &str)]) {
    let mut text = String::from("# tenants\n");
    for (tenant, token) in entries {
        text.push_str(&format!("{tenant}:{}\n", hash(token)));
    }
    std::fs::write(path, text).unwrap();
}

fn sighup(server: &Server) {
    let ok = std::process::Command::new("kill")
        .args(["-HUP", &server.pid().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -HUP");
}

/// Collects every error's code, message and details so they can be searched for markers.
#[derive(Default)]
struct Errors(Vec<String>);

impl Errors {
    fn keep(&mut self, e: &tonic::Status) -> tonic::Status {
        self.0.push(format!(
            "{:?} {} {}",
            e.code(),
            e.message(),
            String::from_utf8_lossy(e.details())
        ));
        e.clone()
    }
}

async fn record(c: &mut LedgerRpc, key: &str) -> v1::Record {
    c.lookup(v1::LookupRequest {
        namespace: NS.into(),
        key: key.into(),
        include_history: true,
    })
    .await
    .unwrap()
    .into_inner()
    .record
    .unwrap()
}

async fn history(c: &mut LedgerRpc, key: &str) -> Vec<v1::RecordEvent> {
    c.lookup(v1::LookupRequest {
        namespace: NS.into(),
        key: key.into(),
        include_history: true,
    })
    .await
    .unwrap()
    .into_inner()
    .history
}

fn keep_alive(key: &str, token: u64) -> v1::KeepAliveRequest {
    v1::KeepAliveRequest {
        namespace: NS.into(),
        key: key.into(),
        lease_token: token,
        lease_ttl: Some(ms(30_000)),
    }
}

#[tokio::test]
async fn tenants_are_isolated_for_every_rpc_and_nothing_secret_is_logged() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    write_tokens(&tokens, &[("acme", TOKEN_A), ("globex", TOKEN_B)]);
    let server = Server::start_with_env(
        &dir.path().join("data"),
        &["--tokens-file", tokens.to_str().unwrap()],
        &[("RUST_LOG", "debug")],
    );
    let mut a = server.client_with_token(TOKEN_A).await;
    let mut b = server.client_with_token(TOKEN_B).await;
    let mut errors = Errors::default();
    let payload_a = format!(r#"{{"secret":"{PAYLOAD_MARK}","x":1}}"#);
    let payload_b = format!(r#"{{"secret":"{PAYLOAD_MARK}","x":2}}"#);

    // The same key under two tenants: two independent records, each acquired with token 1.
    let ra = a
        .claim(claim(NS, KEY, &payload_a))
        .await
        .unwrap()
        .into_inner();
    let rb = b
        .claim(claim(NS, KEY, &payload_b))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (outcome(&ra), outcome(&rb)),
        (ClaimOutcome::Acquired, ClaimOutcome::Acquired)
    );
    assert_eq!((ra.lease.unwrap().token, rb.lease.unwrap().token), (1, 1));
    a.complete(complete(NS, KEY, 1, result(200, BODY_A)))
        .await
        .unwrap();
    let seen_by_b = record(&mut b, KEY).await;
    assert_eq!(status(&seen_by_b), RecordStatus::Processing);
    assert!(seen_by_b.result.is_none());
    b.complete(complete(NS, KEY, 1, result(201, BODY_B)))
        .await
        .unwrap();
    assert_eq!(record(&mut a, KEY).await.result.unwrap().body, BODY_A);
    assert_eq!(record(&mut b, KEY).await.result.unwrap().body, BODY_B);
    // B's replay is B's own; A's replay is A's own.
    let replay = b
        .claim(claim(NS, KEY, &payload_b))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(replay.record.unwrap().result.unwrap().body, BODY_B);

    // A key only A has: B can neither read, renew, keep alive, complete nor fail it.
    a.claim(claim(NS, ONLY_A, &payload_a)).await.unwrap();
    let before = record(&mut a, ONLY_A).await;
    let before_history = history(&mut a, ONLY_A).await;
    for include_history in [false, true] {
        let e = b
            .lookup(v1::LookupRequest {
                namespace: NS.into(),
                key: ONLY_A.into(),
                include_history,
            })
            .await
            .unwrap_err();
        let e = errors.keep(&e);
        assert_eq!(
            (e.code(), reason(&e).as_str()),
            (Code::NotFound, "NOT_FOUND")
        );
    }
    let e = b
        .renew(v1::RenewRequest {
            namespace: NS.into(),
            key: ONLY_A.into(),
            lease_token: 1,
            lease_ttl: Some(ms(60_000)),
        })
        .await
        .unwrap_err();
    assert_eq!(reason(&errors.keep(&e)), "LEASE_LOST");
    let stream = b
        .keep_alive(tokio_stream::iter(vec![keep_alive(ONLY_A, 1)]))
        .await;
    let e = match stream {
        Err(e) => e,
        Ok(mut s) => s.get_mut().message().await.unwrap_err(),
    };
    assert_eq!(reason(&errors.keep(&e)), "LEASE_LOST");
    let e = b
        .complete(complete(NS, ONLY_A, 1, result(200, BODY_B)))
        .await
        .unwrap_err();
    assert_eq!(reason(&errors.keep(&e)), "LEASE_LOST");
    // Every disposition, ABANDON too: B holds no lease on the key (its tenant has no record).
    for disposition in [
        v1::Disposition::Retryable,
        v1::Disposition::Final,
        v1::Disposition::Abandon,
    ] {
        let e = b
            .fail(fail(NS, ONLY_A, 1, disposition, "x"))
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::FailedPrecondition, "{disposition:?}");
        assert_eq!(reason(&errors.keep(&e)), "LEASE_LOST");
    }
    // B's Claim of the same key creates B's own record; A's stays as it was.
    let own = b
        .claim(claim(NS, ONLY_A, &payload_b))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(outcome(&own), ClaimOutcome::Acquired);
    assert_eq!(own.record.as_ref().unwrap().dedup_hits, 0);
    assert_eq!(record(&mut a, ONLY_A).await, before, "A's record unchanged");
    assert_eq!(history(&mut a, ONLY_A).await, before_history);
    // And A's holder still owns its lease.
    a.complete(complete(NS, ONLY_A, 1, result(200, BODY_A)))
        .await
        .unwrap();

    // Missing and unknown tokens.
    let mut anonymous = server.connect(ConnectOptions::default()).await;
    let e = anonymous
        .claim(claim(NS, KEY, &payload_a))
        .await
        .unwrap_err();
    let e = errors.keep(&e);
    assert_eq!(
        (e.code(), reason(&e).as_str()),
        (Code::Unauthenticated, "UNAUTHENTICATED")
    );
    let mut unknown = server.client_with_token("tok-unknown-NEVERLOGGED").await;
    let e = unknown.lookup(lookup(NS, KEY)).await.unwrap_err();
    let e = errors.keep(&e);
    assert_eq!(
        (e.code(), reason(&e).as_str()),
        (Code::Unauthenticated, "UNAUTHENTICATED")
    );
    let mut tenant_header_only = server
        .connect(ConnectOptions {
            tenant: Some("acme".into()),
            ..Default::default()
        })
        .await;
    let e = tenant_header_only
        .lookup(lookup(NS, KEY))
        .await
        .unwrap_err();
    assert_eq!(errors.keep(&e).code(), Code::Unauthenticated);

    // Revocation: globex's token is replaced; after SIGHUP the old one is refused, the new one works.
    write_tokens(&tokens, &[("acme", TOKEN_A), ("globex", TOKEN_B2)]);
    sighup(&server);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match b.lookup(lookup(NS, KEY)).await {
            Err(e) if e.code() == Code::Unauthenticated => {
                assert_eq!(reason(&errors.keep(&e)), "UNAUTHENTICATED");
                break;
            }
            other => assert!(
                Instant::now() < deadline,
                "revoked token still accepted: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut b2 = server.client_with_token(TOKEN_B2).await;
    assert_eq!(record(&mut b2, KEY).await.result.unwrap().body, BODY_B);
    assert_eq!(record(&mut a, KEY).await.result.unwrap().body, BODY_A);

    // No secret in any error message, nor in the debug log.
    for marker in [
        TOKEN_A,
        TOKEN_B,
        TOKEN_B2,
        "tok-unknown",
        KEY,
        ONLY_A,
        PAYLOAD_MARK,
    ] {
        for e in &errors.0 {
            assert!(!e.contains(marker), "error carries {marker}: {e}");
        }
    }
    for body in [BODY_A, BODY_B] {
        let body = std::str::from_utf8(body).unwrap();
        for e in &errors.0 {
            assert!(!e.contains(body), "error carries a body: {e}");
        }
    }
    let log = server.stderr();
    assert!(log.contains("DEBUG"), "debug logging is on");
    for marker in ["NEVERLOGGED", &hash(TOKEN_A), &hash(TOKEN_B)] {
        let line = log.lines().find(|l| l.contains(marker));
        assert!(line.is_none(), "the log carries {marker}: {line:?}");
    }
}

fn tls_server(dir: &Path, client_ca: bool) -> Server {
    let path = |name: &str| dir.join(name).to_str().unwrap().to_owned();
    let mut flags = vec![
        "--tls-cert".to_owned(),
        path("server.pem"),
        "--tls-key".to_owned(),
        path("server.key"),
    ];
    if client_ca {
        flags.extend(["--tls-client-ca".to_owned(), path("ca.pem")]);
    }
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    Server::start(&flags)
}

fn tls_options(ca_dir: &Path, identity_dir: Option<&Path>) -> TlsOptions {
    let identity = identity_dir.map(|d| (d.join("client.pem"), d.join("client.key")));
    let mut tls = TlsOptions::from_files(
        ca_dir.join("ca.pem"),
        identity.as_ref().map(|(c, k)| (c.as_path(), k.as_path())),
    )
    .unwrap();
    tls.domain = Some("localhost".into());
    tls
}

/// Connects and makes one Claim; `Err` when the connection or the call is refused.
async fn try_claim(url: &str, tls: Option<TlsOptions>, key: &str) -> Result<ClaimOutcome, String> {
    let client = oncekey_client::Client::connect(
        url,
        ConnectOptions {
            tenant: Some("acme".into()),
            tls,
            retry: oncekey_client::RetryPolicy::never(),
            connect_timeout: Some(Duration::from_secs(3)),
            timeout: Some(Duration::from_secs(3)),
            ..Default::default()
        },
    )
    .await
    .map_err(|e| e.to_string())?;
    let mut rpc = client.ledger();
    rpc.claim(claim(NS, key, "{}"))
        .await
        .map(|r| outcome(&r.into_inner()))
        .map_err(|e| e.to_string())
}

#[tokio::test]
async fn tls_and_mutual_tls_end_to_end() {
    let certs = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    make_certificates(certs.path());
    make_certificates(other.path()); // another CA: its client certificate must be refused

    // TLS: a plaintext client gets nothing, a client trusting the CA is served.
    let server = tls_server(certs.path(), false);
    let https = server.grpc.replace("http://", "https://");
    let plain = try_claim(&server.grpc, None, "plain").await;
    assert!(
        plain.is_err(),
        "plaintext accepted by a TLS server: {plain:?}"
    );
    assert_eq!(
        try_claim(&https, Some(tls_options(certs.path(), None)), "tls").await,
        Ok(ClaimOutcome::Acquired)
    );
    let untrusted = try_claim(&https, Some(tls_options(other.path(), None)), "tls-x").await;
    assert!(
        untrusted.is_err(),
        "client trusted a foreign CA: {untrusted:?}"
    );
    drop(server);

    // mTLS: no client certificate or one from another CA refused; a valid one accepted.
    let server = tls_server(certs.path(), true);
    let https = server.grpc.replace("http://", "https://");
    let anonymous = try_claim(&https, Some(tls_options(certs.path(), None)), "m-anon").await;
    assert!(
        anonymous.is_err(),
        "mTLS accepted no certificate: {anonymous:?}"
    );
    let mut foreign = tls_options(certs.path(), Some(other.path()));
    foreign.domain = Some("localhost".into());
    let foreign = try_claim(&https, Some(foreign), "m-foreign").await;
    assert!(
        foreign.is_err(),
        "mTLS accepted a foreign certificate: {foreign:?}"
    );
    assert_eq!(
        try_claim(
            &https,
            Some(tls_options(certs.path(), Some(certs.path()))),
            "m-ok"
        )
        .await,
        Ok(ClaimOutcome::Acquired)
    );
    let plain = try_claim(&server.grpc, None, "m-plain").await;
    assert!(
        plain.is_err(),
        "plaintext accepted by an mTLS server: {plain:?}"
    );
    // The refused attempts did not take the server down.
    assert_eq!(
        try_claim(
            &https,
            Some(tls_options(certs.path(), Some(certs.path()))),
            "m-ok-2"
        )
        .await,
        Ok(ClaimOutcome::Acquired)
    );
}

/// Waits until the server's log has a line containing `text`, and returns that line.
async fn log_line(server: &Server, text: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(line) = server.stderr().lines().find(|l| l.contains(text)) {
            return line.to_owned();
        }
        assert!(Instant::now() < deadline, "no log line with {text:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A renewed certificate is served to new connections after SIGHUP, without a restart; a broken
/// one is refused with the reason and the previous certificate kept.
#[tokio::test]
async fn tls_certificate_reloads_on_sighup() {
    let (first, second) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    make_certificates(first.path());
    make_certificates(second.path()); // the renewal: another CA, so clients tell them apart
    let live = tempfile::tempdir().unwrap();
    let install = |from: &Path| {
        for name in ["server.pem", "server.key"] {
            std::fs::copy(from.join(name), live.path().join(name)).unwrap();
        }
    };
    install(first.path());
    let server = tls_server(live.path(), false);
    let https = server.grpc.replace("http://", "https://");
    let trusting = |dir: &Path| Some(tls_options(dir, None));
    assert_eq!(
        try_claim(&https, trusting(first.path()), "reload-1").await,
        Ok(ClaimOutcome::Acquired)
    );

    install(second.path());
    sighup(&server);
    log_line(&server, "TLS certificate reloaded").await;
    assert_eq!(
        try_claim(&https, trusting(second.path()), "reload-2").await,
        Ok(ClaimOutcome::Acquired)
    );
    let old = try_claim(&https, trusting(first.path()), "reload-3").await;
    assert!(
        old.is_err(),
        "the replaced certificate is still served: {old:?}"
    );

    std::fs::write(live.path().join("server.pem"), "not a certificate\n").unwrap();
    sighup(&server);
    let line = log_line(&server, "TLS reload failed").await;
    assert!(
        line.contains("--tls-cert"),
        "the log does not name the file: {line}"
    );
    assert_eq!(
        try_claim(&https, trusting(second.path()), "reload-4").await,
        Ok(ClaimOutcome::Acquired)
    );
}
