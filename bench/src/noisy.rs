//! `--scenario noisy`: does one tenant's flood slow the others? A quiet tenant (`--tenant` /
//! `--token`) runs a modest steady load — `--quiet-rate` Claim + Complete cycles a second, open
//! loop — first alone, then while a noisy tenant (`--noisy-tenant` / `--noisy-token`) offers
//! `--noisy-factor` × `--noisy-limit` Claims of fresh keys a second (completing those it
//! acquires, ignoring pushback, as a runaway client would). `--noisy-limit` is the rate the
//! server admits for the noisy tenant (its `--tenant-rate` or limits-file rate).
//!
//! Reported: the quiet tenant's latency in both phases, the ratio of its p99s (the acceptance is
//! within 2×), and how many of the noisy tenant's Claims were sent, admitted and refused with
//! RATE_LIMITED. Open loop: each op is started on schedule in its own task, so a slow answer does
//! not delay the next request; ops are timed from their start.

use super::args::BenchArgs;
use super::cpu;
use super::driver::{load_average, Measurement};
use super::grpc::{GrpcConn, Target};
use super::keys::Keys;
use super::recorder::{Recorder, Series};
use super::report::{Report, ScenarioResult};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// ClaimOutcome ACQUIRED (proto numbering).
const ACQUIRED: i32 = 1;
/// Most noisy ops in flight at once; beyond it the flood skips sends (counted) rather than pile
/// up tasks without bound when the server stalls.
const MAX_OUTSTANDING: usize = 4096;

/// What one paced load did.
#[derive(Default)]
struct Tally {
    rec: Mutex<Recorder>,
    sent: AtomicU64,
    refused: AtomicU64,
    skipped: AtomicU64,
}

impl Tally {
    fn record(&self, f: impl FnOnce(&mut Recorder)) {
        f(&mut self.rec.lock().unwrap_or_else(|e| e.into_inner()));
    }

    fn take(&self) -> Recorder {
        std::mem::take(&mut self.rec.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// Which load a paced loop sends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Load {
    /// Claim + Complete of a fresh key; every op must succeed.
    Quiet,
    /// Claim of a fresh key (Complete when acquired); RATE_LIMITED is counted, not an error.
    Flood,
}

/// The measured window of one phase.
#[derive(Clone, Copy)]
struct Window {
    warm: Instant,
    start: Instant,
    end: Instant,
}

/// Runs the scenario and adds its results (and a `noisy` summary) to `report`.
pub async fn run(args: &BenchArgs, report: &mut Report, probe: &cpu::Probe) -> anyhow::Result<()> {
    let limit = args.noisy_limit.unwrap_or_default();
    let flood_rate = limit * args.noisy_factor;
    let quiet = Target::connect(args).await?;
    let mut noisy_args = args.clone();
    noisy_args.tenant = args.noisy_tenant.clone();
    noisy_args.token = args.noisy_token.clone();
    let noisy = Target::connect(&noisy_args).await?;
    let keys = Arc::new(Keys::new(1, 1, 1));

    // Each round measures the quiet tenant alone, then beside the flood, for an equal share of
    // --duration: with several rounds, drift in the machine's load falls on both alike.
    let rounds = args.noisy_rounds.max(1);
    let slice = Duration::from_millis(args.duration.max(0) as u64) / rounds;
    let (mut alone, mut with) = (Condition::default(), Condition::default());
    for round in 1..=rounds {
        alone.add(phase(args, slice, &quiet, None, &keys, probe).await);
        with.add(
            phase(
                args,
                slice,
                &quiet,
                Some((&noisy, flood_rate)),
                &keys,
                probe,
            )
            .await,
        );
        if rounds > 1 {
            eprintln!("bench: noisy round {round}/{rounds} done");
        }
    }
    let secs = with.elapsed.as_secs_f64();
    let counts = json!({
        "sent": with.counts.sent,
        "admitted": with.flood.ops,
        "refused_rate_limited": with.counts.refused,
        "skipped": with.counts.skipped,
    });
    let cpu = json!({"alone": alone.cores(), "with_noisy": with.cores()});
    let flood = Measurement {
        recorder: std::mem::take(&mut with.flood),
        elapsed: with.elapsed,
        workers: args.connections,
        load: with.load,
        cpu: cpu::Used::default(),
    };
    report.push(ScenarioResult::new(
        "noisy",
        "quiet-alone",
        alone.quiet(args),
    ));
    eprintln!("{}", report.last_line());
    report.push(ScenarioResult::new(
        "noisy",
        "quiet+noisy",
        with.quiet(args),
    ));
    eprintln!("{}", report.last_line());
    report.push(ScenarioResult::new("noisy", "noisy", flood));
    eprintln!("{}", report.last_line());

    let mut summary = summarize(report, args, limit, flood_rate, secs, counts);
    summary["rounds"] = json!(rounds);
    summary["cpu_cores"] = cpu;
    let text = text(&summary);
    report.section("noisy", summary, text);
    Ok(())
}

/// The flood's counts.
#[derive(Default, Clone, Copy)]
struct Counts {
    sent: u64,
    refused: u64,
    skipped: u64,
}

/// What one phase measured.
struct PhaseResult {
    quiet: Recorder,
    flood: Option<(Recorder, Counts)>,
    elapsed: Duration,
    load: (f64, f64),
    /// CPU time both ends used in the measured window: the phase's, not one tenant's.
    cpu: cpu::Used,
}

/// One condition (quiet alone, or quiet beside the flood) over every round.
#[derive(Default)]
struct Condition {
    quiet: Recorder,
    flood: Recorder,
    counts: Counts,
    elapsed: Duration,
    load: (f64, f64),
    server_cpu: Option<f64>,
    bench_cpu: Option<f64>,
    rounds: u32,
}

impl Condition {
    fn add(&mut self, phase: PhaseResult) {
        self.quiet.merge(phase.quiet);
        if let Some((flood, counts)) = phase.flood {
            self.flood.merge(flood);
            self.counts.sent += counts.sent;
            self.counts.refused += counts.refused;
            self.counts.skipped += counts.skipped;
        }
        self.elapsed += phase.elapsed;
        if self.rounds == 0 {
            self.load.0 = phase.load.0;
            self.server_cpu = phase.cpu.server;
            self.bench_cpu = phase.cpu.client;
        } else {
            let add = |a: Option<f64>, b: Option<f64>| Some(a? + b?);
            self.server_cpu = add(self.server_cpu, phase.cpu.server);
            self.bench_cpu = add(self.bench_cpu, phase.cpu.client);
        }
        self.load.1 = phase.load.1;
        self.rounds += 1;
    }

    /// CPU cores each end kept busy on average.
    fn cores(&self) -> Value {
        let secs = self.elapsed.as_secs_f64();
        let per_sec = |s: Option<f64>| s.filter(|_| secs > 0.0).map(|s| s / secs);
        json!({"server": per_sec(self.server_cpu), "bench": per_sec(self.bench_cpu)})
    }

    /// The quiet tenant's measurement (CPU is reported per phase, not per tenant).
    fn quiet(&mut self, args: &BenchArgs) -> Measurement {
        Measurement {
            recorder: std::mem::take(&mut self.quiet),
            elapsed: self.elapsed,
            workers: args.connections,
            load: self.load,
            cpu: cpu::Used::default(),
        }
    }
}

/// The quiet tenant's percentiles in both phases, their ratio and the flood's counts.
fn summarize(
    report: &Report,
    args: &BenchArgs,
    limit: f64,
    flood_rate: f64,
    secs: f64,
    counts: Value,
) -> Value {
    let p = |target: &str, q: f64| report.percentile("noisy", target, q);
    let (alone99, with99) = (p("quiet-alone", 0.99), p("quiet+noisy", 0.99));
    let ratio = match (alone99, with99) {
        (Some(a), Some(w)) if a > 0.0 => Some(w / a),
        _ => None,
    };
    let sent = counts["sent"].as_u64().unwrap_or(0) as f64;
    json!({
        "noisy_limit_per_sec": limit,
        "noisy_offered_per_sec": flood_rate,
        "noisy_sent_per_sec": if secs > 0.0 { sent / secs } else { 0.0 },
        "quiet_rate_per_sec": args.quiet_rate,
        "quiet_alone_ms": {"p50": p("quiet-alone", 0.5), "p99": alone99},
        "quiet_with_noisy_ms": {"p50": p("quiet+noisy", 0.5), "p99": with99},
        "quiet_p99_ratio": ratio,
        "quiet_p99_within_2x": ratio.map(|r| r <= 2.0),
        "noisy": counts,
    })
}

fn text(s: &Value) -> String {
    let ms = |v: &Value| v.as_f64().map_or("-".into(), |x| format!("{x:.3}"));
    let cores = |phase: &str| {
        let c = &s["cpu_cores"][phase];
        let f = |v: &Value| v.as_f64().map_or("-".into(), |x| format!("{x:.2}"));
        format!("{}+{}", f(&c["server"]), f(&c["bench"]))
    };
    format!(
        "noisy: quiet tenant p50/p99 {} / {} ms alone, {} / {} ms beside the flood (p99 ratio {}, within 2x: {}); \
         noisy tenant offered {:.0}/s (limit {}/s): sent {}, admitted {}, refused RATE_LIMITED {}, skipped {}; \
         CPU cores busy (server+bench) {} alone, {} beside the flood\n",
        ms(&s["quiet_alone_ms"]["p50"]),
        ms(&s["quiet_alone_ms"]["p99"]),
        ms(&s["quiet_with_noisy_ms"]["p50"]),
        ms(&s["quiet_with_noisy_ms"]["p99"]),
        s["quiet_p99_ratio"].as_f64().map_or("-".into(), |r| format!("{r:.2}")),
        s["quiet_p99_within_2x"].as_bool().map_or("-", |b| if b { "yes" } else { "no" }),
        s["noisy_offered_per_sec"].as_f64().unwrap_or(0.0),
        s["noisy_limit_per_sec"],
        s["noisy"]["sent"],
        s["noisy"]["admitted"],
        s["noisy"]["refused_rate_limited"],
        s["noisy"]["skipped"],
        cores("alone"),
        cores("with_noisy"),
    )
}

/// One phase: the quiet load for --warmup + `duration`, with the flood beside it when given.
async fn phase(
    args: &BenchArgs,
    duration: Duration,
    quiet: &Target,
    flood: Option<(&Target, f64)>,
    keys: &Arc<Keys>,
    probe: &cpu::Probe,
) -> PhaseResult {
    let warm = Instant::now();
    let start = warm + Duration::from_millis(args.warmup.max(0) as u64);
    let window = Window {
        warm,
        start,
        end: start + duration,
    };
    let load_before = load_average();
    let conns = |t: &Target| {
        (0..args.connections)
            .map(|i| t.worker(i))
            .collect::<Vec<_>>()
    };
    let quiet_tally = Arc::new(Tally::default());
    let quiet_run = paced(
        conns(quiet),
        args.quiet_rate,
        window,
        keys.clone(),
        Load::Quiet,
        quiet_tally.clone(),
    );
    let flood_tally = Arc::new(Tally::default());
    let flood_run = async {
        if let Some((target, rate)) = flood {
            paced(
                conns(target),
                rate,
                window,
                keys.clone(),
                Load::Flood,
                flood_tally.clone(),
            )
            .await;
        }
    };
    let sample = async {
        tokio::time::sleep_until(start.into()).await;
        probe.sample().await
    };
    let ((), (), cpu_before) = tokio::join!(quiet_run, flood_run, sample);
    let cpu = cpu::Used::between(cpu_before, probe.sample().await);
    PhaseResult {
        quiet: quiet_tally.take(),
        flood: flood.map(|_| {
            let counts = Counts {
                sent: flood_tally.sent.load(Ordering::Relaxed),
                refused: flood_tally.refused.load(Ordering::Relaxed),
                skipped: flood_tally.skipped.load(Ordering::Relaxed),
            };
            (flood_tally.take(), counts)
        }),
        elapsed: duration,
        load: (load_before, load_average()),
        cpu,
    }
}

/// Starts one `load` op every 1/`rate` s from `window.warm` to `window.end`, each in its own
/// task on the connections in turn; ops started in the measured window are recorded in `tally`.
async fn paced(
    conns: Vec<GrpcConn>,
    rate: f64,
    window: Window,
    keys: Arc<Keys>,
    load: Load,
    tally: Arc<Tally>,
) {
    let outstanding = Arc::new(Semaphore::new(MAX_OUTSTANDING));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0u64.. {
        // Whole nanoseconds from the start, so the schedule is exact for round rates.
        let due = window.warm + Duration::from_nanos((i as f64 * 1e9 / rate).round() as u64);
        if due >= window.end {
            break;
        }
        tokio::time::sleep_until(due.into()).await;
        let measured = due >= window.start;
        let Ok(permit) = outstanding.clone().try_acquire_owned() else {
            if measured {
                tally.skipped.fetch_add(1, Ordering::Relaxed);
            }
            continue;
        };
        let mut conn = conns[i as usize % conns.len()].clone();
        let (key, tally) = (keys.fresh(), tally.clone());
        tasks.spawn(async move {
            let _permit = permit;
            one(&mut conn, key, load, measured.then_some(&*tally)).await;
        });
        // Reap finished tasks as we go, so the set stays as small as what is in flight.
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
}

/// One op; recorded in `tally` when measured.
async fn one(conn: &mut GrpcConn, key: String, load: Load, tally: Option<&Tally>) {
    if let Some(t) = tally {
        t.sent.fetch_add(1, Ordering::Relaxed);
    }
    let started = Instant::now();
    let claimed = conn.claim(key.clone()).await;
    let claim_time = started.elapsed();
    let result = match claimed {
        Err(s) if load == Load::Flood && s.code() == tonic::Code::ResourceExhausted => {
            if let Some(t) = tally {
                t.refused.fetch_add(1, Ordering::Relaxed);
            }
            return;
        }
        Err(s) => Err(super::driver::describe(&s)),
        Ok(c) if c.outcome != ACQUIRED => Err(format!("unexpected Claim outcome {}", c.outcome)),
        Ok(c) => {
            let at = Instant::now();
            conn.complete(key, c.token)
                .await
                .map(|()| (c.outcome, at.elapsed()))
                .map_err(|s| super::driver::describe(&s))
        }
    };
    let Some(t) = tally else { return };
    let total = started.elapsed();
    t.record(|rec| match result {
        Ok((outcome, complete_time)) => {
            rec.ops += 1;
            rec.outcome(outcome);
            rec.record(Series::Op, total);
            rec.record(Series::Claim, claim_time);
            rec.record(Series::Complete, complete_time);
        }
        Err(e) => rec.error(e),
    });
}
