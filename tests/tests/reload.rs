//! Renewed certificates and rotated tokens are picked up from the files alone, with no SIGHUP:
//! the real server, its TLS and tokens files mounted the way kubelet mounts Secrets (a renewal
//! is a new directory and an atomic swap of the `..data` symlink), checked every 200 ms. New
//! connections get the new certificate, the new token authenticates and the old one no longer
//! does; a broken renewal keeps what is served and counts a failure; the certificate's expiry is
//! exported.

use oncekey_api::v1::ClaimOutcome;
use oncekey_client::{ConnectOptions, TlsOptions};
use oncekey_tests::*;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const NS: &str = "reload.test";
/// How long a change may take to be picked up: generous, for a loaded machine.
const PATIENCE: Duration = Duration::from_secs(60);

fn read(dir: &Path, name: &str) -> Vec<u8> {
    std::fs::read(dir.join(name)).unwrap()
}

fn token_line(tenant: &str, token: &str) -> Vec<u8> {
    use sha2::Digest;
    format!("{tenant}:{}\n", hex::encode(sha2::Sha256::digest(token))).into_bytes()
}

/// One Claim on a new connection trusting the CA in `ca_dir`, with `token`.
async fn try_claim(
    server: &Server,
    ca_dir: &Path,
    token: &str,
    key: &str,
) -> Result<ClaimOutcome, String> {
    let mut tls = TlsOptions::from_files(ca_dir.join("ca.pem"), None).unwrap();
    tls.domain = Some("localhost".into());
    let url = server.grpc.replace("http://", "https://");
    let client = oncekey_client::Client::connect(
        &url,
        ConnectOptions {
            token: Some(token.into()),
            tls: Some(tls),
            retry: oncekey_client::RetryPolicy::never(),
            connect_timeout: Some(Duration::from_secs(5)),
            timeout: Some(Duration::from_secs(5)),
            ..Default::default()
        },
    )
    .await
    .map_err(|e| e.to_string())?;
    client
        .ledger()
        .claim(claim(NS, key, "{}"))
        .await
        .map(|r| outcome(&r.into_inner()))
        .map_err(|e| e.to_string())
}

async fn metrics(server: &Server) -> String {
    let (code, text) = http_get(&server.admin, "/metrics").await;
    assert_eq!(code, 200);
    text
}

/// Waits until `check` holds on the server's metrics.
async fn until_metrics(server: &Server, what: &str, check: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let text = metrics(server).await;
        if check(&text) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not seen within {PATIENCE:?}\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn days_from_now(seconds: f64) -> f64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    (seconds - now) / 86_400.0
}

#[tokio::test]
async fn renewed_certificate_and_rotated_tokens_load_without_sighup() {
    let (first, renewed) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    make_certificates_valid_for(first.path(), 3);
    make_certificates_valid_for(renewed.path(), 30); // another CA: clients tell them apart
    let mut tls = SecretMount::new(&[
        ("tls.crt", &read(first.path(), "server.pem")),
        ("tls.key", &read(first.path(), "server.key")),
    ]);
    let mut tokens = SecretMount::new(&[("tokens", &token_line("acme", "first-token"))]);
    let (cert, key, tokens_file) = (
        tls.path("tls.crt"),
        tls.path("tls.key"),
        tokens.path("tokens"),
    );
    let server = Server::start(&[
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
        "--tokens-file",
        tokens_file.to_str().unwrap(),
        "--reload-check-interval",
        "200ms",
    ]);
    assert_eq!(
        try_claim(&server, first.path(), "first-token", "k1").await,
        Ok(ClaimOutcome::Acquired)
    );
    let text = metrics(&server).await;
    let expiry = metric(&text, "oncekey_tls_certificate_expiry_seconds").expect("expiry exported");
    assert!((days_from_now(expiry) - 3.0).abs() < 0.1, "{expiry}");

    // cert-manager renews the certificate; an operator rotates the token. No SIGHUP.
    tls.update(&[
        ("tls.crt", &read(renewed.path(), "server.pem")),
        ("tls.key", &read(renewed.path(), "server.key")),
    ]);
    tokens.update(&[("tokens", &token_line("acme", "second-token"))]);
    let text = until_metrics(&server, "both reloads", |t| {
        metric(t, r#"oncekey_reloads_total{what="tls"}"#) == Some(1.0)
            && metric(t, r#"oncekey_reloads_total{what="tokens"}"#) == Some(1.0)
    })
    .await;
    let expiry = metric(&text, "oncekey_tls_certificate_expiry_seconds").unwrap();
    assert!((days_from_now(expiry) - 30.0).abs() < 0.1, "{expiry}");
    assert_eq!(
        try_claim(&server, renewed.path(), "second-token", "k2").await,
        Ok(ClaimOutcome::Acquired)
    );
    let old_cert = try_claim(&server, first.path(), "second-token", "k3").await;
    assert!(
        old_cert.is_err(),
        "the replaced certificate is still served: {old_cert:?}"
    );
    let old_token = try_claim(&server, renewed.path(), "first-token", "k4").await;
    assert!(
        old_token
            .as_ref()
            .is_err_and(|e| e.contains("Unauthenticated") || e.contains("unknown bearer token")),
        "the rotated-out token still authenticates: {old_token:?}"
    );

    // A broken renewal and a broken tokens file: refused, counted, the last good ones kept.
    tls.update(&[
        ("tls.crt", b"not a certificate\n"),
        ("tls.key", &read(renewed.path(), "server.key")),
    ]);
    tokens.update(&[("tokens", b"acme:not-a-hash\n")]);
    until_metrics(&server, "both failures", |t| {
        metric(t, r#"oncekey_reload_failures_total{what="tls"}"#) == Some(1.0)
            && metric(t, r#"oncekey_reload_failures_total{what="tokens"}"#) == Some(1.0)
    })
    .await;
    assert_eq!(
        try_claim(&server, renewed.path(), "second-token", "k5").await,
        Ok(ClaimOutcome::Acquired)
    );
    let text = metrics(&server).await;
    assert_eq!(
        metric(&text, "oncekey_tls_certificate_expiry_seconds"),
        Some(expiry)
    );
    assert!(server
        .stderr()
        .contains("TLS reload failed; keeping the previous certificate"));
}
