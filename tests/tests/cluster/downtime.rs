//! Unavailability figures measured from a recorded history, per Oncekey server, over a period of
//! a run (e.g. from a node's SIGKILL until it was started again). Reported, never asserted
//! against a time limit: on a shared 2-core machine they say how the system behaved, not a bound.

use super::history::Op;
use oncekey_server::ledger::Millis;
use std::fmt;

/// What the clients of one server saw over the period.
#[derive(Debug, Clone, Default)]
pub struct Figures {
    /// The server.
    pub server: usize,
    /// Operations invoked in the period.
    pub ops: usize,
    /// Of them, without an answer (timeout, UNAVAILABLE, broken connection).
    pub failed: usize,
    /// Longest stretch from an operation that got no answer to the next answered one's return.
    pub longest_failing: Millis,
    /// Longest time between two answers (or from the period's start to the first).
    pub longest_silence: Millis,
    /// Slowest answered operation.
    pub slowest_answer: Millis,
    /// From the period's start to the end (answer or give-up) of its last operation that got no
    /// answer or took longer than `SLOW`: how long the disturbance lasted for this server's clients.
    pub disturbed_for: Millis,
}

/// An answer slower than this counts as a disturbance (normal answers take milliseconds).
pub const SLOW: Millis = 1_000;

/// Figures per server (`servers` of them) for operations invoked in `from..=to`.
pub fn measure(ops: &[Op], servers: usize, from: Millis, to: Millis) -> Vec<Figures> {
    (0..servers)
        .map(|server| {
            let mut mine: Vec<&Op> = ops
                .iter()
                .filter(|op| op.server == server && (from..=to).contains(&op.invoke))
                .collect();
            mine.sort_by_key(|op| op.invoke);
            let mut f = Figures {
                server,
                ops: mine.len(),
                ..Default::default()
            };
            let mut streak: Option<Millis> = None;
            let mut answers: Vec<Millis> = vec![from];
            for op in &mine {
                if !op.answer.is_known() || op.ret - op.invoke > SLOW {
                    f.disturbed_for = f.disturbed_for.max(op.ret - from);
                }
                if op.answer.is_known() {
                    f.slowest_answer = f.slowest_answer.max(op.ret - op.invoke);
                    answers.push(op.ret);
                    if let Some(start) = streak.take() {
                        f.longest_failing = f.longest_failing.max(op.ret - start);
                    }
                } else {
                    f.failed += 1;
                    streak.get_or_insert(op.invoke);
                }
            }
            if let Some(start) = streak {
                f.longest_failing = f.longest_failing.max(to - start);
            }
            answers.sort_unstable();
            answers.push(to.max(*answers.last().unwrap_or(&to)));
            f.longest_silence = answers.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
            f
        })
        .collect()
}

impl fmt::Display for Figures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "server {}: {} RPCs, {} without an answer; longest failing stretch {} ms, longest \
             without an answer {} ms, slowest answer {} ms, disturbed (no answer or > {SLOW} ms) \
             for {} ms",
            self.server,
            self.ops,
            self.failed,
            self.longest_failing,
            self.longest_silence,
            self.slowest_answer,
            self.disturbed_for
        )
    }
}
