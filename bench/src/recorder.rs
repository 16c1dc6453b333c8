//! Worker-local measurements: one HDR histogram (microseconds) per latency series, outcome
//! counters and error counts. Workers record without sharing anything; the driver merges at the
//! end, so recording costs a few array writes.

use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::time::Duration;

/// A latency series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Series {
    /// One whole op (a cycle is Claim + Complete).
    Op,
    /// The Claim RPC (or the PostgreSQL claim statements).
    Claim,
    /// The Complete RPC (or the PostgreSQL UPDATE).
    Complete,
    /// In `mixed`: ops of each kind.
    Noop,
    /// In `mixed`: cycles.
    Cycle,
    /// In `mixed`: replays.
    Replay,
    /// In `mixed`: storm claims.
    Storm,
}

/// Every series, in report order.
pub const SERIES: [Series; 7] = [
    Series::Op,
    Series::Claim,
    Series::Complete,
    Series::Noop,
    Series::Cycle,
    Series::Replay,
    Series::Storm,
];

impl Series {
    /// The series' name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Series::Op => "op",
            Series::Claim => "claim",
            Series::Complete => "complete",
            Series::Noop => "mixed_noop",
            Series::Cycle => "mixed_cycle",
            Series::Replay => "mixed_replay",
            Series::Storm => "mixed_storm",
        }
    }
}

/// Claim outcomes as the bench counts them.
pub const OUTCOMES: [&str; 6] = [
    "ACQUIRED",
    "COMPLETED",
    "FAILED",
    "IN_PROGRESS",
    "NEEDS_RECONCILIATION",
    "UNSPECIFIED",
];

/// Highest latency a histogram holds: one minute.
const MAX_MICROS: u64 = 60_000_000;

/// What one worker (or, merged, a whole scenario) measured.
#[derive(Default)]
pub struct Recorder {
    hists: [Option<Histogram<u64>>; SERIES.len()],
    /// Measured ops.
    pub ops: u64,
    /// Claim outcomes by `OUTCOMES` index.
    pub outcomes: [u64; OUTCOMES.len()],
    /// Failed ops by error text.
    pub errors: BTreeMap<String, u64>,
}

impl Recorder {
    /// Adds one latency sample to `series`.
    pub fn record(&mut self, series: Series, elapsed: Duration) {
        let micros = (elapsed.as_micros() as u64).clamp(1, MAX_MICROS);
        let hist = self.hists[series as usize].get_or_insert_with(|| {
            Histogram::new_with_bounds(1, MAX_MICROS, 3).expect("valid histogram bounds")
        });
        hist.saturating_record(micros);
    }

    /// Counts a Claim outcome (a proto `ClaimOutcome` value).
    pub fn outcome(&mut self, outcome: i32) {
        let index = match outcome {
            1..=5 => outcome as usize - 1,
            _ => 5,
        };
        self.outcomes[index] += 1;
    }

    /// Counts a failed op.
    pub fn error(&mut self, what: String) {
        *self.errors.entry(what).or_default() += 1;
    }

    /// The histogram of `series`, if anything was recorded in it.
    pub fn hist(&self, series: Series) -> Option<&Histogram<u64>> {
        self.hists[series as usize].as_ref()
    }

    /// Adds `other`'s measurements to these.
    pub fn merge(&mut self, other: Recorder) {
        for (mine, theirs) in self.hists.iter_mut().zip(other.hists) {
            match (mine.as_mut(), theirs) {
                (Some(mine), Some(theirs)) => {
                    mine.add(theirs).expect("histograms with equal bounds");
                }
                (None, theirs) => *mine = theirs,
                (Some(_), None) => {}
            }
        }
        self.ops += other.ops;
        for (mine, theirs) in self.outcomes.iter_mut().zip(other.outcomes) {
            *mine += theirs;
        }
        for (what, n) in other.errors {
            *self.errors.entry(what).or_default() += n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_adds_everything() {
        let mut a = Recorder::default();
        a.record(Series::Op, Duration::from_micros(100));
        a.outcome(1);
        let mut b = Recorder::default();
        b.record(Series::Op, Duration::from_micros(300));
        b.record(Series::Claim, Duration::from_micros(50));
        b.error("UNAVAILABLE".into());
        a.merge(b);
        assert_eq!(a.hist(Series::Op).unwrap().len(), 2);
        assert_eq!(a.hist(Series::Claim).unwrap().len(), 1);
        assert!(a.hist(Series::Complete).is_none());
        assert_eq!(a.outcomes[0], 1);
        assert_eq!(a.errors["UNAVAILABLE"], 1);
    }
}
