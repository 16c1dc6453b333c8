//! Runs `cycle` and `replay` through one `--peer` design with the server's workers, plan and key
//! scheme: its own completed keys prepared first, then each scenario measured and reported under
//! the peer's name. The peer's CPU time takes the server's place where the peer reports it
//! (Redis's INFO, etcd's /metrics); PostgreSQL's processes are not measured.

use super::{etcd::EtcdPeer, redis::RedisPeer, Design, PeerKind};
use crate::args::BenchArgs;
use crate::args::Kind;
use crate::driver::{self, Conn, Plan, Workload};
use crate::report::{Report, ScenarioResult};
use crate::{cpu, grpc, keys, peer};
use anyhow::Context as _;
use bytes::Bytes;
use std::sync::Arc;

/// Connects to the peer at `url`, prepares its replay keys and measures cycle and replay.
pub async fn cycle_and_replay(
    url: &str,
    args: &BenchArgs,
    plan: &Plan,
    probe: &cpu::Probe,
    report: &mut Report,
) -> anyhow::Result<()> {
    let kind = PeerKind::of(url).context("--peer: unknown scheme")?;
    let pool = args.peer_pool.unwrap_or(args.workers);
    let fingerprint = oncekey_api::fingerprint::fingerprint_json(grpc::ARGUMENTS)
        .expect("the bench's arguments are valid JSON");
    let design = Design::new(
        &args.tenant,
        &args.namespace,
        &fingerprint,
        Bytes::from(vec![b'x'; args.body_bytes]),
    );
    // Each connection kind becomes the driver's per-worker connections.
    let (conns, probe): (Box<dyn Fn() -> Vec<Conn>>, cpu::Probe) = match kind {
        PeerKind::Postgres => {
            let pg = peer::Peer::connect(url, pool).await?;
            let conns = move || (0..args.workers).map(|i| Conn::Pg(pg.worker(i))).collect();
            // PostgreSQL runs a process per connection: only the bench's own CPU is measured.
            (Box::new(conns), probe.client_only())
        }
        PeerKind::Redis => {
            let redis = RedisPeer::connect(url, pool, design).await?;
            let probe = cpu::Probe::redis(redis.addr());
            let conns = move || {
                (0..args.workers)
                    .map(|i| Conn::Redis(Box::new(redis.worker(i))))
                    .collect()
            };
            (Box::new(conns), probe)
        }
        PeerKind::Etcd => {
            let etcd = EtcdPeer::connect(url, args.connections, design).await?;
            let probe = cpu::Probe::new(Some(etcd.metrics_url()));
            let conns = move || {
                (0..args.workers)
                    .map(|i| Conn::Etcd(Box::new(etcd.worker(i))))
                    .collect()
            };
            (Box::new(conns), probe)
        }
    };
    // Fresh generators: the peer's replay keys must be the ones its own setup completes.
    let keys = Arc::new(
        keys::Keys::new(args.replay_keys, args.hot_keys, args.claims_per_key)
            .scattered(args.key_order == "random"),
    );
    let workload = |kind: Kind| Workload::new(vec![(kind, 1)], keys.clone());
    driver::drive(
        conns(),
        workload(Kind::ReplaySetup),
        &Plan::count(args.replay_keys),
        &probe,
    )
    .await
    .into_result()
    .with_context(|| format!("preparing the completed keys for replay in {}", kind.name()))?;
    for (name, op) in [("cycle", Kind::Cycle), ("replay", Kind::Replay)] {
        let m = driver::drive(conns(), workload(op), plan, &probe).await;
        report.push(ScenarioResult::new(name, kind.name(), m));
        eprintln!("{}", report.last_line());
    }
    Ok(())
}
