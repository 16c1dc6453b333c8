//! Runs one scenario: one task per worker, each keeping one op in flight on its connection, an
//! unmeasured warm-up, then a measured window bounded by a duration or a shared op budget.
//! Each worker records into its own `Recorder`; the results are merged once at the end.

use super::args::BenchArgs;
use super::args::Kind;
use super::claimed::Claimed;
use super::cpu;
use super::cql::CqlConn;
use super::gateway::HttpConn;
use super::grpc::GrpcConn;
use super::keys::Keys;
use super::peer::PgConn;
use super::peers::{self, etcd::EtcdConn, redis::RedisConn};
use super::recorder::{Recorder, Series};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// ClaimOutcome values the driver checks (proto numbering).
const ACQUIRED: i32 = 1;
const COMPLETED: i32 = 2;

/// One worker's connection: the server under test, a peer design, or the raw CQL LWTs.
pub enum Conn {
    /// Oncekey over gRPC.
    Grpc(Box<GrpcConn>),
    /// The PostgreSQL design.
    Pg(PgConn),
    /// The CQL store's lightweight transactions, without the service.
    Cql(Box<CqlConn>),
    /// HTTP, through `oncekey gateway` or to its upstream directly.
    Http(Box<HttpConn>),
    /// The Redis design (Lua scripts).
    Redis(Box<RedisConn>),
    /// The etcd design (v3 transactions).
    Etcd(Box<EtcdConn>),
}

impl Conn {
    async fn noop(&mut self) -> Result<(), String> {
        match self {
            Conn::Grpc(c) => c.noop().await.map_err(|s| describe(&s)),
            Conn::Pg(_) => Err("noop is not a PostgreSQL scenario".into()),
            Conn::Cql(_) => Err("noop is not a cql-raw scenario".into()),
            Conn::Http(_) => Err("noop is not an HTTP scenario".into()),
            Conn::Redis(_) | Conn::Etcd(_) => Err("noop is not a peer scenario".into()),
        }
    }

    async fn claim(&mut self, key: String) -> Result<Claimed, String> {
        match self {
            Conn::Grpc(c) => c.claim(key).await.map_err(|s| describe(&s)),
            Conn::Pg(c) => c.claim(&key).await,
            Conn::Cql(c) => c.claim(key).await,
            Conn::Http(_) => Err("claim is not an HTTP scenario".into()),
            Conn::Redis(c) => match c.claim(&key).await {
                Ok(claim) => peers::outcome(&claim, c.body()),
                Err(e) => Err(format!("redis {e}")),
            },
            Conn::Etcd(c) => match c.claim(&key).await {
                Ok(claim) => peers::outcome(&claim, c.body()),
                Err(e) => Err(format!("etcd {e}")),
            },
        }
    }

    async fn complete(&mut self, key: String, token: u64) -> Result<(), String> {
        match self {
            Conn::Grpc(c) => c.complete(key, token).await.map_err(|s| describe(&s)),
            Conn::Pg(c) => c.complete(&key).await,
            Conn::Cql(c) => c.complete(key, token).await,
            Conn::Http(_) => Err("complete is not an HTTP scenario".into()),
            Conn::Redis(c) => c
                .complete(&key, token)
                .await
                .map_err(|e| format!("redis {e}")),
            Conn::Etcd(c) => c
                .complete(&key, token)
                .await
                .map_err(|e| format!("etcd {e}")),
        }
    }
}

/// A gRPC error as `CODE REASON` (no message: it may differ per key).
pub(super) fn describe(status: &tonic::Status) -> String {
    use tonic_types::StatusExt;
    let reason = status
        .get_details_error_info()
        .map(|i| i.reason)
        .unwrap_or_default();
    format!(
        "{} {reason}",
        oncekey_server::telemetry::metrics::code_name(status.code())
    )
}

/// The ops a scenario runs, weighted, and where their keys come from.
pub struct Workload {
    kinds: Vec<(Kind, u32)>,
    total: u32,
    keys: Arc<Keys>,
}

impl Workload {
    /// A workload drawing from `kinds` by weight.
    pub fn new(kinds: Vec<(Kind, u32)>, keys: Arc<Keys>) -> Arc<Self> {
        let total = kinds.iter().map(|(_, w)| w).sum();
        Arc::new(Self { kinds, total, keys })
    }

    fn pick(&self, rng: &mut u64) -> Kind {
        if self.kinds.len() == 1 {
            return self.kinds[0].0;
        }
        let mut roll = (next(rng) % u64::from(self.total)) as u32;
        for (kind, weight) in &self.kinds {
            if roll < *weight {
                return *kind;
            }
            roll -= weight;
        }
        self.kinds[0].0
    }
}

/// xorshift64: a worker-local random number without locks or allocation.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// How long a scenario runs.
pub struct Plan {
    warmup: Duration,
    duration: Option<Duration>,
    ops: Option<u64>,
}

impl Plan {
    /// The plan the flags ask for.
    pub fn from_args(args: &BenchArgs) -> Self {
        let ms = |m: i64| Duration::from_millis(m.max(0) as u64);
        Self {
            warmup: ms(args.warmup),
            duration: args.ops.is_none().then(|| ms(args.duration)),
            ops: args.ops,
        }
    }

    /// Slice `i` of `slices` of the flags' plan: `--duration / slices`, after the whole warm-up
    /// for the first slice and a short one (at most 300 ms: the workers' ramp-up) for the others.
    pub fn slice(args: &BenchArgs, i: u32, slices: u32) -> Self {
        let whole = Self::from_args(args);
        let short = Duration::from_millis(300);
        Self {
            warmup: if i == 0 {
                whole.warmup
            } else {
                whole.warmup.min(short)
            },
            duration: whole.duration.map(|d| d / slices.max(1)),
            ops: None,
        }
    }

    /// Exactly `ops` ops, no warm-up (setup and preload).
    pub fn count(ops: u64) -> Self {
        Self {
            warmup: Duration::ZERO,
            duration: None,
            ops: Some(ops),
        }
    }
}

/// What a scenario measured.
pub struct Measurement {
    /// Every worker's samples, merged.
    pub recorder: Recorder,
    /// The measured window.
    pub elapsed: Duration,
    /// Workers that ran.
    pub workers: usize,
    /// 1-minute load average before and after.
    pub load: (f64, f64),
    /// CPU time each end used in the measured window.
    pub cpu: cpu::Used,
}

impl Measurement {
    /// Adds a later measurement of the same scenario and target (another slice): its samples,
    /// its window and its CPU time; the load before stays this one's, the load after is its.
    pub fn merge(&mut self, other: Measurement) {
        self.recorder.merge(other.recorder);
        self.elapsed += other.elapsed;
        self.workers = self.workers.max(other.workers);
        self.load.1 = other.load.1;
        self.cpu = self.cpu.plus(other.cpu);
    }

    /// Measured ops per second.
    pub fn ops_per_sec(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            self.recorder.ops as f64 / secs
        } else {
            0.0
        }
    }

    /// Fails when any op failed.
    pub fn into_result(self) -> anyhow::Result<Self> {
        match self.recorder.errors.iter().next() {
            None => Ok(self),
            Some((what, n)) => anyhow::bail!("{n} ops failed with {what}"),
        }
    }
}

struct Shared {
    start: Instant,
    end: Option<Instant>,
    left: Option<AtomicI64>,
    workload: Arc<Workload>,
}

/// Runs `workload` on one task per connection until `plan` is done; `probe` samples CPU time when
/// the measured window starts and once every worker is done.
pub async fn drive(
    conns: Vec<Conn>,
    workload: Arc<Workload>,
    plan: &Plan,
    probe: &cpu::Probe,
) -> Measurement {
    let load_before = load_average();
    let start = Instant::now() + plan.warmup;
    let shared = Arc::new(Shared {
        start,
        end: plan.duration.map(|d| start + d),
        left: plan.ops.map(|n| AtomicI64::new(n as i64)),
        workload,
    });
    let workers = conns.len();
    let tasks: Vec<_> = conns
        .into_iter()
        .enumerate()
        .map(|(i, conn)| tokio::spawn(worker(conn, shared.clone(), i as u64)))
        .collect();
    tokio::time::sleep_until(start.into()).await;
    let cpu_before = probe.sample().await;
    let mut recorder = Recorder::default();
    let mut finished = start;
    for task in tasks {
        match task.await {
            Ok((rec, last)) => {
                recorder.merge(rec);
                finished = finished.max(last);
            }
            Err(e) => recorder.error(format!("worker panicked: {e}")),
        }
    }
    Measurement {
        recorder,
        elapsed: finished.saturating_duration_since(start),
        workers,
        load: (load_before, load_average()),
        cpu: cpu::Used::between(cpu_before, probe.sample().await),
    }
}

async fn worker(mut conn: Conn, shared: Arc<Shared>, i: u64) -> (Recorder, Instant) {
    let mut rec = Recorder::default();
    let mut warm = Recorder::default();
    let mut rng = 0x9E37_79B9_7F4A_7C15 ^ (i + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let mixed = shared.workload.kinds.len() > 1;
    let mut last = shared.start;
    loop {
        let now = Instant::now();
        let measuring = now >= shared.start;
        if measuring {
            if shared.end.is_some_and(|end| now >= end) {
                break;
            }
            if let Some(left) = &shared.left {
                if left.fetch_sub(1, Ordering::Relaxed) <= 0 {
                    break;
                }
            }
        }
        let kind = shared.workload.pick(&mut rng);
        let sink = if measuring { &mut rec } else { &mut warm };
        one_op(
            &mut conn,
            kind,
            &shared.workload.keys,
            &mut rng,
            sink,
            mixed,
        )
        .await;
        if measuring {
            last = Instant::now();
        }
    }
    (rec, last)
}

/// Runs one op of `kind` and records its latency (or its error) in `rec`.
async fn one_op(
    conn: &mut Conn,
    kind: Kind,
    keys: &Keys,
    rng: &mut u64,
    rec: &mut Recorder,
    mixed: bool,
) {
    let started = Instant::now();
    let result = match kind {
        Kind::Noop => conn.noop().await,
        Kind::Cycle => cycle(conn, keys.fresh(), rec).await,
        Kind::Fill => cycle(conn, keys.fill(), rec).await,
        Kind::ReplaySetup => cycle(conn, keys.replay_setup(), rec).await,
        Kind::Replay => match conn.claim(keys.replay(next(rng))).await {
            Ok(c) => {
                rec.outcome(c.outcome);
                expect(c.outcome, COMPLETED, "replay")
            }
            Err(e) => Err(e),
        },
        Kind::Storm => storm(conn, keys.storm(), rec).await,
        Kind::HttpPost => match conn {
            Conn::Http(c) => c.post(keys.fresh()).await,
            _ => Err("an HTTP op needs an HTTP connection".into()),
        },
    };
    let elapsed = started.elapsed();
    match result {
        Ok(()) => {
            rec.ops += 1;
            rec.record(Series::Op, elapsed);
            if mixed {
                let series = match kind {
                    Kind::Noop => Series::Noop,
                    Kind::Replay => Series::Replay,
                    Kind::Storm => Series::Storm,
                    Kind::Cycle | Kind::Fill | Kind::ReplaySetup | Kind::HttpPost => Series::Cycle,
                };
                rec.record(series, elapsed);
            }
        }
        Err(e) => rec.error(e),
    }
}

fn expect(outcome: i32, wanted: i32, what: &str) -> Result<(), String> {
    if outcome == wanted {
        Ok(())
    } else {
        Err(format!("{what}: unexpected Claim outcome {outcome}"))
    }
}

/// Claim (must acquire) then Complete; both RPCs timed on their own too.
async fn cycle(conn: &mut Conn, key: String, rec: &mut Recorder) -> Result<(), String> {
    let started = Instant::now();
    let claimed = conn.claim(key.clone()).await?;
    let claimed_at = Instant::now();
    rec.record(Series::Claim, claimed_at - started);
    rec.outcome(claimed.outcome);
    expect(claimed.outcome, ACQUIRED, "cycle")?;
    conn.complete(key, claimed.token).await?;
    rec.record(Series::Complete, claimed_at.elapsed());
    Ok(())
}

/// Claim a hot key; the one that acquires completes it.
async fn storm(conn: &mut Conn, key: String, rec: &mut Recorder) -> Result<(), String> {
    let started = Instant::now();
    let claimed = conn.claim(key.clone()).await?;
    rec.record(Series::Claim, started.elapsed());
    rec.outcome(claimed.outcome);
    if claimed.outcome == ACQUIRED {
        let at = Instant::now();
        conn.complete(key, claimed.token).await?;
        rec.record(Series::Complete, at.elapsed());
    }
    Ok(())
}

/// The 1-minute load average (0 where /proc is missing).
pub fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weighted_pick_follows_the_weights() {
        let keys = Arc::new(Keys::new(1, 1, 1));
        let w = Workload::new(vec![(Kind::Cycle, 3), (Kind::Noop, 1)], keys);
        let mut rng = 7;
        let cycles = (0..4000)
            .filter(|_| w.pick(&mut rng) == Kind::Cycle)
            .count();
        assert!((2700..3300).contains(&cycles), "{cycles}");
    }
}
