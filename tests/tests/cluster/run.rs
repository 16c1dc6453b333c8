//! One cluster test run: a fresh keyspace replicated to all three nodes (the store at QUORUM /
//! SERIAL), two Oncekey servers connected to the whole cluster, the effect workload (claim →
//! effect → complete through the Rust client, judged from the external effect file) and the
//! recorded workload (judged by the linearizability checker) through both servers, a timeline of
//! the faults a test injects, and the findings at the end.
//!
//! `ONCEKEY_CLUSTER_SCALE` (default 1) stretches every phase of every scenario: `4` runs each
//! about four times as long, for a longer soak than CI's. `ONCEKEY_CLUSTER_KEEP=DIR` keeps each
//! run's recorded history and server logs in DIR.

use super::history::Op;
use super::linearizability::{self, Report};
use super::nodes::Cluster;
use super::recorder::{self, now_ms, History};
use oncekey_client::Client;
use oncekey_server::ledger::Millis;
use oncekey_tests::faults::workload::{self, Verdict, Workload};
use oncekey_tests::faults::{host_port, Rng};
use oncekey_tests::{run_cli, Server};
use std::sync::Arc;
use std::time::Duration;

/// Effect-workload workers (half through each server).
const EFFECT_WORKERS: u32 = 4;

/// What a run starts.
pub struct Setup {
    /// Whether the effect workload runs too.
    pub effects: bool,
    /// The recorded workload.
    pub history: recorder::Config,
    /// Extra environment of both servers.
    pub server_env: Vec<(String, String)>,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            effects: true,
            history: recorder::Config::default(),
            server_env: Vec::new(),
        }
    }
}

/// A run in progress.
pub struct Run {
    /// The scenario's name (namespace prefix, log prefix).
    pub name: &'static str,
    /// The cluster.
    pub cluster: Cluster,
    /// The run's keyspace.
    pub keyspace: String,
    /// The run's random choices (seeded: `ONCEKEY_FAULT_SEED` replays them).
    pub rng: Rng,
    /// The seed.
    pub seed: u64,
    /// The recorded workload.
    pub history: Arc<History>,
    servers: Vec<Server>,
    flags: Vec<Vec<String>>,
    setup: Setup,
    effects: Option<Arc<Workload>>,
    workers: Vec<tokio::task::JoinHandle<()>>,
    started: Millis,
    dir: tempfile::TempDir,
}

/// What a run found.
pub struct Findings {
    /// The effect-file verdict (when the effect workload ran).
    pub verdict: Option<Verdict>,
    /// The linearizability report of the recorded history.
    pub report: Report,
    /// The recorded history.
    pub ops: Vec<Op>,
    /// INTERNAL answers seen by the recorded clients.
    pub internal: u64,
}

/// `ONCEKEY_CLUSTER_SCALE`.
fn scale() -> f64 {
    std::env::var("ONCEKEY_CLUSTER_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|s: &f64| *s > 0.0)
        .unwrap_or(1.0)
}

/// A keyspace replicated to three nodes, migrated with the real `oncekey migrate`.
pub fn keyspace(nodes: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static RUNS: AtomicU32 = AtomicU32::new(0);
    let secs = now_ms() / 1000;
    let n = RUNS.fetch_add(1, Ordering::Relaxed);
    let keyspace = format!("oncekey_t_{secs}_cl{:x}_{n}", std::process::id());
    let (code, stdout, stderr) = run_cli(&[
        "migrate",
        "--cql-nodes",
        nodes,
        "--cql-keyspace",
        &keyspace,
        "--cql-replication",
        "SimpleStrategy:3",
    ]);
    assert_eq!(code, 0, "migrate failed:\n{stdout}\n{stderr}");
    keyspace
}

impl Run {
    /// Starts the servers and the workloads on the running cluster.
    pub async fn start(name: &'static str, setup: Setup) -> Run {
        let cluster = tokio::task::block_in_place(Cluster::require);
        let keyspace = tokio::task::block_in_place(|| keyspace(&cluster.nodes));
        let seed = Rng::seed();
        let dir = tempfile::tempdir().unwrap();
        let base: Vec<String> = [
            "--store",
            "cql",
            "--cql-nodes",
            &cluster.nodes,
            "--cql-keyspace",
            &keyspace,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut run = Run {
            name,
            rng: Rng::new(seed),
            seed,
            history: History::new(&format!("{name}.history"), 2, setup.history.clone()),
            cluster,
            keyspace,
            servers: Vec::new(),
            flags: Vec::new(),
            setup,
            effects: None,
            workers: Vec::new(),
            started: now_ms(),
            dir,
        };
        for i in 0..2 {
            let server = run.spawn_server(i, &base, None);
            let mut flags = base.clone();
            flags.extend([
                "--listen".into(),
                host_port(&server.grpc),
                "--admin-listen".into(),
                host_port(&server.admin),
            ]);
            run.flags.push(flags);
            run.servers.push(server);
        }
        let endpoints: Vec<String> = run.servers.iter().map(|s| s.grpc.clone()).collect();
        if run.setup.effects {
            let load = Workload::new(
                &format!("{name}.effects"),
                &run.dir.path().join("effects.log"),
            );
            run.workers
                .extend(load.spawn(EFFECT_WORKERS, &endpoints, seed));
            run.effects = Some(load);
        }
        run.workers.extend(run.history.spawn(&endpoints, seed));
        run.event(&format!(
            "seed={seed} keyspace={} (SimpleStrategy:3) nodes={} servers={endpoints:?}",
            run.keyspace, run.cluster.nodes
        ));
        run
    }

    /// Starts server `i` with `flags`, the setup's environment and `skew` (ms) on its clock.
    fn spawn_server(&self, i: usize, flags: &[String], skew: Option<Millis>) -> Server {
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        let skew = skew.map(|ms| ms.to_string());
        let mut env: Vec<(&str, &str)> = self
            .setup
            .server_env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        if let Some(ms) = &skew {
            env.push(("ONCEKEY_TEST_CLOCK_SKEW_MS", ms));
        }
        let data = self.dir.path().join(format!("server{i}"));
        tokio::task::block_in_place(|| Server::start_with_env(&data, &flags, &env))
    }

    /// The servers (0 = A, 1 = B).
    pub fn servers(&self) -> &[Server] {
        &self.servers
    }

    /// Milliseconds since the run started, for the timeline.
    pub fn elapsed(&self) -> f64 {
        (now_ms() - self.started) as f64 / 1000.0
    }

    /// Notes an event on the timeline (printed) and returns its time.
    pub fn event(&self, what: &str) -> Millis {
        println!("[{}] +{:.1} s {what}", self.name, self.elapsed());
        now_ms()
    }

    /// Lets the workloads run for `secs` × `ONCEKEY_CLUSTER_SCALE` seconds.
    pub async fn run_for(&self, secs: f64) {
        tokio::time::sleep(Duration::from_secs_f64(secs * scale())).await;
    }

    /// A clock step on server `i`: it is restarted (SIGTERM, same ports) with its clock `skew`
    /// ms off the others' (the test-only `ONCEKEY_TEST_CLOCK_SKEW_MS`).
    pub fn clock_step(&mut self, i: usize, skew: Millis) {
        self.event(&format!(
            "clock step: server {i} restarted with its clock {skew:+} ms off"
        ));
        self.servers[i].terminate(Duration::from_secs(30));
        // Noted before the new process answers anything.
        self.history.set_skew(i, skew);
        let flags = self.flags[i].clone();
        self.servers[i] = self.spawn_server(i, &flags, Some(skew));
        self.event(&format!("server {i} serving again (skew {skew:+} ms)"));
    }

    /// Stops the workloads and judges the run: the effect-file verdict, then the recorded
    /// history (with a final answered Lookup of every key) through the linearizability checker.
    pub async fn finish(mut self) -> Findings {
        self.event("stopping the workloads");
        self.history.stop();
        if let Some(load) = &self.effects {
            load.stop();
        }
        for w in self.workers.drain(..) {
            w.await.expect("a workload client panicked");
        }
        let endpoint = self.servers[0].grpc.clone();
        self.history.final_lookups(&endpoint, 0).await;
        let verdict = match &self.effects {
            Some(load) => {
                let checker = Client::connect(&endpoint, workload::options())
                    .await
                    .unwrap();
                let verdict = load.verify(&checker, checker.ledger()).await;
                println!("[{}] effect workload: {}", self.name, load.counts.summary());
                println!("[{}] effect verdict: {verdict:?}", self.name);
                Some(verdict)
            }
            None => None,
        };
        let ops = self.history.ops();
        self.keep(&ops);
        let started = std::time::Instant::now();
        let report = tokio::task::block_in_place(|| linearizability::check(&ops));
        println!(
            "[{}] linearizability: {} (checked in {:.1?})",
            self.name,
            report.summary(),
            started.elapsed()
        );
        Findings {
            verdict,
            report,
            ops,
            internal: self
                .history
                .internal
                .load(std::sync::atomic::Ordering::Relaxed),
        }
    }
}

impl Run {
    /// With `ONCEKEY_CLUSTER_KEEP=DIR`: writes the recorded history (one operation a line, by
    /// key) and both servers' logs to DIR/<scenario>.*, for looking into a run afterwards.
    fn keep(&self, ops: &[Op]) {
        let Some(dir) = std::env::var_os("ONCEKEY_CLUSTER_KEEP") else {
            return;
        };
        let dir = std::path::PathBuf::from(dir);
        std::fs::create_dir_all(&dir).expect("ONCEKEY_CLUSTER_KEEP dir");
        let mut sorted: Vec<&Op> = ops.iter().collect();
        sorted.sort_by(|a, b| (&a.key, a.invoke).cmp(&(&b.key, b.invoke)));
        let text: Vec<String> = sorted.iter().map(|op| format!("{} {op}", op.key)).collect();
        std::fs::write(dir.join(format!("{}.history", self.name)), text.join("\n")).unwrap();
        for (i, server) in self.servers.iter().enumerate() {
            std::fs::write(
                dir.join(format!("{}.server{i}.log", self.name)),
                server.stderr(),
            )
            .unwrap();
        }
        println!(
            "[{}] history and server logs kept in {}",
            self.name,
            dir.display()
        );
    }
}

impl Findings {
    /// Asserts that nothing was duplicated or lost, the history is linearizable, and no request
    /// met an INTERNAL error.
    pub fn assert_clean(&self) {
        if let Some(v) = &self.verdict {
            v.assert_clean();
            assert!(v.acked > 0, "the effect workload did nothing");
        }
        assert_eq!(self.internal, 0, "INTERNAL answers");
        for (key, lines) in &self.report.untold {
            println!("key {key}: linearizable only with a grant its caller was not told about:");
            for line in lines.iter().take(40) {
                println!("  {line}");
            }
        }
        self.report.assert_linearizable();
        assert!(self.report.ops > 0, "the recorded workload did nothing");
    }
}
