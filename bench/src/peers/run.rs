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

/// One `--peer` design, connected, with the server's workers and key scheme.
pub struct PeerRig {
    kind: PeerKind,
    conns: Box<dyn Fn() -> Vec<Conn>>,
    probe: cpu::Probe,
    keys: Arc<keys::Keys>,
}

impl PeerRig {
    /// Connects to the peer at `url`.
    pub async fn connect(url: &str, args: &BenchArgs, probe: &cpu::Probe) -> anyhow::Result<Self> {
        let kind = PeerKind::of(url).context("--peer: unknown scheme")?;
        let pool = args.peer_pool.unwrap_or(args.workers);
        let workers = args.workers;
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
                let conns = move || (0..workers).map(|i| Conn::Pg(pg.worker(i))).collect();
                // PostgreSQL runs a process per connection: only the bench's own CPU is measured.
                (Box::new(conns), probe.client_only())
            }
            PeerKind::Redis => {
                let redis = RedisPeer::connect(url, pool, design).await?;
                let probe = cpu::Probe::redis(redis.addr());
                let conns = move || {
                    (0..workers)
                        .map(|i| Conn::Redis(Box::new(redis.worker(i))))
                        .collect()
                };
                (Box::new(conns), probe)
            }
            PeerKind::Etcd => {
                let etcd = EtcdPeer::connect(url, args.connections, design).await?;
                let probe = cpu::Probe::new(Some(etcd.metrics_url()));
                let conns = move || {
                    (0..workers)
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
        Ok(Self {
            kind,
            conns,
            probe,
            keys,
        })
    }

    /// The peer's target name in the report.
    pub fn name(&self) -> &'static str {
        self.kind.name()
    }

    /// Completes the peer's own replay keys.
    pub async fn prepare(&self, replay_keys: u64) -> anyhow::Result<()> {
        self.measure(Kind::ReplaySetup, &Plan::count(replay_keys))
            .await
            .into_result()
            .with_context(|| {
                format!("preparing the completed keys for replay in {}", self.name())
            })?;
        Ok(())
    }

    /// Runs `kind` through the peer for `plan`.
    pub async fn measure(&self, kind: Kind, plan: &Plan) -> driver::Measurement {
        let workload = Workload::new(vec![(kind, 1)], self.keys.clone());
        driver::drive((self.conns)(), workload, plan, &self.probe).await
    }
}

/// Connects to the peer at `url`, prepares its replay keys and measures cycle and replay.
pub async fn cycle_and_replay(
    url: &str,
    args: &BenchArgs,
    plan: &Plan,
    probe: &cpu::Probe,
    report: &mut Report,
) -> anyhow::Result<()> {
    let rig = PeerRig::connect(url, args, probe).await?;
    rig.prepare(args.replay_keys).await?;
    for (name, op) in [("cycle", Kind::Cycle), ("replay", Kind::Replay)] {
        let m = rig.measure(op, plan).await;
        report.push(ScenarioResult::new(name, rig.name(), m));
        eprintln!("{}", report.last_line());
    }
    Ok(())
}
