//! `oncekey serve --store cql` at start-up: a cluster that cannot answer yet (no node listening,
//! too few replicas alive for QUORUM) is waited for up to `--cql-startup-timeout`, each retry
//! logged, and the server comes up when the cluster does; when the time runs out it exits 69
//! (EX_UNAVAILABLE), not 64, which stays for configuration errors. The tests that need a node are
//! ignored by a plain `cargo test`: `scripts/test cql` starts it and runs them.

use oncekey_api::v1::ClaimOutcome;
use oncekey_tests::*;
use std::process::Command;

/// What `serve` logs before each new attempt to open the store.
const RETRY_LINE: &str = "the CQL cluster is not available: opening the store again";

/// `oncekey serve --store cql` on `nodes` and `keyspace` with `--cql-startup-timeout timeout`,
/// run to its exit: (exit code, stderr).
fn serve_until_exit(nodes: &str, keyspace: &str, timeout: &str) -> (i32, String) {
    let out = Command::new(binary())
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
            "--store",
            "cql",
            "--cql-nodes",
            nodes,
            "--cql-keyspace",
            keyspace,
            "--cql-startup-timeout",
            timeout,
        ])
        .env("RUST_LOG", "warn")
        .output()
        .expect("run oncekey serve");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Sets the replication factor of `keyspace` on `node` (SimpleStrategy).
async fn set_replication(node: &str, keyspace: &str, factor: u32) {
    let session = scylla::client::session_builder::SessionBuilder::new()
        .known_node(node)
        .build()
        .await
        .expect("connect to the test node");
    session
        .query_unpaged(
            format!(
                "ALTER KEYSPACE {keyspace} WITH replication = \
                 {{'class': 'SimpleStrategy', 'replication_factor': {factor}}}"
            ),
            &[],
        )
        .await
        .expect("alter the keyspace's replication");
}

#[test]
fn cql_startup_retries_an_unreachable_cluster_then_exits_69() {
    // Nothing listens there: every connection is refused, as while the nodes start.
    let nobody = free_addr();
    let (code, stderr) = serve_until_exit(&nobody, "oncekey", "2s");
    assert_eq!(code, 69, "{stderr}");
    assert!(stderr.contains(RETRY_LINE), "no retry logged:\n{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: ")
            && last.contains("--cql-startup-timeout")
            && last.contains(&format!("--cql-nodes {nobody}")),
        "{stderr}"
    );
}

#[test]
fn cql_startup_timeout_out_of_bounds_is_a_configuration_error() {
    for bad in ["0s", "2h"] {
        let (code, stderr) = serve_until_exit("127.0.0.1:1", "oncekey", bad);
        assert_eq!(code, 64, "{bad}: {stderr}");
        assert!(stderr.contains("--cql-startup-timeout"), "{bad}: {stderr}");
        assert!(!stderr.contains(RETRY_LINE), "{bad}: {stderr}");
    }
}

#[tokio::test]
#[ignore = "needs Cassandra: scripts/test cql runs it"]
async fn cql_startup_waits_for_a_quorum_then_exits_69() {
    let node = cql_node();
    let keyspace = migrated_keyspace(node);
    // Three replicas on a single node: QUORUM needs two and one lives, which is what a cluster
    // with nodes down (or one just died, still thought alive) looks like to a start-up read.
    set_replication(node, &keyspace, 3).await;
    let (code, stderr) = serve_until_exit(node, &keyspace, "3s");
    assert_eq!(code, 69, "{stderr}");
    assert!(stderr.contains(RETRY_LINE), "no retry logged:\n{stderr}");
    assert!(
        stderr.to_uppercase().contains("QUORUM"),
        "the error should say what the cluster lacked:\n{stderr}"
    );
    // The same keyspace with its replicas back serves at once.
    set_replication(node, &keyspace, 1).await;
    let server = Server::start(&[
        "--store",
        "cql",
        "--cql-nodes",
        node,
        "--cql-keyspace",
        &keyspace,
    ]);
    let mut client = server.client("acme").await;
    let answer = client
        .claim(claim("cql.startup", "k1", r#"{"n":1}"#))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(outcome(&answer), ClaimOutcome::Acquired);
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs Cassandra: scripts/test cql runs it"]
async fn cql_startup_comes_up_when_the_cluster_appears_within_the_deadline() {
    let node = cql_node().to_owned();
    let keyspace = migrated_keyspace(&node);
    // The contact point answers only after a while: a relay to the node, opened later.
    let later = free_addr();
    let opens = {
        let (later, node) = (later.clone(), node.clone());
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_secs(3));
            Relay::start_on(&later, &node)
        })
    };
    let server = Server::start(&[
        "--store",
        "cql",
        "--cql-nodes",
        &later,
        "--cql-keyspace",
        &keyspace,
    ]);
    let _relay = opens.join().expect("the relay opened");
    assert!(
        server.stderr().contains(RETRY_LINE),
        "the first attempts should have failed and been retried:\n{}",
        server.stderr()
    );
    let mut client = server.client("acme").await;
    let answer = client
        .claim(claim("cql.startup", "k1", r#"{"n":1}"#))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(outcome(&answer), ClaimOutcome::Acquired);
}
