//! `--slices N`: the server's noop, cycle and replay and every `--peer`'s cycle and replay,
//! measured interleaved — slice 1 runs each target for `--duration / N` in order, slice 2 in the
//! reverse order, and so on — so that a ratio between two targets compares the same minutes of
//! the machine, not one target's minute with another's. Each target's slices are merged into one
//! result (its samples, window and CPU time); each ratio (oncekey over a peer, a scenario over
//! noop) is also taken slice by slice and reported as the median with its spread (min–max).

use super::args::{BenchArgs, Kind, Scenario};
use super::driver::{self, Conn, Measurement, Plan, Workload};
use super::keys::Keys;
use super::peers::run::PeerRig;
use super::report::{Report, ScenarioResult};
use super::{cpu, grpc};
use serde_json::{json, Map, Value};
use std::fmt::Write as _;
use std::sync::Arc;

/// The scenarios measured interleaved; the others run once, whole, after them.
pub fn interleaved(scenario: Scenario) -> bool {
    matches!(
        scenario,
        Scenario::Noop | Scenario::Cycle | Scenario::Replay
    )
}

/// Where a slot's ops go.
enum Source {
    Oncekey,
    Peer(usize),
}

/// One (scenario, target) measured in every slice.
struct Slot {
    scenario: &'static str,
    kind: Kind,
    target: &'static str,
    source: Source,
    merged: Option<Measurement>,
    rates: Vec<f64>,
}

/// Measures the interleaved scenarios of `args` on `target` (whose replay keys are prepared) and
/// through every `--peer`, and adds their results and the ratios' spread to `report`.
pub async fn run(
    args: &BenchArgs,
    target: &grpc::Target,
    keys: Arc<Keys>,
    probe: &cpu::Probe,
    report: &mut Report,
) -> anyhow::Result<()> {
    let mut peers = Vec::new();
    for url in &args.peer {
        let rig = PeerRig::connect(url, args, probe).await?;
        rig.prepare(args.replay_keys).await?;
        peers.push(rig);
    }
    let mut slots = Vec::new();
    let slot = |scenario, kind, target, source| Slot {
        scenario,
        kind,
        target,
        source,
        merged: None,
        rates: Vec::new(),
    };
    for scenario in args.scenarios.iter().copied().filter(|s| interleaved(*s)) {
        let kind = match scenario {
            Scenario::Noop => Kind::Noop,
            Scenario::Cycle => Kind::Cycle,
            _ => Kind::Replay,
        };
        slots.push(slot(scenario.name(), kind, "oncekey", Source::Oncekey));
    }
    for (i, rig) in peers.iter().enumerate() {
        for (name, kind) in [("cycle", Kind::Cycle), ("replay", Kind::Replay)] {
            slots.push(slot(name, kind, rig.name(), Source::Peer(i)));
        }
    }
    let workload = |kind| Workload::new(vec![(kind, 1)], keys.clone());
    for i in 0..args.slices {
        let plan = Plan::slice(args, i, args.slices);
        let order: Vec<usize> = if i % 2 == 0 {
            (0..slots.len()).collect()
        } else {
            (0..slots.len()).rev().collect()
        };
        for at in order {
            let s = &mut slots[at];
            let m = match s.source {
                Source::Oncekey => {
                    let conns = (0..args.workers)
                        .map(|w| Conn::Grpc(Box::new(target.worker(w))))
                        .collect();
                    driver::drive(conns, workload(s.kind), &plan, probe).await
                }
                Source::Peer(p) => peers[p].measure(s.kind, &plan).await,
            };
            eprintln!(
                "bench: slice {}/{}: {} on {} at {:.0} ops/s",
                i + 1,
                args.slices,
                s.scenario,
                s.target,
                m.ops_per_sec()
            );
            s.rates.push(m.ops_per_sec());
            match &mut s.merged {
                Some(all) => all.merge(m),
                None => s.merged = Some(m),
            }
        }
    }
    let (json, text) = spread(&slots, args.slices);
    for s in slots {
        if let Some(m) = s.merged {
            report.push(ScenarioResult::new(s.scenario, s.target, m));
            eprintln!("{}", report.last_line());
        }
    }
    report.section("interleaved", json, text);
    Ok(())
}

/// Each ratio slice by slice: oncekey over each peer in cycle and replay, cycle and replay over
/// noop; as JSON and as a line for the table.
fn spread(slots: &[Slot], slices: u32) -> (Value, String) {
    let rates = |scenario: &str, target: &str| {
        slots
            .iter()
            .find(|s| s.scenario == scenario && s.target == target)
            .map(|s| s.rates.as_slice())
    };
    let mut pairs = Vec::new();
    for name in ["cycle", "replay"] {
        pairs.push((
            format!("{name}_vs_noop"),
            (name, "oncekey"),
            ("noop", "oncekey"),
        ));
    }
    for s in slots.iter().filter(|s| s.target != "oncekey") {
        let name = format!("{}_vs_{}", s.scenario, s.target);
        pairs.push((name, (s.scenario, "oncekey"), (s.scenario, s.target)));
    }
    let mut out = Map::new();
    let mut text = format!("ratios over {slices} interleaved slices, median (min-max):");
    for (name, (sa, ta), (sb, tb)) in pairs {
        let (Some(a), Some(b)) = (rates(sa, ta), rates(sb, tb)) else {
            continue;
        };
        let per_slice: Vec<f64> = a
            .iter()
            .zip(b)
            .filter(|(_, b)| **b > 0.0)
            .map(|(a, b)| a / b)
            .collect();
        let Some(stats) = Stats::of(&per_slice) else {
            continue;
        };
        let _ = write!(
            text,
            " {name} {:.2} ({:.2}-{:.2});",
            stats.median, stats.min, stats.max
        );
        out.insert(
            name,
            json!({"median": stats.median, "min": stats.min, "max": stats.max, "slices": per_slice}),
        );
    }
    text.pop();
    text.push('\n');
    (json!({"slices": slices, "ratios": out}), text)
}

/// The median and range of some values.
#[derive(Debug, PartialEq)]
struct Stats {
    median: f64,
    min: f64,
    max: f64,
}

impl Stats {
    fn of(values: &[f64]) -> Option<Self> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Self {
            median,
            min: v[0],
            max: v[n - 1],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_range() {
        let s = Stats::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        let s = Stats::of(&[4.0, 1.0, 2.0, 3.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.5, 1.0, 4.0));
        assert_eq!(Stats::of(&[]), None);
        assert_eq!(Stats::of(&[f64::NAN]), None);
    }

    #[test]
    fn ratios_are_taken_slice_by_slice() {
        let slot = |scenario, target, rates: &[f64]| Slot {
            scenario,
            kind: Kind::Cycle,
            target,
            source: Source::Oncekey,
            merged: None,
            rates: rates.to_vec(),
        };
        let slots = [
            slot("noop", "oncekey", &[100.0, 50.0, 100.0]),
            slot("cycle", "oncekey", &[20.0, 10.0, 30.0]),
            slot("cycle", "redis", &[10.0, 10.0, 10.0]),
        ];
        let (json, text) = spread(&slots, 3);
        // Per slice: 2.0, 1.0, 3.0 — the ratio of the totals (60/30) would hide the spread.
        assert_eq!(json["ratios"]["cycle_vs_redis"]["median"], 2.0);
        assert_eq!(json["ratios"]["cycle_vs_redis"]["min"], 1.0);
        assert_eq!(json["ratios"]["cycle_vs_redis"]["max"], 3.0);
        assert_eq!(json["ratios"]["cycle_vs_noop"]["median"], 0.2);
        assert!(json["ratios"].get("replay_vs_noop").is_none());
        assert!(text.contains("cycle_vs_redis 2.00 (1.00-3.00)"), "{text}");
    }
}
