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
