//! The `oncekey` operator CLI against the real binary: claim, complete, replay and lookup, in
//! plaintext and over TLS and mutual TLS.

use oncekey_tests::*;

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
