//! `oncekey bench`: a load generator that drives a running server over real gRPC from its own
//! process — N concurrent workers over M HTTP/2 connections, for a fixed duration or op count,
//! after a warm-up — and reports throughput and HDR latency percentiles as a table and as JSON.
//! `--scenario noisy` (`noisy`) measures per-tenant fairness: a quiet tenant's latency alone and
//! beside a tenant offering ten times its admitted rate.
//! With `--peer postgres://…`, `redis://…` or `etcd://…` it runs `cycle` and `replay` with the
//! same concurrency through the classic PostgreSQL idempotency-key design, the Redis design (Lua
//! scripts) or the etcd design (v3 transactions), on equal durability (fsync before the answer).
//! With `--slices N` noop, cycle, replay and the peers' cycle and replay run interleaved in N
//! short slices (`interleave`), and each ratio is reported with its spread over the slices.
//! With `--cql-raw NODES` it runs `cycle` as the bare lightweight transactions the CQL store
//! issues, through the same driver and session settings, so a `--store cql` server's overhead over
//! them can be stated.
//!
//! It is a client, in a crate of its own (`oncekey-bench`): the production library does not carry
//! it, and it reaches the stores only through the server library's public API. It keeps its own
//! per-op work small (precomputed fingerprint and result body, worker-local histograms) so that
//! what it measures is the server.

mod args;
mod claimed;
mod cpu;
mod cql;
mod driver;
mod gateway;
mod grpc;
mod interleave;
mod keys;
mod noisy;
mod overhead;
mod peer;
mod peers;
mod recorder;
mod report;

pub use args::{BenchArgs, Scenario};

use anyhow::Context as _;
use args::Kind;
use driver::{Conn, Plan, Workload};
use report::{Report, ScenarioResult};
use std::sync::Arc;

/// Runs `oncekey bench`; fails when the server cannot be reached or any measured op failed.
pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    let args = args.validated()?;
    let keys = Arc::new(
        keys::Keys::new(args.replay_keys, args.hot_keys, args.claims_per_key)
            .scattered(args.key_order == "random"),
    );
    let target = grpc::Target::connect(&args).await?;
    // Connected before anything runs, so a wrong node or keyspace fails fast.
    let raw_cql = match args.cql_raw_config() {
        Some(cql) => {
            Some(cql::RawCql::connect(&cql, &args.tenant, &args.namespace, args.body_bytes).await?)
        }
        None => None,
    };
    let mut report = Report::new(&args);
    let plan = Plan::from_args(&args);
    let probe = cpu::Probe::new(args.server_metrics.clone());
    let oncekey = |kinds: Vec<(Kind, u32)>| Workload::new(kinds, keys.clone());
    if let (Some(raw), true) = (&raw_cql, args.cql_raw_first) {
        report.push(raw_cycle(raw, &args, &plan, &probe).await);
        eprintln!("{}", report.last_line());
    }
    let grpc_conns = |target: &grpc::Target| -> Vec<Conn> {
        (0..args.workers)
            .map(|i| Conn::Grpc(Box::new(target.worker(i))))
            .collect()
    };

    if args.preload > 0 {
        let fill = oncekey(vec![(Kind::Fill, 1)]);
        let plan = Plan::count(args.preload);
        let m = driver::drive(grpc_conns(&target), fill, &plan, &probe).await;
        report.push(ScenarioResult::new("fill", "oncekey", m));
        eprintln!("{}", report.last_line());
    }
    let needs_replay_keys = args
        .scenarios
        .iter()
        .any(|s| matches!(s, Scenario::Replay | Scenario::Mixed));
    if needs_replay_keys {
        let setup = oncekey(vec![(Kind::ReplaySetup, 1)]);
        driver::drive(
            grpc_conns(&target),
            setup,
            &Plan::count(args.replay_keys),
            &probe,
        )
        .await
        .into_result()
        .context("preparing the completed keys for replay")?;
    }
    let sliced = args.slices > 1;
    if sliced {
        interleave::run(&args, &target, keys.clone(), &probe, &mut report).await?;
    }
    for scenario in &args.scenarios {
        if sliced && interleave::interleaved(*scenario) {
            continue;
        }
        if *scenario == Scenario::Gateway {
            // Direct first, then through the gateway, with the same workers and plan.
            let rig = gateway::Rig::start(&args).await?;
            let client = gateway::client();
            for (target, keyed) in [("direct", false), ("gateway", true)] {
                let conns = (0..args.workers)
                    .map(|_| Conn::Http(Box::new(rig.worker(keyed, &client))))
                    .collect();
                let m =
                    driver::drive(conns, oncekey(vec![(Kind::HttpPost, 1)]), &plan, &probe).await;
                report.push(ScenarioResult::new("gateway", target, m));
                eprintln!("{}", report.last_line());
            }
            continue;
        }
        let kinds = match scenario {
            Scenario::Noop => vec![(Kind::Noop, 1)],
            Scenario::Cycle => vec![(Kind::Cycle, 1)],
            Scenario::Replay => vec![(Kind::Replay, 1)],
            Scenario::Storm => vec![(Kind::Storm, 1)],
            Scenario::Mixed => args.mix.clone(),
            Scenario::Noisy => {
                noisy::run(&args, &mut report, &probe).await?;
                continue;
            }
            Scenario::Gateway => unreachable!("handled above"),
        };
        let m = driver::drive(grpc_conns(&target), oncekey(kinds), &plan, &probe).await;
        report.push(ScenarioResult::new(scenario.name(), "oncekey", m));
        eprintln!("{}", report.last_line());
    }

    for url in args.peer.iter().filter(|_| !sliced) {
        peers::run::cycle_and_replay(url, &args, &plan, &probe, &mut report).await?;
    }

    if let (Some(raw), false) = (&raw_cql, args.cql_raw_first) {
        report.push(raw_cycle(raw, &args, &plan, &probe).await);
        eprintln!("{}", report.last_line());
    }

    report.finish();
    let json = serde_json::to_string_pretty(&report.json())?;
    if let Some(path) = &args.output {
        std::fs::write(path, format!("{json}\n"))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if args.json {
        println!("{json}");
    } else {
        print!("{}", report.table());
    }
    report.check()
}

/// `cycle` as the CQL store's raw LWTs, with one connection handle per worker.
async fn raw_cycle(
    raw: &cql::RawCql,
    args: &BenchArgs,
    plan: &Plan,
    probe: &cpu::Probe,
) -> ScenarioResult {
    let conns = (0..args.workers)
        .map(|_| Conn::Cql(Box::new(raw.worker())))
        .collect();
    let cycle = Workload::new(vec![(Kind::Cycle, 1)], Arc::new(keys::Keys::new(1, 1, 1)));
    // The server's CPU is not the raw LWTs': only the bench's own is measured.
    let m = driver::drive(conns, cycle, plan, &probe.client_only()).await;
    ScenarioResult::new("cycle", "cql-raw", m)
}
