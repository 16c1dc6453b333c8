//! The bench report: one result per scenario and target, printed as a table and as JSON, with
//! the throughput ratios the targets are stated in (each scenario against noop, oncekey against
//! PostgreSQL), the service's latency overhead over the raw CQL LWTs when both were measured, and
//! the load average, since other work on the machine skews every number.

use super::args::BenchArgs;
use super::driver::{load_average, Measurement};
use super::overhead;
use super::recorder::{Recorder, OUTCOMES, SERIES};
use hdrhistogram::Histogram;
use serde_json::{json, Map, Value};
use std::fmt::Write as _;

/// The peer designs' target names, in the order their ratios are reported.
const PEERS: [&str; 3] = ["postgres", "redis", "etcd"];

/// One scenario's measurement.
pub struct ScenarioResult {
    name: &'static str,
    target: &'static str,
    m: Measurement,
}

impl ScenarioResult {
    /// Names a measurement.
    pub fn new(name: &'static str, target: &'static str, m: Measurement) -> Self {
        Self { name, target, m }
    }

    fn ops_per_sec(&self) -> f64 {
        self.m.ops_per_sec()
    }

    fn p(&self, q: f64) -> Option<f64> {
        let hist = self.m.recorder.hist(super::recorder::Series::Op)?;
        Some(hist.value_at_quantile(q) as f64 / 1000.0)
    }

    fn json(&self) -> Value {
        let r: &Recorder = &self.m.recorder;
        let mut latency = Map::new();
        for series in SERIES {
            if let Some(h) = r.hist(series) {
                latency.insert(series.name().into(), percentiles(h));
            }
        }
        let outcomes: Map<String, Value> = OUTCOMES
            .iter()
            .zip(r.outcomes)
            .filter(|(_, n)| *n > 0)
            .map(|(name, n)| (name.to_string(), json!(n)))
            .collect();
        json!({
            "scenario": self.name,
            "target": self.target,
            "workers": self.m.workers,
            "ops": r.ops,
            "seconds": self.m.elapsed.as_secs_f64(),
            "ops_per_sec": self.ops_per_sec(),
            "latency_ms": latency,
            "claim_outcomes": outcomes,
            "errors": r.errors,
            "load_1m": {"before": self.m.load.0, "after": self.m.load.1},
            "cpu_us_per_op": {
                "client": self.cpu_us_per_op(self.m.cpu.client),
                "server": self.cpu_us_per_op(self.m.cpu.server),
            },
        })
    }

    /// Microseconds of `seconds` per measured op (`None`: unknown or nothing measured).
    fn cpu_us_per_op(&self, seconds: Option<f64>) -> Option<f64> {
        let ops = self.m.recorder.ops;
        seconds.filter(|_| ops > 0).map(|s| s * 1e6 / ops as f64)
    }

    /// "server+client" CPU µs per op, `-` for an unknown end.
    fn cpu_column(&self) -> String {
        let us = |s: Option<f64>| {
            self.cpu_us_per_op(s)
                .map_or_else(|| "-".to_owned(), |us| format!("{us:.0}"))
        };
        format!("{}+{}", us(self.m.cpu.server), us(self.m.cpu.client))
    }
}

fn percentiles(h: &Histogram<u64>) -> Value {
    let ms = |us: u64| us as f64 / 1000.0;
    json!({
        "count": h.len(),
        "p50": ms(h.value_at_quantile(0.50)),
        "p90": ms(h.value_at_quantile(0.90)),
        "p99": ms(h.value_at_quantile(0.99)),
        "p99_9": ms(h.value_at_quantile(0.999)),
        "max": ms(h.max()),
        "mean": h.mean() / 1000.0,
    })
}

/// Every result of one `oncekey bench` run.
pub struct Report {
    header: Value,
    results: Vec<ScenarioResult>,
    load_after: f64,
    /// Scenario summaries beyond the per-target rows: (JSON key, value, text for the table).
    sections: Vec<(&'static str, Value, String)>,
}

impl Report {
    /// An empty report for a run with `args`.
    pub fn new(args: &BenchArgs) -> Self {
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_owned())
            })
            .unwrap_or_default();
        let header = json!({
            "server": args.server,
            "workers": args.workers,
            "connections": args.connections,
            "duration_ms": args.ops.is_none().then_some(args.duration),
            "ops_per_scenario": args.ops,
            "warmup_ms": args.warmup,
            "preload": args.preload,
            "peers": args.peer.iter().filter_map(|url| super::peers::PeerKind::of(url)).map(|k| k.name()).collect::<Vec<_>>(),
            "peer_pool": (!args.peer.is_empty()).then(|| args.peer_pool.unwrap_or(args.workers)),
            "cql_raw": args.cql_raw.as_ref().map(|nodes| json!({
                "nodes": nodes,
                "keyspace": args.cql_raw_keyspace,
                "ran_first": args.cql_raw_first,
            })),
            "machine": {
                "nproc": std::thread::available_parallelism().map_or(0, |n| n.get()),
                "cpu": cpu,
            },
            "load_1m_before": load_average(),
        });
        Self {
            header,
            results: Vec::new(),
            load_after: 0.0,
            sections: Vec::new(),
        }
    }

    /// Adds a scenario's summary: `json` under `key` in the JSON report, `text` under the table.
    pub fn section(&mut self, key: &'static str, json: Value, text: String) {
        self.sections.push((key, json, text));
    }

    /// Quantile `q` of the op latency of the latest (`name`, `target`) result, in ms.
    pub fn percentile(&self, name: &str, target: &str, q: f64) -> Option<f64> {
        self.find(name, target)?.p(q)
    }

    /// Adds a result.
    pub fn push(&mut self, result: ScenarioResult) {
        self.results.push(result);
    }

    /// Records the end of the run.
    pub fn finish(&mut self) {
        self.load_after = load_average();
    }

    /// A one-line progress note about the latest result.
    pub fn last_line(&self) -> String {
        let Some(r) = self.results.last() else {
            return String::new();
        };
        format!(
            "bench: {} on {}: {} ops, {:.0} ops/s, p99 {:.3} ms, load {:.2}",
            r.name,
            r.target,
            r.m.recorder.ops,
            r.ops_per_sec(),
            r.p(0.99).unwrap_or(0.0),
            r.m.load.1
        )
    }

    fn find(&self, name: &str, target: &str) -> Option<&ScenarioResult> {
        self.results
            .iter()
            .rev()
            .find(|r| r.name == name && r.target == target)
    }

    /// Throughput ratios: each oncekey scenario to noop, oncekey to PostgreSQL.
    fn ratios(&self) -> Map<String, Value> {
        let mut out = Map::new();
        if let Some(noop) = self
            .find("noop", "oncekey")
            .filter(|n| n.ops_per_sec() > 0.0)
        {
            for name in ["cycle", "replay", "storm", "mixed"] {
                if let Some(r) = self.find(name, "oncekey") {
                    out.insert(
                        format!("{name}_vs_noop"),
                        json!(r.ops_per_sec() / noop.ops_per_sec()),
                    );
                }
            }
        }
        for peer in PEERS {
            for name in ["cycle", "replay"] {
                if let (Some(ours), Some(theirs)) =
                    (self.find(name, "oncekey"), self.find(name, peer))
                {
                    if theirs.ops_per_sec() > 0.0 {
                        out.insert(
                            format!("{name}_vs_{peer}"),
                            json!(ours.ops_per_sec() / theirs.ops_per_sec()),
                        );
                    }
                }
            }
        }
        if let Some((ours, raw)) = self.cql_pair() {
            if raw.ops_per_sec() > 0.0 {
                out.insert(
                    "cycle_vs_cql_raw".into(),
                    json!(ours.ops_per_sec() / raw.ops_per_sec()),
                );
            }
        }
        out
    }

    /// The service's and the raw LWTs' `cycle`, when both ran.
    fn cql_pair(&self) -> Option<(&ScenarioResult, &ScenarioResult)> {
        Some((
            self.find("cycle", "oncekey")?,
            self.find("cycle", "cql-raw")?,
        ))
    }

    /// The service's latency overhead over the raw LWTs, per series and percentile.
    fn cql_overhead(&self) -> Vec<overhead::Cell> {
        self.cql_pair().map_or_else(Vec::new, |(ours, raw)| {
            overhead::compare(&ours.m.recorder, &raw.m.recorder)
        })
    }

    /// The gateway's overhead per request: through the gateway minus direct, in ms, at p50, p90,
    /// p99 (each percentile of each side; not a percentile of differences).
    fn gateway_overhead(&self) -> Option<Vec<(&'static str, f64)>> {
        let through = self.find("gateway", "gateway")?;
        let direct = self.find("gateway", "direct")?;
        [("p50", 0.50), ("p90", 0.90), ("p99", 0.99)]
            .into_iter()
            .map(|(name, q)| Some((name, through.p(q)? - direct.p(q)?)))
            .collect()
    }

    /// The whole report as JSON.
    pub fn json(&self) -> Value {
        let mut doc = self.header.clone();
        doc["load_1m_after"] = json!(self.load_after);
        doc["results"] = self.results.iter().map(ScenarioResult::json).collect();
        doc["ratios"] = Value::Object(self.ratios());
        if let Some(overhead) = self.gateway_overhead() {
            doc["gateway_overhead_ms"] = overhead
                .into_iter()
                .map(|(name, ms)| (name.to_owned(), json!(ms)))
                .collect::<Map<String, Value>>()
                .into();
        }
        if let Some((ours, raw)) = self.cql_pair() {
            let cells = self.cql_overhead();
            doc["cql_overhead"] = overhead::json(&cells, ours.ops_per_sec(), raw.ops_per_sec());
        }
        for (key, value, _) in &self.sections {
            doc[*key] = value.clone();
        }
        doc
    }

    /// The report as a text table (latencies in ms).
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<14} {:<9} {:>9} {:>10} {:>7} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9}",
            "scenario",
            "target",
            "ops",
            "ops/s",
            "x noop",
            "p50",
            "p90",
            "p99",
            "p99.9",
            "max",
            "cpu us/op"
        );
        let noop = self
            .find("noop", "oncekey")
            .map(ScenarioResult::ops_per_sec);
        for r in &self.results {
            let ratio = match noop {
                Some(n) if n > 0.0 && r.target == "oncekey" => {
                    format!("{:.2}", r.ops_per_sec() / n)
                }
                _ => "-".into(),
            };
            for series in SERIES {
                let Some(h) = r.m.recorder.hist(series) else {
                    continue;
                };
                let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
                let (name, target, ops, rate, ratio, cpu) = if series == super::recorder::Series::Op
                {
                    (
                        r.name.to_owned(),
                        r.target,
                        r.m.recorder.ops.to_string(),
                        format!("{:.0}", r.ops_per_sec()),
                        ratio.clone(),
                        r.cpu_column(),
                    )
                } else {
                    (
                        format!("  {}", series.name()),
                        "",
                        h.len().to_string(),
                        String::new(),
                        String::new(),
                        String::new(),
                    )
                };
                let _ = writeln!(
                    out,
                    "{name:<14} {target:<9} {ops:>9} {rate:>10} {ratio:>7} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {cpu:>9}",
                    ms(0.5),
                    ms(0.9),
                    ms(0.99),
                    ms(0.999),
                    h.max() as f64 / 1000.0
                );
            }
            for (what, n) in &r.m.recorder.errors {
                let _ = writeln!(out, "  errors: {n} × {what}");
            }
        }
        for (name, value) in self.ratios() {
            if PEERS
                .iter()
                .any(|peer| name.ends_with(&format!("_vs_{peer}")))
            {
                let _ = writeln!(out, "{name}: {:.2}x", value.as_f64().unwrap_or(0.0));
            }
        }
        overhead::table(&self.cql_overhead(), &mut out);
        for (_, _, text) in &self.sections {
            out.push_str(text);
        }
        if let Some(overhead) = self.gateway_overhead() {
            let cells: Vec<String> = overhead
                .iter()
                .map(|(name, ms)| format!("{name} {ms:+.3} ms"))
                .collect();
            let _ = writeln!(
                out,
                "gateway overhead per request (through the gateway minus direct): {}",
                cells.join(", ")
            );
        }
        let _ = writeln!(
            out,
            "cpu us/op: CPU microseconds per op, server+client ('-' unknown; the server's needs --server-metrics)"
        );
        let _ = writeln!(
            out,
            "load average (1 min): {:.2} before, {:.2} after",
            self.header["load_1m_before"].as_f64().unwrap_or(0.0),
            self.load_after
        );
        out
    }

    /// Fails when any measured op failed: such a run measures nothing.
    pub fn check(&self) -> anyhow::Result<()> {
        let failed: u64 = self
            .results
            .iter()
            .flat_map(|r| r.m.recorder.errors.values())
            .sum();
        if failed > 0 {
            anyhow::bail!("{failed} ops failed (see the report)");
        }
        Ok(())
    }
}
