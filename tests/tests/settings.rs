//! Settings end to end against the real binary: a malformed flag value exits 64 naming the flag;
//! a tokens file that gives one token to two lines is refused (at startup: exit 64 naming the
//! lines; on SIGHUP: the previous tokens stay and the log says why); the `Bearer` scheme is matched
//! case-insensitively; a dev-mode server whose admin port listens beyond loopback says so; and the
//! test-only `ONCEKEY_TEST_*` knobs are variables, not flags: malformed ones exit 64 naming the
//! variable, and a server running with one says so.

use oncekey_api::v1::ClaimOutcome;
use oncekey_client::ConnectOptions;
use oncekey_tests::*;
use sha2::Digest;
use std::path::Path;
use std::time::{Duration, Instant};
use tonic::Code;

const NS: &str = "payments.charge";
const SHARED: &str = "tok-shared-0b7e2f-NEVERLOGGED";
const OTHER: &str = "tok-other-5c1a9d-NEVERLOGGED";

fn hash(token: &str) -> String {
    hex::encode(sha2::Sha256::digest(token.as_bytes()))
}

fn sighup(server: &Server) {
    let ok = std::process::Command::new("kill")
        .args(["-HUP", &server.pid().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -HUP");
}

/// Waits until the server's log has a line containing `text`, and returns that line.
async fn log_line(server: &Server, text: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(line) = server.stderr().lines().find(|l| l.contains(text)) {
            return line.to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "no log line with {text:?}:\n{}",
            server.stderr()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The tenant a token authenticates as: the tenant of the record its Claim creates is not
/// visible, so ask with the token and an explicit tenant header (PERMISSION_DENIED if it differs).
async fn is_tenant(server: &Server, token: &str, tenant: &str) -> bool {
    let mut c = server
        .connect(ConnectOptions {
            token: Some(token.into()),
            tenant: Some(tenant.into()),
            ..Default::default()
        })
        .await;
    match c.lookup(lookup(NS, "any")).await {
        Err(e) if e.code() == Code::NotFound => true,
        Err(e) if e.code() == Code::PermissionDenied => false,
        other => panic!("{other:?}"),
    }
}

/// Runs `oncekey serve` with `args` (on free ports) and waits for it to exit: (exit code, stderr).
/// A server that starts instead is stopped after 30 s, and its code is `None`.
fn serve_until_exit(args: &[&str]) -> (Option<i32>, String) {
    serve_until_exit_with_env(args, &[])
}

/// `serve_until_exit` with extra environment variables.
fn serve_until_exit_with_env(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let stderr = dir.path().join("stderr");
    let mut child = std::process::Command::new(binary())
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
        ])
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .args(args)
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (code, std::fs::read_to_string(stderr).unwrap_or_default())
}

fn write(path: &Path, lines: &[String]) {
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

/// Malformed values (addresses, numbers, enums) are bad configuration: one line naming the flag,
/// exit 64 (not clap's usage exit 2), from the command line or the environment.
#[test]
fn malformed_flag_values_exit_64_naming_the_flag() {
    for args in [
        &["serve", "--listen", "localhost"][..],
        &["serve", "--admin-listen", "127.0.0.1:99999"],
        &["serve", "--max-connections", "lots"],
        &["serve", "--store", "postgres"],
    ] {
        let (code, _, err) = run_cli(args);
        assert_eq!(code, 64, "{args:?}: {err}");
        assert!(err.contains(args[1]), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
    let out = std::process::Command::new(binary())
        .arg("serve")
        .env("ONCEKEY_LISTEN", "not-an-address")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{err}");
    assert!(err.contains("--listen"), "{err}");
    for flag in ["--max-connections", "--max-concurrent-streams"] {
        let (code, _, err) = run_cli(&["serve", flag, "0"]);
        assert_eq!(code, 64, "{err}");
        assert!(err.contains(flag), "{err}");
    }
}

#[tokio::test]
async fn one_token_under_two_tenants_is_refused_at_startup_and_on_reload() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    let tokens_arg = tokens.to_str().unwrap();
    let duplicated = [
        "# one token given to two tenants".to_owned(),
        format!("acme:{}", hash(SHARED)),
        format!("globex:{}", hash(OTHER)),
        String::new(),
        format!("globex:{}", hash(SHARED)),
    ];

    // At startup: exit 64, one line naming both lines, and neither the token nor its hash.
    write(&tokens, &duplicated);
    let (code, err) = serve_until_exit(&["--tokens-file", tokens_arg]);
    assert_eq!(code, Some(64), "{err}");
    assert!(err.contains("--tokens-file"), "{err}");
    assert!(err.contains("lines 2 and 5"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        !err.contains(&hash(SHARED)) && !err.contains(SHARED),
        "{err}"
    );

    // On SIGHUP: the server keeps the tokens it had, and the log says why.
    write(&tokens, &duplicated[..3]);
    let server = Server::start(&["--tokens-file", tokens_arg]);
    assert!(is_tenant(&server, SHARED, "acme").await);
    write(&tokens, &duplicated);
    sighup(&server);
    let line = log_line(&server, "tokens file reload failed").await;
    assert!(line.contains("lines 2 and 5"), "{line}");
    assert!(
        is_tenant(&server, SHARED, "acme").await,
        "the token moved to another tenant"
    );
    assert!(!is_tenant(&server, SHARED, "globex").await);
    assert!(!server.stderr().contains(&hash(SHARED)));
}

#[tokio::test]
async fn the_bearer_scheme_is_case_insensitive() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    write(&tokens, &[format!("acme:{}", hash(SHARED))]);
    let server = Server::start(&["--tokens-file", tokens.to_str().unwrap()]);
    let channel = tonic::transport::Endpoint::from_shared(server.grpc.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut raw = oncekey_api::v1::ledger_client::LedgerClient::new(channel);
    for (i, scheme) in ["Bearer", "bearer", "BEARER", "bEaReR"].iter().enumerate() {
        let mut request = tonic::Request::new(claim(NS, &format!("k{i}"), "{}"));
        request.metadata_mut().insert(
            "authorization",
            format!("{scheme} {SHARED}").parse().unwrap(),
        );
        let answer = raw.claim(request).await;
        let answer = answer.unwrap_or_else(|e| panic!("{scheme}: {e:?}"));
        assert_eq!(outcome(answer.get_ref()), ClaimOutcome::Acquired);
    }
    let mut request = tonic::Request::new(claim(NS, "basic", "{}"));
    request
        .metadata_mut()
        .insert("authorization", format!("Basic {SHARED}").parse().unwrap());
    let e = raw.claim(request).await.unwrap_err();
    assert_eq!(
        (e.code(), reason(&e).as_str()),
        (Code::Unauthenticated, "UNAUTHENTICATED")
    );
}

#[tokio::test]
async fn a_dev_mode_admin_port_beyond_loopback_warns() {
    let exposed = Server::start(&["--admin-listen", "0.0.0.0:0"]);
    let line = log_line(&exposed, "admin port").await;
    assert!(
        line.contains("WARN") && line.contains("non-loopback"),
        "{line}"
    );
    // On loopback, or with tokens, there is nothing to warn about.
    let quiet = Server::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    write(&tokens, &[format!("acme:{}", hash(SHARED))]);
    let with_tokens = Server::start(&[
        "--admin-listen",
        "0.0.0.0:0",
        "--tokens-file",
        tokens.to_str().unwrap(),
    ]);
    for server in [&quiet, &with_tokens] {
        log_line(server, "oncekey serving").await;
        assert!(
            !server.stderr().contains("non-loopback"),
            "{}",
            server.stderr()
        );
    }
}

/// The clock skew and the checkpoint interval are test-only: gone from the command line (clap
/// refuses them, exit 64), read from `ONCEKEY_TEST_*` variables whose malformed values exit 64
/// naming the variable; a server started with one warns that it is not for production.
#[tokio::test]
async fn test_only_knobs_are_variables_and_announced() {
    for flag in ["--clock-skew-ms", "--embedded-checkpoint-interval"] {
        let (code, stderr) = serve_until_exit(&[flag, "5"]);
        assert_eq!(code, Some(64), "{flag}: {stderr}");
    }
    for (name, value) in [
        ("ONCEKEY_TEST_CLOCK_SKEW_MS", "soon"),
        ("ONCEKEY_TEST_EMBEDDED_CHECKPOINT_INTERVAL", "2h"),
    ] {
        let (code, stderr) = serve_until_exit_with_env(&[], &[(name, value)]);
        assert_eq!(code, Some(64), "{name}={value}: {stderr}");
        assert!(stderr.contains(name), "{name}={value}: {stderr}");
    }
    let server = Server::start_with(&[], &[("ONCEKEY_TEST_CLOCK_SKEW_MS", "-1500")]);
    let line = log_line(&server, "test-only settings").await;
    assert!(line.contains("clock_skew_ms: -1500"), "{line}");
    let mut client = server.client("acme").await;
    let claimed = client.claim(claim(NS, "skewed", "{}")).await.unwrap();
    assert_eq!(outcome(&claimed.into_inner()), ClaimOutcome::Acquired);
}

/// Data protection mistakes (docs/api.md, "Data protection") exit 64 with one line naming the
/// flag: a key ring that does not load (and its line, never a secret), key privacy without an
/// `hmac` key, a bad rule, a ceiling above --max-retention; a good ring and rules start.
#[tokio::test]
async fn data_protection_mistakes_exit_64_naming_the_flag() {
    const SECRET: &str = "AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA=";
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken");
    write(
        &broken,
        &[format!("k1 {SECRET} primary"), "k2 tooshort".into()],
    );
    let primary_only = dir.path().join("primary-only");
    write(&primary_only, &[format!("k1 {SECRET} primary")]);
    let broken = broken.to_str().unwrap();
    let primary_only = primary_only.to_str().unwrap();
    for (args, env, flag, says) in [
        (
            vec!["--encryption-keys", broken],
            vec![],
            "--encryption-keys",
            "line 2",
        ),
        (
            vec!["--key-privacy", "hmac"],
            vec![],
            "--key-privacy",
            "hmac",
        ),
        (
            vec!["--encryption-keys", primary_only],
            vec![("ONCEKEY_KEY_PRIVACY", "payments.*=hmac,*=off")],
            "--key-privacy",
            "hmac",
        ),
        (
            vec!["--key-privacy", "payments=on"],
            vec![],
            "--key-privacy",
            "payments=on",
        ),
        (
            vec!["--retention-ceiling", "payments.*=31d"],
            vec![],
            "--retention-ceiling",
            "--max-retention",
        ),
    ] {
        let (code, err) = serve_until_exit_with_env(&args, &env);
        assert_eq!(code, Some(64), "{args:?}: {err}");
        assert!(err.contains(flag) && err.contains(says), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(!err.contains(SECRET), "{args:?}: {err}");
    }
    let ring = dir.path().join("ring");
    write(
        &ring,
        &[
            format!("k1 {SECRET} primary"),
            "names ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8= hmac".into(),
        ],
    );
    let server = Server::start(&[
        "--encryption-keys",
        ring.to_str().unwrap(),
        "--key-privacy",
        "payments.*=hmac",
        "--retention-ceiling",
        "payments.*=7d",
    ]);
    let line = log_line(&server, "key ring loaded").await;
    assert!(line.contains("k1") && line.contains("names"), "{line}");
    assert!(!server.stderr().contains(SECRET));
    let mut client = server.client("acme").await;
    let mut request = claim(NS, "order-1", "{}");
    request.retention = Some(prost_types::Duration {
        seconds: 30 * 86_400,
        nanos: 0,
    });
    let claimed = client.claim(request).await.unwrap();
    let record = claimed.into_inner().record.unwrap();
    assert_eq!(record.key, "order-1", "the answer carries the key as asked");
    // Asked for 30 days under a 7-day ceiling: kept 7 days (not refused).
    let kept = record.expires_at.unwrap().seconds - record.created_at.unwrap().seconds;
    assert!((7 * 86_400..7 * 86_400 + 120).contains(&kept), "{kept}");
}
