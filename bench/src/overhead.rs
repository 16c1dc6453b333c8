//! The CQL store's overhead: the service's `cycle` (Claim + Complete over gRPC, on a `--store cql`
//! server) next to the lightweight transactions it issues, run raw with the same workers
//! (`--cql-raw`). For the whole cycle, its Claim (raw: the conditional insert) and its Complete
//! (raw: the conditional replace) at p50, p90, p99 and the mean: the overhead is
//! `oncekey / raw − 1`, in percent; the target is at most 15 %.

use super::recorder::{Recorder, Series};
use hdrhistogram::Histogram;
use serde_json::{json, Map, Value};
use std::fmt::Write as _;

/// The series compared, with their names here.
const SERIES: [(Series, &str); 3] = [
    (Series::Op, "cycle"),
    (Series::Claim, "claim"),
    (Series::Complete, "complete"),
];

/// A statistic of a latency histogram.
#[derive(Clone, Copy)]
enum Stat {
    Quantile(f64),
    Mean,
}

/// The statistics compared, with their names.
const STATS: [(Stat, &str); 4] = [
    (Stat::Quantile(0.50), "p50"),
    (Stat::Quantile(0.90), "p90"),
    (Stat::Quantile(0.99), "p99"),
    (Stat::Mean, "mean"),
];

impl Stat {
    /// The statistic of `h`, in milliseconds.
    fn ms(self, h: &Histogram<u64>) -> f64 {
        match self {
            Stat::Quantile(q) => h.value_at_quantile(q) as f64 / 1000.0,
            Stat::Mean => h.mean() / 1000.0,
        }
    }
}

/// One statistic of one series on both targets.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// The series' name (`cycle`, `claim`, `complete`).
    pub series: &'static str,
    /// The statistic's name (`p50`, `p90`, `p99`, `mean`).
    pub stat: &'static str,
    /// Through the service, ms.
    pub oncekey_ms: f64,
    /// The raw LWTs, ms.
    pub raw_ms: f64,
}

impl Cell {
    /// `oncekey / raw − 1` in percent (`None` when the raw latency is 0).
    pub fn overhead_pct(&self) -> Option<f64> {
        (self.raw_ms > 0.0).then(|| (self.oncekey_ms / self.raw_ms - 1.0) * 100.0)
    }
}

/// Every comparable statistic of the two measurements.
pub fn compare(oncekey: &Recorder, raw: &Recorder) -> Vec<Cell> {
    let mut cells = Vec::new();
    for (series, name) in SERIES {
        let (Some(ours), Some(theirs)) = (oncekey.hist(series), raw.hist(series)) else {
            continue;
        };
        for (stat, stat_name) in STATS {
            cells.push(Cell {
                series: name,
                stat: stat_name,
                oncekey_ms: stat.ms(ours),
                raw_ms: stat.ms(theirs),
            });
        }
    }
    cells
}

/// `{"cycle": {"p50": {"oncekey": ms, "cql_raw": ms, "overhead_pct": %}, …}, …, "ops_per_sec":
/// {"oncekey": …, "cql_raw": …, "ratio": …}}`.
pub fn json(cells: &[Cell], oncekey_ops: f64, raw_ops: f64) -> Value {
    let mut doc = Map::new();
    for cell in cells {
        let series = doc
            .entry(cell.series)
            .or_insert_with(|| Value::Object(Map::new()));
        series[cell.stat] = json!({
            "oncekey": cell.oncekey_ms,
            "cql_raw": cell.raw_ms,
            "overhead_pct": cell.overhead_pct(),
        });
    }
    doc.insert(
        "ops_per_sec".into(),
        json!({
            "oncekey": oncekey_ops,
            "cql_raw": raw_ops,
            "ratio": (raw_ops > 0.0).then(|| oncekey_ops / raw_ops),
        }),
    );
    Value::Object(doc)
}

/// The comparison as table lines: one per series.
pub fn table(cells: &[Cell], out: &mut String) {
    if cells.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "oncekey cycle vs the raw LWTs (cql-raw), ms and overhead (oncekey / raw - 1):"
    );
    for (_, series) in SERIES {
        let mut line = format!("  {series:<9}");
        for cell in cells.iter().filter(|c| c.series == series) {
            let pct = cell
                .overhead_pct()
                .map_or_else(|| "-".into(), |p| format!("{p:+.1}%"));
            let _ = write!(
                line,
                "  {} {:.3} vs {:.3} ({pct})",
                cell.stat, cell.oncekey_ms, cell.raw_ms
            );
        }
        if line.len() > 11 {
            let _ = writeln!(out, "{line}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn recorder(op_us: u64, claim_us: u64) -> Recorder {
        let mut r = Recorder::default();
        for _ in 0..100 {
            r.record(Series::Op, Duration::from_micros(op_us));
            r.record(Series::Claim, Duration::from_micros(claim_us));
        }
        r
    }

    #[test]
    fn overhead_is_oncekey_over_raw_minus_one() {
        let cells = compare(&recorder(4_600, 2_000), &recorder(4_000, 2_000));
        // Op and Claim compared; Complete recorded by neither.
        assert_eq!(cells.len(), 2 * STATS.len());
        let p50 = |series| {
            cells
                .iter()
                .find(|c| c.series == series && c.stat == "p50")
                .unwrap()
        };
        assert!((p50("cycle").overhead_pct().unwrap() - 15.0).abs() < 0.2);
        assert!(p50("claim").overhead_pct().unwrap().abs() < 0.2);
        let doc = json(&cells, 900.0, 1000.0);
        let raw_p99 = doc["cycle"]["p99"]["cql_raw"].as_f64().unwrap();
        assert!((raw_p99 - 4.0).abs() < 0.01, "{raw_p99}");
        assert!((doc["ops_per_sec"]["ratio"].as_f64().unwrap() - 0.9).abs() < 1e-9);
        assert!(doc.get("complete").is_none());
        let mut text = String::new();
        table(&cells, &mut text);
        assert!(text.contains("cycle") && text.contains("(+15."), "{text}");
    }
}
