//! CQL helpers: a dedicated node on its own ports that a test may stop and start; the shared node
//! and fresh migrated keyspaces come from the harness.

use oncekey_tests::cassandra;
pub use oncekey_tests::{cql_node as shared_node, migrated_keyspace};

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
