//! The three-node Cassandra cluster the cluster tests run on, driven through
//! `scripts/cassandra cluster …` (which reads `$ONCEKEY_CLUSTER_FIRST_ADDR` and the other cluster
//! variables from the environment these tests inherit). The tests never start it: without a
//! healthy cluster they fail at once, saying how to get one.
//!
//! Nodes a test killed are started again when the handle drops, so a failing test does not leave
//! the next one a broken cluster.

use std::collections::BTreeSet;
use std::process::Command;
use std::sync::Mutex;

/// The running cluster.
pub struct Cluster {
    /// Contact points, `host:port,host:port,…`.
    pub nodes: String,
    /// How many nodes.
    pub size: usize,
    down: Mutex<BTreeSet<usize>>,
}

/// `scripts/cassandra cluster ARGS…`: (success, stdout, stderr).
fn script(args: &[&str]) -> (bool, String, String) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/cassandra");
    let out = Command::new(path)
        .arg("cluster")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {path}: {e}"));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn run(args: &[&str]) -> String {
    let (ok, stdout, stderr) = script(args);
    assert!(
        ok,
        "scripts/cassandra cluster {} failed:\n{stdout}\n{stderr}",
        args.join(" ")
    );
    stdout
}

impl Cluster {
    /// The cluster, which must be running with every node Up/Normal.
    pub fn require() -> Cluster {
        let (ok, stdout, stderr) = script(&["status"]);
        assert!(
            ok,
            "these tests need a running 3-node Cassandra cluster: `scripts/test cluster` starts one \
             and runs them (or `scripts/cassandra cluster start`, then `cargo test -p oncekey-tests \
             --test cql_cluster_faults -- --ignored --test-threads 1`); \
             `scripts/cassandra cluster status` said:\n{stderr}"
        );
        let nodes = stdout.lines().last().unwrap_or_default().trim().to_owned();
        let size = nodes.split(',').count();
        assert!(
            size >= 3,
            "the cluster has {size} nodes, these tests need 3: {nodes}"
        );
        Cluster {
            nodes,
            size,
            down: Mutex::default(),
        }
    }

    /// SIGKILL node `n` (1-based; node 1 is the seed).
    pub fn kill(&self, n: usize) {
        self.down.lock().unwrap().insert(n);
        run(&["kill", &n.to_string()]);
    }

    /// Starts node `n` again on its data; returns once every running node sees it Up/Normal.
    pub fn restart(&self, n: usize) {
        run(&["restart", &n.to_string()]);
        self.down.lock().unwrap().remove(&n);
    }

    /// Kills node `n`, empties its disks and brings it back as a replacement of itself (it
    /// streams its data from the others before it serves).
    pub fn replace(&self, n: usize) {
        self.down.lock().unwrap().insert(n);
        run(&["restart", &n.to_string(), "--wipe"]);
        self.down.lock().unwrap().remove(&n);
    }

    /// A full repair (Paxos state included) of `keyspace` from node `n`.
    pub fn repair(&self, n: usize, keyspace: &str) -> String {
        run(&["repair", &n.to_string(), keyspace])
    }

    /// The address (`host:port`) of node `n`.
    pub fn addr(&self, n: usize) -> &str {
        self.nodes.split(',').nth(n - 1).expect("node number")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let down: Vec<usize> = self.down.lock().unwrap().iter().copied().collect();
        for n in down {
            // Best effort; the next test's `require` reports a cluster that stayed broken.
            let (ok, _, stderr) = script(&["restart", &n.to_string()]);
            if !ok {
                eprintln!("could not restart node {n} after the test:\n{stderr}");
            }
        }
    }
}
