//! The distributed engine on a real three-node Cassandra 5.0 cluster (keyspace replicated to all
//! three, the store at QUORUM / SERIAL), with two Oncekey servers over it and two workloads
//! through both: the claim → effect → complete workload judged from the external effect file
//! (faults/workload.rs), and a recorded workload whose history must be linearizable against the
//! ledger's single-record model (cluster/linearizability.rs). In every scenario one Oncekey
//! server's clock is stepped (restarted with the hidden `--clock-skew-ms`) before the fault, by
//! less than the shortest lease (1 s): a step beyond a lease lets a takeover on the server ahead
//! come before the holder's effect even started, an AT_LEAST_ONCE re-run out of token order that
//! the effect verdict rightly flags and that the contract does not exclude (docs/reliability.md).
//!
//! - one node SIGKILLed under load, later started again: serving goes on; the figures of how long
//!   RPCs failed are printed;
//! - two nodes SIGKILLed: STORE_UNAVAILABLE, `/readyz` 503, no acquisition granted; restarted:
//!   serving again, every acknowledged Complete still SUCCEEDED;
//! - a node killed, brought back with empty disks as a replacement of itself while load runs,
//!   then repaired;
//! - a planted lost-update bug (`ONCEKEY_TEST_PLANTED_BUG=lost-update`), which the checker must
//!   catch.
//!
//! These need the cluster, so they are ignored by a plain `cargo test`: `scripts/test cluster`
//! starts it and runs them with `--ignored --test-threads 1` (they would also wait for each
//! other). `ONCEKEY_CLUSTER_SCALE` stretches every phase; `ONCEKEY_FAULT_SEED` replays a run's
//! random choices. The checker's own tests (cluster/checker_tests.rs) need no cluster and always run.

mod cluster;
use oncekey_tests::faults;

use cluster::downtime::{self, Figures};
use cluster::history::{Answer, Op};
use cluster::recorder::{self, now_ms};
use cluster::run::{Run, Setup};
use oncekey_api::v1::ClaimOutcome;
use oncekey_server::ledger::Millis;
use oncekey_tests::{claim, http_get, outcome, reason};
use std::time::{Duration, Instant};
use tonic::Code;

/// The scenarios kill nodes: one at a time, whatever the test harness's thread count.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn block<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

/// Prints (and returns) the unavailability figures of `from..=to`.
fn figures(run_name: &str, ops: &[Op], what: &str, from: Millis, to: Millis) -> Vec<Figures> {
    let figs = downtime::measure(ops, 2, from, to);
    for f in &figs {
        println!("[{run_name}] {what}: {f}");
    }
    figs
}

/// Two different node numbers in 1..=3, or one that is not the seed (node 1) when `not_seed`.
fn pick_node(run: &mut Run, not_seed: bool) -> usize {
    if not_seed {
        2 + run.rng.range(0, 2) as usize
    } else {
        1 + run.rng.range(0, 3) as usize
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a 3-node Cassandra cluster: scripts/test cluster runs it"]
async fn one_node_killed_under_load() {
    let _one = ONE_AT_A_TIME.lock().await;
    let mut run = Run::start("one.node", Setup::default()).await;
    run.run_for(3.0).await;
    run.clock_step(1, 600);
    run.run_for(2.0).await;
    let node = pick_node(&mut run, false);
    let killed = run.event(&format!("SIGKILL node {node} ({})", run.cluster.addr(node)));
    block(|| run.cluster.kill(node));
    run.run_for(8.0).await;
    let back = run.event(&format!("starting node {node} again"));
    block(|| run.cluster.restart(node));
    run.event(&format!("node {node} Up/Normal again"));
    run.run_for(4.0).await;
    let name = run.name;
    let findings = run.finish().await;
    let figs = figures(name, &findings.ops, "node down", killed, back);
    findings.assert_clean();
    for f in &figs {
        // With two of three replicas up every request can be served: the driver routes around
        // the dead node once its connections break. (A liveness bound, not a performance one.)
        assert!(
            f.ops > f.failed,
            "server {} answered nothing while one node was down",
            f.server
        );
        assert!(
            f.longest_failing < 30_000,
            "server {} failed requests for {} ms with a quorum up",
            f.server,
            f.longest_failing
        );
    }
}

/// Claims of fresh keys through `server` until three in a row answered UNAVAILABLE with
/// STORE_UNAVAILABLE (each may first wait for the cluster to notice the dead nodes).
async fn expect_store_unavailable(run: &Run, server: usize) -> usize {
    let mut rpc = run.servers()[server].client(recorder::TENANT).await;
    for n in 0..3 {
        let request = claim("two.nodes.probe", &format!("probe-{server}-{n}"), "{}");
        let started = Instant::now();
        let answer = tokio::time::timeout(Duration::from_secs(90), rpc.claim(request))
            .await
            .unwrap_or_else(|_| panic!("server {server}: a Claim without a quorum hung for 90 s"));
        let err = match answer {
            Ok(r) => panic!(
                "server {server}: a Claim was answered {:?} with two of three nodes down",
                outcome(&r.into_inner())
            ),
            Err(err) => err,
        };
        assert_eq!(
            (err.code(), reason(&err).as_str()),
            (Code::Unavailable, "STORE_UNAVAILABLE"),
            "server {server}: {err:?}"
        );
        println!(
            "[two.nodes] server {server}: probe {n} answered UNAVAILABLE/STORE_UNAVAILABLE in {:.1?}",
            started.elapsed()
        );
    }
    3
}

/// Polls `/readyz` of `server` until it answers `code` (60 s at most); returns how long it took.
async fn readyz_becomes(run: &Run, server: usize, code: u16) -> Duration {
    let started = Instant::now();
    loop {
        let (got, body) = http_get(&run.servers()[server].admin, "/readyz").await;
        if got == code {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "server {server}: /readyz still {got} ({body}) after 60 s, expected {code}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Claims fresh keys through `server` until one is ACQUIRED (120 s at most).
async fn serving_again(run: &Run, server: usize) -> Duration {
    let mut rpc = run.servers()[server].client(recorder::TENANT).await;
    let started = Instant::now();
    for n in 0.. {
        let request = claim("two.nodes.after", &format!("after-{server}-{n}"), "{}");
        match tokio::time::timeout(Duration::from_secs(30), rpc.claim(request)).await {
            Ok(Ok(r)) => {
                assert_eq!(outcome(&r.into_inner()), ClaimOutcome::Acquired);
                return started.elapsed();
            }
            Ok(Err(err)) => assert_eq!(err.code(), Code::Unavailable, "{err:?}"),
            Err(_) => {}
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "server {server} not serving 120 s after the nodes returned"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    unreachable!()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a 3-node Cassandra cluster: scripts/test cluster runs it"]
async fn two_nodes_killed_then_restarted() {
    let _one = ONE_AT_A_TIME.lock().await;
    let mut run = Run::start("two.nodes", Setup::default()).await;
    run.run_for(3.0).await;
    run.clock_step(0, -600);
    run.run_for(2.0).await;
    let first = pick_node(&mut run, false);
    let second = 1 + (first + run.rng.range(0, 2) as usize) % 3;
    run.event(&format!("SIGKILL nodes {first} and {second}"));
    block(|| {
        run.cluster.kill(first);
        run.cluster.kill(second);
    });
    let down = run.event("two of three nodes down");
    for server in 0..2 {
        expect_store_unavailable(&run, server).await;
        let took = readyz_becomes(&run, server, 503).await;
        println!("[two.nodes] server {server}: /readyz 503 after {took:.1?}");
    }
    run.run_for(3.0).await;
    let up = run.event(&format!("starting nodes {first} and {second} again"));
    block(|| {
        std::thread::scope(|s| {
            s.spawn(|| run.cluster.restart(first));
            s.spawn(|| run.cluster.restart(second));
        })
    });
    let restarted = run.event("both nodes Up/Normal again");
    for server in 0..2 {
        let took = serving_again(&run, server).await;
        let ready = readyz_becomes(&run, server, 200).await;
        println!(
            "[two.nodes] server {server}: ACQUIRED again {took:.1?} after the nodes were back, /readyz 200 after {ready:.1?}"
        );
    }
    run.run_for(4.0).await;
    let name = run.name;
    let findings = run.finish().await;
    figures(name, &findings.ops, "two nodes down", down, up);
    figures(name, &findings.ops, "nodes restarting", up, restarted);
    // Nothing was granted while a quorum was missing.
    let granted: Vec<String> = findings
        .ops
        .iter()
        .filter(|op| op.invoke >= down && op.ret <= up)
        .filter(|op| {
            matches!(
                op.answer,
                Answer::Claimed { lease: Some(_), .. }
                    | Answer::Settled(_)
                    | Answer::Renewed { .. }
            )
        })
        .map(|op| op.to_string())
        .collect();
    assert!(
        granted.is_empty(),
        "granted without a quorum:\n{}",
        granted.join("\n")
    );
    let answered = findings
        .ops
        .iter()
        .filter(|op| op.invoke >= down && op.ret <= up && op.answer.is_known())
        .count();
    println!("[two.nodes] operations invoked and answered while two nodes were down: {answered}");
    // Every acknowledged Complete is still SUCCEEDED (the effect verdict checks each one).
    findings.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a 3-node Cassandra cluster: scripts/test cluster runs it"]
async fn wiped_node_replaced_under_load_then_repaired() {
    let _one = ONE_AT_A_TIME.lock().await;
    let mut run = Run::start("replaced", Setup::default()).await;
    run.run_for(3.0).await;
    run.clock_step(1, 500);
    run.run_for(2.0).await;
    let node = pick_node(&mut run, true);
    let killed = run.event(&format!("SIGKILL node {node}"));
    block(|| run.cluster.kill(node));
    run.run_for(3.0).await;
    run.event(&format!(
        "node {node}: disks wiped, starting as a replacement of itself"
    ));
    block(|| run.cluster.replace(node));
    let replaced = run.event(&format!("node {node} replaced (streamed) and Up/Normal"));
    run.run_for(3.0).await;
    let keyspace = run.keyspace.clone();
    run.event(&format!("nodetool repair -full {keyspace} on node {node}"));
    let out = block(|| run.cluster.repair(node, &keyspace));
    let repaired = run.event(&format!(
        "repair: {}",
        out.lines().last().unwrap_or_default().trim()
    ));
    run.run_for(3.0).await;
    let name = run.name;
    let findings = run.finish().await;
    figures(
        name,
        &findings.ops,
        "node down and replacing",
        killed,
        replaced,
    );
    figures(name, &findings.ops, "repair", replaced, repaired);
    findings.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a 3-node Cassandra cluster: scripts/test cluster runs it"]
async fn the_checker_catches_a_planted_lost_update() {
    let _one = ONE_AT_A_TIME.lock().await;
    // Replacing writes that skip their version check: concurrent Claims of a released (RETRY)
    // record, or a takeover racing another, can both be ACQUIRED with the same token.
    let setup = Setup {
        effects: false,
        history: recorder::Config {
            clients: 6,
            active_keys: 2,
            ops_per_key: 60,
            retry_percent: 50,
        },
        server_env: vec![("ONCEKEY_TEST_PLANTED_BUG".into(), "lost-update".into())],
    };
    let mut run = Run::start("planted", setup).await;
    run.run_for(4.0).await;
    run.clock_step(1, 1_000);
    run.run_for(12.0).await;
    let started = now_ms();
    let findings = run.finish().await;
    let report = &findings.report;
    println!(
        "[planted] {} of {} keys not linearizable (checked {} ms after the stop)",
        report.violations.len(),
        report.keys,
        now_ms() - started
    );
    let (key, lines) = report.violations.first().unwrap_or_else(|| {
        panic!(
            "the checker missed the planted lost update: {}",
            report.summary()
        )
    });
    println!("[planted] e.g. key {key}:");
    for line in lines.iter().take(40) {
        println!("[planted]   {line}");
    }
}

/// A conditional write that applied, answered with an `Unavailable` error instead (what a
/// coordinator may say when a Paxos round it gave up on had its proposal accepted): the store must
/// still report it applied. Were the driver to retry it on another node (its default policy does
/// so for Unavailable, even for non-idempotent statements), the retry would find the condition
/// failed by the write's own first copy and the store would call its own write a conflict: the
/// engine then answers a Claim that acquired with IN_PROGRESS (the history check found such an
/// acquisition nobody was told about under a node kill).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a 3-node Cassandra cluster: scripts/test cluster runs it"]
async fn a_write_answered_unavailable_after_it_applied_is_recognised() {
    use faults::proxy::{CqlProxy, Fault};
    use oncekey_server::ledger::{self, ClaimArgs, RecordId, Semantics};
    use oncekey_server::store::cql::{CqlStore, Levels};
    use oncekey_server::store::{Cas, Store};
    use scylla::statement::SerialConsistency;
    use std::collections::HashMap;
    use std::net::SocketAddr;
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    let _one = ONE_AT_A_TIME.lock().await;
    let cluster = block(cluster::nodes::Cluster::require);
    let keyspace = block(|| cluster::run::keyspace(&cluster.nodes));
    let nodes: Vec<&str> = cluster.nodes.split(',').collect();
    let proxies = CqlProxy::start_group(&nodes, faults::Rng::seed()).await;
    // The driver learns the nodes' own addresses, with the port of its contact point (Cassandra's
    // system.peers has none); each is reached through its proxy.
    let mut map: HashMap<SocketAddr, SocketAddr> = HashMap::new();
    for (node, proxy) in nodes.iter().zip(&proxies) {
        let node: SocketAddr = node.parse().unwrap();
        map.insert(node, proxy.addr);
        map.insert(
            SocketAddr::new(node.ip(), proxies[0].addr.port()),
            proxy.addr,
        );
    }
    let session = scylla::client::session_builder::SessionBuilder::new()
        .known_node_addr(proxies[0].addr)
        .address_translator(Arc::new(map))
        .build()
        .await
        .expect("a session through the proxies");
    let store = CqlStore::open(
        Arc::new(session),
        &keyspace,
        Levels::new(false, SerialConsistency::Serial),
    )
    .await
    .expect("the store");

    let args = ClaimArgs {
        fingerprint: [9; 32],
        lease_ttl: 30_000,
        retention: 3_600_000,
        semantics: Semantics::AtMostOnce,
        owner: "unavailable-test".into(),
        parent: None,
        reconcile: false,
        require_approval: false,
        max_attempts: 0,
        budget: None,
    };
    for (n, case) in ["insert", "replace"].into_iter().enumerate() {
        let id = RecordId::new("t", "unavailable.test", format!("k{n}"));
        let now = now_ms();
        let created = ledger::claim(&id, None, &args, now)
            .unwrap()
            .record()
            .clone();
        if case == "replace" {
            assert_eq!(
                store.insert_if_absent(&created, now).await.unwrap(),
                Cas::Applied
            );
        }
        proxies[0].set(Fault::UnavailableOnce);
        let cas = match case {
            "insert" => store.insert_if_absent(&created, now).await.unwrap(),
            _ => {
                let mut next = created.clone();
                next.version += 1;
                next.fencing_token += 1;
                store
                    .replace_if_version(&next, created.version, true, now)
                    .await
                    .unwrap()
            }
        };
        let forged: u64 = proxies
            .iter()
            .map(|p| p.stats().forged.load(Ordering::Relaxed))
            .sum();
        assert_eq!(
            forged,
            n as u64 + 1,
            "the proxy did not forge the answer to the {case}"
        );
        assert_eq!(
            cas,
            Cas::Applied,
            "{case}: the store called its own write a conflict"
        );
    }
}
