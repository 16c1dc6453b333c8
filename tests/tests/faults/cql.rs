//! CQL helpers: the shared node (as in cql_cluster.rs), a dedicated node on its own ports that a
//! test may stop and start, and fresh keyspaces migrated with the real `oncekey migrate`.

use oncekey_tests::run_cli;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/cassandra");

/// Contact point of the shared node: `$ONCEKEY_TEST_CQL_NODES`, or started with the script.
pub fn shared_node() -> &'static str {
    static NODE: OnceLock<String> = OnceLock::new();
    NODE.get_or_init(|| {
        if let Ok(nodes) = std::env::var("ONCEKEY_TEST_CQL_NODES") {
            if !nodes.trim().is_empty() {
                return nodes.trim().to_owned();
            }
        }
        script(&[], "start")
    })
}

/// A node of its own, on `$ONCEKEY_FAULT_CQL_PORT` (default 9044) and storage port
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
        let addr = script(&env, "start");
        DedicatedNode { env, addr }
    }

    /// `scripts/cassandra stop` (SIGTERM, waits for the exit).
    pub fn stop(&self) {
        script(&self.env, "stop");
    }

    /// `scripts/cassandra start` on the same data.
    pub fn restart(&self) {
        script(&self.env, "start");
    }
}

impl Drop for DedicatedNode {
    fn drop(&mut self) {
        let _ = Command::new(SCRIPT)
            .arg("stop")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .output();
    }
}

fn script(env: &[(String, String)], command: &str) -> String {
    let out = Command::new(SCRIPT)
        .arg(command)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {SCRIPT}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{SCRIPT} {command} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout.lines().last().unwrap_or_default().trim().to_owned()
}

/// A fresh keyspace on `node`, migrated with the real binary.
pub fn migrated_keyspace(node: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let keyspace = format!(
        "oncekey_f_{}_{:x}_{:x}_{}",
        now.as_secs(),
        std::process::id(),
        now.subsec_nanos(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let (code, stdout, stderr) = run_cli(&[
        "migrate",
        "--cql-nodes",
        node,
        "--cql-keyspace",
        &keyspace,
        "--cql-replication",
        "SimpleStrategy:1",
    ]);
    assert_eq!(code, 0, "migrate failed:\n{stdout}\n{stderr}");
    keyspace
}
