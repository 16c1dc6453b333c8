//! The CQL store's connection safety against real nodes: TLS to the cluster (a node of its own
//! that speaks CQL over TLS only and requires client certificates, made per run by
//! `scripts/cassandra` with `ONCEKEY_CASSANDRA_TLS`), and the refusal of LOCAL_SERIAL Paxos unless
//! the operator says keys are pinned to one datacenter. The tests that need the node are ignored by
//! a plain `cargo test`: `scripts/test cql` starts it and runs them.

use oncekey_api::v1::{ClaimOutcome, RecordStatus};
use oncekey_tests::*;
use std::path::Path;

const NS: &str = "cql.tls";
/// The name the TLS node's certificate carries (besides localhost); it has no IP address.
const NODE_NAME: &str = "cassandra.oncekey.test";

/// The flags for TLS to the node in `dir`: its CA, a client certificate, and the node's name.
fn tls_flags(dir: &Path) -> Vec<String> {
    let file = |name: &str| dir.join(name).display().to_string();
    vec![
        "--cql-tls-ca".into(),
        file("ca.pem"),
        "--cql-tls-cert".into(),
        file("client.pem"),
        "--cql-tls-key".into(),
        file("client.key"),
        "--cql-tls-server-name".into(),
        NODE_NAME.into(),
    ]
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[tokio::test]
#[ignore = "needs Cassandra: scripts/test cql runs it"]
async fn cql_migrate_and_serve_over_tls_with_a_client_certificate() {
    let (node, dir) = cql_tls_node();
    let flags = tls_flags(dir);
    let keyspace = migrated_keyspace_with(node, &strs(&flags));
    let mut args = vec![
        "--store",
        "cql",
        "--cql-nodes",
        node,
        "--cql-keyspace",
        &keyspace,
    ];
    args.extend(strs(&flags));
    let server = Server::start(&args);
    let mut client = server.client("acme").await;
    let answer = client
        .claim(claim(NS, "k1", r#"{"n":1}"#))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(outcome(&answer), ClaimOutcome::Acquired);
    let token = answer.lease.unwrap().token;
    client
        .complete(complete(NS, "k1", token, result(200, b"done")))
        .await
        .unwrap();
    let record = client
        .lookup(lookup(NS, "k1"))
        .await
        .unwrap()
        .into_inner()
        .record
        .unwrap();
    assert_eq!(status(&record), RecordStatus::Succeeded);
    let (code, body) = http_get(&server.admin, "/readyz").await;
    assert_eq!(code, 200, "{body}");
}

/// `oncekey migrate` against the TLS node with `flags`: it must fail to connect (exit 64, the
/// message naming --cql-nodes) and, when `reason` is given, log OpenSSL's reason for refusing
/// the node's certificate.
fn refused(what: &str, node: &str, flags: &[String], reason: Option<&str>) {
    let out = std::process::Command::new(binary())
        .args([
            "migrate",
            "--cql-nodes",
            node,
            "--cql-keyspace",
            "oncekey_tls_refused",
            "--cql-replication",
            "SimpleStrategy:1",
        ])
        .args(flags)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run oncekey migrate");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(64),
        "{what}: expected a refused connection\n{stderr}"
    );
    assert!(
        stderr.contains("--cql-nodes") && stderr.contains("cannot connect"),
        "{what}: {stderr}"
    );
    if let Some(reason) = reason {
        let line = stderr
            .lines()
            .find(|l| l.contains("CQL node certificate refused"))
            .unwrap_or_else(|| panic!("{what}: no refusal logged: {stderr}"));
        assert!(line.contains(reason), "{what}: {line}");
    }
}

#[test]
#[ignore = "needs Cassandra: scripts/test cql runs it"]
fn cql_tls_verifies_the_node_and_the_client() {
    let (node, dir) = cql_tls_node();
    let good = tls_flags(dir);
    // The good flags with `flag` given `value`, or left out (`None`).
    let with = |flag: &str, value: Option<String>| -> Vec<String> {
        good.chunks(2)
            .flat_map(|pair| match (&pair[0], &value) {
                (f, Some(v)) if f == flag => vec![f.clone(), v.clone()],
                (f, None) if f == flag => vec![],
                _ => pair.to_vec(),
            })
            .collect()
    };
    refused("plaintext to a TLS-only node", node, &[], None);
    let other_ca = dir.join("other-ca.pem").display().to_string();
    refused(
        "a node certificate from a CA not trusted",
        node,
        &with("--cql-tls-ca", Some(other_ca)),
        Some("unable to get local issuer certificate"),
    );
    // Without a name, the node's certificate must carry the IP address connected to; it has none.
    refused(
        "a certificate without the node's IP address",
        node,
        &with("--cql-tls-server-name", None),
        Some("IP address mismatch"),
    );
    refused(
        "a certificate for another name",
        node,
        &with("--cql-tls-server-name", Some("other.oncekey.test".into())),
        Some("hostname mismatch"),
    );
    let no_client_cert: Vec<String> = with("--cql-tls-cert", None)
        .chunks(2)
        .filter(|pair| pair[0] != "--cql-tls-key")
        .flatten()
        .cloned()
        .collect();
    refused("no client certificate", node, &no_client_cert, None);
}

#[test]
fn local_serial_needs_a_local_dc_and_pinned_keys() {
    for command in ["serve", "migrate"] {
        let (code, _, stderr) = run_cli(
            &[
                command,
                "--store",
                "cql",
                "--cql-nodes",
                "127.0.0.1:1",
                "--cql-local-dc",
                "dc1",
                "--cql-serial-consistency",
                "local-serial",
            ]
            .into_iter()
            .filter(|a| command == "serve" || !matches!(*a, "--store" | "cql"))
            .collect::<Vec<_>>(),
        );
        assert_eq!(code, 64, "{command}: {stderr}");
        assert!(
            stderr.contains("--cql-keys-dc-pinned"),
            "{command}: {stderr}"
        );
    }
    let (code, _, stderr) = run_cli(&[
        "serve",
        "--store",
        "cql",
        "--cql-serial-consistency",
        "local-serial",
        "--cql-keys-dc-pinned",
    ]);
    assert_eq!(code, 64, "{stderr}");
    assert!(stderr.contains("needs --cql-local-dc"), "{stderr}");
}

/// `--cql-tls` without `--cql-tls-ca` trusts the system's CAs, which OpenSSL takes from
/// `SSL_CERT_FILE` (the image sets it to its CA bundle).
#[test]
#[ignore = "needs Cassandra: scripts/test cql runs it"]
fn cql_tls_without_a_ca_flag_trusts_the_system_cas() {
    let (node, dir) = cql_tls_node();
    let file = |name: &str| dir.join(name).display().to_string();
    let migrate = |cas: &str| {
        std::process::Command::new(binary())
            .args([
                "migrate",
                "--cql-nodes",
                node,
                "--cql-keyspace",
                "oncekey_tls_system_cas",
                "--cql-replication",
                "SimpleStrategy:1",
                "--cql-tls",
                "--cql-tls-cert",
                &file("client.pem"),
                "--cql-tls-key",
                &file("client.key"),
                "--cql-tls-server-name",
                NODE_NAME,
            ])
            .env("SSL_CERT_FILE", file(cas))
            .output()
            .expect("run oncekey migrate")
    };
    let trusted = migrate("ca.pem");
    assert!(
        trusted.status.success(),
        "{}",
        String::from_utf8_lossy(&trusted.stderr)
    );
    let untrusted = migrate("other-ca.pem");
    assert_eq!(
        untrusted.status.code(),
        Some(64),
        "{}",
        String::from_utf8_lossy(&untrusted.stderr)
    );
}

/// The client certificate is reloaded when its files change, and new connections present the new
/// one. The server starts with a certificate that expires within the test, its files in a
/// directory laid out like a mounted Secret, all its connections through a relay; the files are
/// replaced by a long-lived certificate; once the first one expired, the relay cuts every
/// connection: the driver's new ones must present the new certificate (the node refuses the
/// expired one), and Claims work again.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs Cassandra: scripts/test cql runs it"]
async fn cql_client_certificate_reloaded_for_new_connections() {
    let (node, dir) = cql_tls_node();
    let keyspace = migrated_keyspace_with(node, &strs(&tls_flags(dir)));
    let unix_now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
    };
    let expires = unix_now() + 45;
    let (short_cert, short_key) = client_certificate_until(dir, "short-lived", expires);
    let (long_cert, long_key) = client_certificate_until(dir, "renewed", unix_now() + 86_400);
    let ca = std::fs::read(dir.join("ca.pem")).unwrap();
    let mut mounted = SecretMount::new(&[
        ("ca.crt", &ca),
        ("tls.crt", &short_cert),
        ("tls.key", &short_key),
    ]);
    let relay = Relay::start(node);
    let contact = relay.contact_point();
    let file = |name: &str| mounted.path(name).display().to_string();
    let (ca_file, cert_file, key_file) = (file("ca.crt"), file("tls.crt"), file("tls.key"));
    let server = Server::start(&[
        "--store",
        "cql",
        "--cql-nodes",
        &contact,
        "--cql-keyspace",
        &keyspace,
        "--cql-tls-ca",
        &ca_file,
        "--cql-tls-cert",
        &cert_file,
        "--cql-tls-key",
        &key_file,
        "--cql-tls-server-name",
        NODE_NAME,
        "--reload-check-interval",
        "200ms",
    ]);
    let mut client = server.client("acme").await;
    let first = client.claim(claim(NS, "before", r#"{"n":1}"#)).await;
    assert_eq!(
        outcome(&first.unwrap().into_inner()),
        ClaimOutcome::Acquired
    );

    mounted.update(&[
        ("ca.crt", &ca),
        ("tls.crt", &long_cert),
        ("tls.key", &long_key),
    ]);
    let reloads = r#"oncekey_reloads_total{what="cql_tls"}"#;
    let mut reloaded = false;
    for _ in 0..150 {
        let (_, body) = http_get(&server.admin, "/metrics").await;
        if metric(&body, reloads).is_some_and(|n| n >= 1.0) {
            reloaded = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert!(reloaded, "no CQL TLS reload counted:\n{}", server.stderr());

    // Past the first certificate's end, every connection is cut: only new ones are left.
    while unix_now() <= expires + 1 {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    relay.cut_all();
    let mut last = None;
    for attempt in 0..60 {
        let key = format!("after-{attempt}");
        match client.claim(claim(NS, &key, r#"{"n":2}"#)).await {
            Ok(answer) => {
                assert_eq!(outcome(&answer.into_inner()), ClaimOutcome::Acquired);
                return;
            }
            Err(status) => last = Some(status),
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    panic!(
        "no Claim succeeded over new connections after the cut: {last:?}\n{}",
        server.stderr()
    );
}

/// A client certificate the node refuses (here: expired) is a configuration error for `serve`:
/// exit 64 at once, not a wait for a cluster that will not change its mind.
#[test]
#[ignore = "needs Cassandra: scripts/test cql runs it"]
fn cql_serve_with_a_refused_client_certificate_exits_64() {
    let (node, dir) = cql_tls_node();
    let keyspace = migrated_keyspace_with(node, &strs(&tls_flags(dir)));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let (cert, key) = client_certificate_until(dir, "expired", now - 60);
    let files = tempfile::tempdir().unwrap();
    let (cert_file, key_file) = (files.path().join("tls.crt"), files.path().join("tls.key"));
    std::fs::write(&cert_file, cert).unwrap();
    std::fs::write(&key_file, key).unwrap();
    let flags: Vec<String> = tls_flags(dir)
        .chunks(2)
        .flat_map(|pair| match pair[0].as_str() {
            "--cql-tls-cert" => vec![pair[0].clone(), cert_file.display().to_string()],
            "--cql-tls-key" => vec![pair[0].clone(), key_file.display().to_string()],
            _ => pair.to_vec(),
        })
        .collect();
    let mut args = vec![
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--admin-listen",
        "127.0.0.1:0",
        "--store",
        "cql",
        "--cql-nodes",
        node,
        "--cql-keyspace",
        &keyspace,
        "--cql-startup-timeout",
        "10m",
    ];
    args.extend(strs(&flags));
    let (code, _, stderr) = run_cli(&args);
    assert_eq!(code, 64, "{stderr}");
    assert!(
        stderr.contains("certificate expired") && stderr.contains("--cql-nodes"),
        "{stderr}"
    );
}
