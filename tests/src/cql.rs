//! Cassandra for the CQL tests: the shared node (`node`), a node of a test's own that it may
//! stop and start (`DedicatedNode`), a TLS-only node (`tls_node`), and keyspaces — the one generator of test keyspace names
//! (`keyspace_name`, which `is_stale_keyspace` reads back) and a fresh keyspace migrated with the
//! real `oncekey migrate`.
//!
//! Every test gets a keyspace of its own, so tests run in parallel and need no teardown; the CQL
//! store's tests drop the keyspaces earlier runs left behind once they are stale. Nothing here
//! skips: without a node, the test fails with `scripts/cassandra`'s output.

use crate::server::run_cli;
use std::path::PathBuf;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

/// Every test keyspace's name starts with this, then the creation time in Unix seconds.
pub const KEYSPACE_PREFIX: &str = "oncekey_t_";

/// A keyspace older than this (seconds) was left behind by an earlier run: no test runs so long.
const STALE_SECS: u64 = 600;

fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}

/// `scripts/cassandra COMMAND` with extra environment (e.g. another port); panics with its output
/// unless it succeeds; returns its last stdout line (`start` prints the node's address there).
pub fn cassandra(env: &[(String, String)], command: &str) -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/cassandra");
    let out = Command::new(script)
        .arg(command)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {script}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{script} {command} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout.lines().last().unwrap_or_default().trim().to_owned()
}

/// Contact point of the shared test node: `$ONCEKEY_TEST_CQL_NODES` (the test command starts the
/// node and says where), or a local node started once per process. Never skips: no node, panic.
pub fn node() -> &'static str {
    static NODE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NODE.get_or_init(|| match std::env::var("ONCEKEY_TEST_CQL_NODES") {
        Ok(nodes) if !nodes.trim().is_empty() => nodes.trim().to_owned(),
        _ => cassandra(&[], "start"),
    })
}

/// A node of its own that speaks CQL over TLS only and requires client certificates
/// (`scripts/cassandra` with `ONCEKEY_CASSANDRA_TLS`): its address and the directory holding
/// `ca.pem`, `client.pem`, `client.key` and `other-ca.pem`. `$ONCEKEY_TEST_CQL_TLS_NODES` and
/// `$ONCEKEY_TEST_CQL_TLS_DIR` when the test command started it, else started once per process
/// on `$ONCEKEY_TLS_CQL_PORT` (default 9142) and `$ONCEKEY_TLS_CQL_STORAGE_PORT` (7142), never
/// the shared node's ports. Never skips: no node, panic.
pub fn tls_node() -> &'static (String, PathBuf) {
    static NODE: std::sync::OnceLock<(String, PathBuf)> = std::sync::OnceLock::new();
    NODE.get_or_init(|| {
        let given = (
            std::env::var("ONCEKEY_TEST_CQL_TLS_NODES"),
            std::env::var("ONCEKEY_TEST_CQL_TLS_DIR"),
        );
        if let (Ok(nodes), Ok(dir)) = given {
            if !nodes.trim().is_empty() && !dir.trim().is_empty() {
                return (nodes.trim().to_owned(), PathBuf::from(dir.trim()));
            }
        }
        let port = std::env::var("ONCEKEY_TLS_CQL_PORT").unwrap_or_else(|_| "9142".into());
        let storage =
            std::env::var("ONCEKEY_TLS_CQL_STORAGE_PORT").unwrap_or_else(|_| "7142".into());
        let dir = PathBuf::from(format!("/tmp/oncekey-cassandra-{port}-tls"));
        let env = [
            ("ONCEKEY_CQL_PORT".to_owned(), port),
            ("ONCEKEY_CQL_STORAGE_PORT".to_owned(), storage),
            (
                "ONCEKEY_CASSANDRA_TLS".to_owned(),
                dir.display().to_string(),
            ),
            ("ONCEKEY_CASSANDRA_HEAP".to_owned(), "512m".to_owned()),
        ];
        (cassandra(&env, "start"), dir)
    })
}

/// A keyspace name no other test uses, in this process or another:
/// `oncekey_t_<unix seconds>_<pid>_<counter>_<random>` (hex), at most 48 characters.
pub fn keyspace_name() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    format!(
        "{KEYSPACE_PREFIX}{}_{:x}_{:x}_{:08x}",
        unix_secs(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed),
        rand::random::<u32>()
    )
}

/// Whether `name` is a test keyspace (`keyspace_name`) made more than ten minutes ago.
pub fn is_stale_keyspace(name: &str) -> bool {
    name.strip_prefix(KEYSPACE_PREFIX)
        .and_then(|rest| rest.split('_').next())
        .and_then(|secs| secs.parse::<u64>().ok())
        .is_some_and(|created| created + STALE_SECS < unix_secs())
}

/// `--cql-replication` of test keyspaces: `$ONCEKEY_TEST_CQL_REPLICATION` (e.g. `SimpleStrategy:3`
/// on the three-node cluster of `scripts/test cluster`), else `SimpleStrategy:1` (one node).
pub fn test_replication() -> String {
    match std::env::var("ONCEKEY_TEST_CQL_REPLICATION") {
        Ok(r) if !r.trim().is_empty() => r.trim().to_owned(),
        _ => "SimpleStrategy:1".to_owned(),
    }
}

/// A fresh keyspace on `node`, migrated with the real `oncekey migrate`.
pub fn migrated_keyspace(node: &str) -> String {
    migrated_keyspace_with(node, &[])
}

/// `migrated_keyspace` with extra `oncekey migrate` flags (e.g. TLS to the node).
pub fn migrated_keyspace_with(node: &str, extra: &[&str]) -> String {
    let keyspace = keyspace_name();
    let replication = test_replication();
    let mut args = vec![
        "migrate",
        "--cql-nodes",
        node,
        "--cql-keyspace",
        &keyspace,
        "--cql-replication",
        &replication,
    ];
    args.extend_from_slice(extra);
    let (code, stdout, stderr) = run_cli(&args);
    assert_eq!(code, 0, "migrate failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("0001_ledger applied"), "{stdout}");
    keyspace
}

/// `$ONCEKEY_FAULT_CQL_STORAGE_PORT` (default 7044), so stopping it disturbs no other test.
pub struct DedicatedNode {
    env: Vec<(String, String)>,
    /// `127.0.0.1:PORT`.
    pub addr: String,
}

impl DedicatedNode {
    /// Starts (or reuses) the node.
    pub fn start() -> DedicatedNode {
        let port = std::env::var("ONCEKEY_FAULT_CQL_PORT").unwrap_or_else(|_| "9044".into());
        let storage =
            std::env::var("ONCEKEY_FAULT_CQL_STORAGE_PORT").unwrap_or_else(|_| "7044".into());
        let env = vec![
            ("ONCEKEY_CQL_PORT".to_owned(), port),
            ("ONCEKEY_CQL_STORAGE_PORT".to_owned(), storage),
        ];
        let addr = cassandra(&env, "start");
        DedicatedNode { env, addr }
    }

    /// `scripts/cassandra stop` (SIGTERM, waits for the exit).
    pub fn stop(&self) {
        cassandra(&self.env, "stop");
    }

    /// `scripts/cassandra start` on the same data.
    pub fn restart(&self) {
        cassandra(&self.env, "start");
    }
}

impl Drop for DedicatedNode {
    fn drop(&mut self) {
        // Best effort: a panic while dropping would hide the test's own failure.
        let _ = std::panic::catch_unwind(|| cassandra(&self.env, "stop"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyspace_names_are_unique_valid_and_read_back() {
        let (a, b) = (keyspace_name(), keyspace_name());
        assert_ne!(a, b);
        for name in [&a, &b] {
            assert!(name.len() <= 48, "{name}");
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                "{name}"
            );
            assert!(!is_stale_keyspace(name), "{name}");
        }
        let old = format!("{KEYSPACE_PREFIX}{}_1_0_0", unix_secs() - STALE_SECS - 1);
        assert!(is_stale_keyspace(&old));
        assert!(!is_stale_keyspace("oncekey"));
    }
}
