//! Linearizability of a recorded history, key by key, against the ledger's single-record model:
//! the sequential specification is the server's own `ledger::{claim, complete, fail, renew}` over
//! `Option<Record>`. A key's history is linearizable when its operations can be put in one order
//! that respects real time (an operation that returned before another was invoked comes first)
//! and in which every answer is what the ledger gives on the record left by the ones before.
//!
//! The search is Wing & Gong's, with Lowe's memo of (operations linearized, state) pairs; an
//! operation without an answer may take effect at any point after its invocation, or never.
//!
//! Time. The ledger decides with the server's `now`, which lies within the operation's window:
//! invocation to response on the client clock, shifted by the server's skew. Where the answer
//! reveals `now` (a new lease's end is `now + lease_ttl`) that value is used; elsewhere every
//! value that can change the decision is tried: the window's ends and the instants around the
//! record's lease end. An acquisition without an answer sets an unknown lease end: the instants
//! at which other operations' decisions flip are tried for it.
//!
//! Left out of the model on purpose: dedup counters and receipts (dedup hits are written off the
//! answer path), versions, timestamps other than the lease end, and expiry (runs stay far
//! inside the 24 h retention). ABANDON is not modelled.

use super::history::{Answer, Call, Op, Seen};
use oncekey_server::ledger::{self, ClaimOutcome, Millis, Record, RecordId, Semantics, Status};
use std::collections::{BTreeMap, BTreeSet, HashSet};

/// Clock granularity slack around a window (milliseconds are truncated on both clocks).
const TOLERANCE: Millis = 2;
/// How long after the client gave up the server may still have decided (it cancels the request
/// when the client goes away; a decision already sent to the store may apply later, which is the
/// order, not the `now`, of the operation).
const UNKNOWN_SLACK: Millis = 1_000;
/// Operations per key the checker accepts (the set of linearized operations is a `u128`).
pub const MAX_OPS_PER_KEY: usize = 128;
/// Search states per key before the key is reported inconclusive.
const BUDGET: usize = 3_000_000;

/// What the checker found.
#[derive(Debug, Default)]
pub struct Report {
    /// Keys checked.
    pub keys: usize,
    /// Operations checked.
    pub ops: usize,
    /// Operations without a definite answer.
    pub unknown: usize,
    /// Search states visited, over all keys.
    pub explored: usize,
    /// Keys whose history is not linearizable, each with its history, one operation a line.
    pub violations: Vec<(String, Vec<String>)>,
    /// Keys linearizable only if a Claim answered other than ACQUIRED may also have acquired
    /// the record for its caller just before (a grant its caller was not told about: see
    /// `check`), each with its history.
    pub untold: Vec<(String, Vec<String>)>,
    /// Keys whose search ran out of budget.
    pub inconclusive: Vec<String>,
}

impl Report {
    /// A one-line summary.
    pub fn summary(&self) -> String {
        format!(
            "{} keys, {} operations ({} without an answer), {} search states: {} not linearizable, \
             {} inconclusive, {} linearizable only with a grant its caller was not told about",
            self.keys,
            self.ops,
            self.unknown,
            self.explored,
            self.violations.len(),
            self.inconclusive.len(),
            self.untold.len()
        )
    }

    /// Panics with the first violations' histories unless every key was linearizable.
    pub fn assert_linearizable(&self) {
        let mut text = String::new();
        for (key, lines) in self.violations.iter().take(3) {
            text.push_str(&format!("\nkey {key} is not linearizable:\n"));
            for line in lines.iter().take(80) {
                text.push_str(&format!("  {line}\n"));
            }
        }
        assert!(
            self.violations.is_empty() && self.inconclusive.is_empty(),
            "{}{text}\ninconclusive: {:?}",
            self.summary(),
            self.inconclusive
        );
    }
}

/// Checks every key's history. A key that is not linearizable is checked again with one
/// relaxation: a Claim answered other than ACQUIRED may also have acquired the record for its
/// caller (with its owner, within its window) at some point before the answer. That is how the
/// CQL store fails when Cassandra answers an LWT "not applied" though it applied (its retried
/// Paxos round completed the write's own proposal) and another write moved the row on before the
/// condition was checked, so that the row no longer carries the write's id: nobody holds the
/// lease, which runs out (AT_LEAST_ONCE) or asks for reconciliation (AT_MOST_ONCE). Such keys are
/// reported apart (`untold`), not as violations; the rest of their history must still fit.
pub fn check(ops: &[Op]) -> Report {
    let mut by_key: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
    for op in ops {
        by_key.entry(op.key.as_str()).or_default().push(op);
    }
    let mut report = Report::default();
    for (key, mut list) in by_key {
        list.sort_by_key(|op| (op.invoke, op.ret));
        report.keys += 1;
        report.ops += list.len();
        report.unknown += list.iter().filter(|op| !op.answer.is_known()).count();
        let lines = || list.iter().map(|op| op.to_string()).collect::<Vec<_>>();
        if list.len() > MAX_OPS_PER_KEY {
            report
                .inconclusive
                .push(format!("{key}: {} operations", list.len()));
            continue;
        }
        let mut search = Search::new(key, &list, false);
        let strict = search.run();
        report.explored += search.explored;
        match strict {
            Some(true) => {}
            None => report
                .inconclusive
                .push(format!("{key}: search budget exhausted")),
            Some(false) => {
                let mut relaxed = Search::new(key, &list, true);
                let verdict = if relaxed.ops.len() <= MAX_OPS_PER_KEY {
                    relaxed.run()
                } else {
                    Some(false)
                };
                report.explored += relaxed.explored;
                match verdict {
                    Some(true) => report.untold.push((key.to_owned(), lines())),
                    _ => report.violations.push((key.to_owned(), lines())),
                }
            }
        }
    }
    report
}

/// The modelled record, hashable (the fields decisions depend on, after `norm`).
type Snap = Option<(
    Status,
    Semantics,
    u64,
    u32,
    String,
    Option<Millis>,
    Option<(i32, Vec<u8>, String, BTreeMap<String, String>)>,
    Option<(i32, String, Vec<u8>)>,
    [u8; 32],
)>;

fn snap(state: &Option<Record>) -> Snap {
    state.as_ref().map(|r| {
        (
            r.status,
            r.semantics,
            r.fencing_token,
            r.attempt,
            r.lease_owner.clone(),
            r.lease_expires_at,
            r.result.as_ref().map(|x| {
                (
                    x.code,
                    x.body.clone(),
                    x.content_type.clone(),
                    x.metadata.clone(),
                )
            }),
            r.error
                .as_ref()
                .map(|e| (e.code, e.message.clone(), e.details.clone())),
            r.fingerprint,
        )
    })
}

/// The record with everything the model leaves out cleared.
fn norm(r: &Record) -> Record {
    let mut r = r.clone();
    r.history.clear();
    r.dedup_hits = 0;
    r.version = 0;
    r.created_at = 0;
    r.updated_at = 0;
    r.parent = None;
    r.expires_at = None;
    r
}

/// Whether `rec` (decided at `now`) is what the answer showed. Lookup and Claim answers may show
/// an at-most-once PROCESSING record whose lease lapsed as UNKNOWN.
fn shows(rec: &Record, seen: &Seen, now: Millis) -> bool {
    let status = rec.status == seen.status
        || (seen.status == Status::Unknown
            && rec.status == Status::Processing
            && rec.semantics == Semantics::AtMostOnce
            && rec.lease_expired(now));
    status
        && rec.fencing_token == seen.token
        && rec.attempt == seen.attempt
        && rec.lease_owner == seen.owner
        && rec.lease_expires_at == seen.lease_expires_at
        && rec.result == seen.result
        && rec.error == seen.error
}

struct Search<'a> {
    id: RecordId,
    /// The operations, then (relaxed search) one optional untold grant per Claim answered other
    /// than ACQUIRED.
    ops: Vec<&'a Op>,
    /// For an untold grant: the index of its Claim's answer.
    grant_of: Vec<Option<usize>>,
    /// Response times for ordering: an operation without an answer never returned.
    order_ret: Vec<Millis>,
    /// The operations that must be linearized (those with an answer).
    required: u128,
    /// Instants at which some operation's decision may flip: candidate lease ends.
    critical: Vec<Millis>,
    visited: HashSet<(u128, Snap)>,
    explored: usize,
}

impl<'a> Search<'a> {
    fn new(key: &str, ops: &[&'a Op], relaxed: bool) -> Self {
        let mut required = 0u128;
        let mut critical = BTreeSet::new();
        for (i, op) in ops.iter().enumerate() {
            if op.answer.is_known() {
                required |= 1 << i;
            }
            let (lo, hi) = window(op);
            for t in [lo, hi] {
                critical.extend([t, t + 1]);
            }
            match (&op.call, &op.answer) {
                (_, Answer::Claimed { record, lease, .. }) => {
                    critical.extend(record.lease_expires_at);
                    if let (Call::Claim(args), Some((_, end))) = (&op.call, lease) {
                        critical.extend([end - args.lease_ttl, end - args.lease_ttl + 1]);
                    }
                }
                (_, Answer::Settled(seen)) | (_, Answer::Found(Some(seen))) => {
                    critical.extend(seen.lease_expires_at);
                }
                (Call::Renew { lease_ttl, .. }, Answer::Renewed { expires_at }) => {
                    critical.extend([
                        *expires_at,
                        expires_at - lease_ttl,
                        expires_at - lease_ttl + 1,
                    ]);
                }
                _ => {}
            }
        }
        let mut all = ops.to_vec();
        let mut grant_of = vec![None; ops.len()];
        if relaxed {
            for (i, op) in ops.iter().enumerate() {
                if let (Call::Claim(_), Answer::Claimed { lease: None, .. }) =
                    (&op.call, &op.answer)
                {
                    all.push(op);
                    grant_of.push(Some(i));
                }
            }
        }
        Self {
            id: RecordId::new("model", "model", key),
            // Optional operations (no answer, untold grants) never hold others back.
            order_ret: all
                .iter()
                .zip(&grant_of)
                .map(|(op, grant)| {
                    if op.answer.is_known() && grant.is_none() {
                        op.ret
                    } else {
                        Millis::MAX
                    }
                })
                .collect(),
            ops: all,
            grant_of,
            required,
            critical: critical.into_iter().collect(),
            visited: HashSet::new(),
            explored: 0,
        }
    }

    /// `Some(linearizable)`, or `None` when the budget ran out.
    fn run(&mut self) -> Option<bool> {
        self.dfs(0, None)
    }

    fn dfs(&mut self, done: u128, state: Option<Record>) -> Option<bool> {
        if done & self.required == self.required {
            return Some(true);
        }
        if !self.visited.insert((done, snap(&state))) {
            return Some(false);
        }
        self.explored += 1;
        if self.explored > BUDGET {
            return None;
        }
        let pending = (0..self.ops.len()).filter(|i| done & (1 << i) == 0);
        let first_return = pending.clone().map(|i| self.order_ret[i]).min()?;
        // Only an operation invoked before every pending one returned can come next.
        let next: Vec<usize> = pending
            .filter(|&i| self.ops[i].invoke <= first_return)
            // An untold grant comes before its Claim's answer, or not at all.
            .filter(|&i| self.grant_of[i].is_none_or(|answer| done & (1 << answer) == 0))
            .collect();
        for i in next {
            for after in self.apply(i, &state) {
                if self.dfs(done | (1 << i), after)? {
                    return Some(true);
                }
            }
        }
        Some(false)
    }

    /// Every state the operation can leave `state` in while giving its answer (none: it cannot
    /// come next).
    fn apply(&self, i: usize, state: &Option<Record>) -> Vec<Option<Record>> {
        let op = self.ops[i];
        let cur = state.as_ref();
        let (lo, hi) = window(op);
        let mut out: Vec<Option<Record>> = Vec::new();
        let mut push = |r: Option<Record>| {
            let s = snap(&r);
            if !out.iter().any(|o| snap(o) == s) {
                out.push(r);
            }
        };
        let id = &self.id;
        if self.grant_of[i].is_some() {
            let Call::Claim(args) = &op.call else {
                unreachable!("grants are Claims")
            };
            let mut nows = candidates(lo, hi, cur);
            nows.extend(self.critical.iter().map(|c| c - args.lease_ttl));
            for now in nows.into_iter().filter(|n| (lo..=hi).contains(n)) {
                if let Ok(d) = ledger::claim(id, cur, args, now) {
                    if d.outcome == ClaimOutcome::Acquired {
                        push(Some(norm(d.record())));
                    }
                }
            }
            return out;
        }
        match (&op.call, &op.answer) {
            (
                Call::Claim(args),
                Answer::Claimed {
                    outcome,
                    record,
                    lease,
                },
            ) => {
                let nows = match lease {
                    // ACQUIRED reveals `now`: the lease ends lease_ttl after it.
                    Some((_, end)) => vec![end - args.lease_ttl],
                    None => candidates(lo, hi, cur),
                };
                for now in nows.into_iter().filter(|n| (lo..=hi).contains(n)) {
                    if let Ok(d) = ledger::claim(id, cur, args, now) {
                        let token_ok = lease.is_none_or(|(t, _)| t == d.record().fencing_token);
                        // The status is shown as of the answer, which may leave the server as
                        // late as `hi`: a slow ACQUIRED may show its own lease lapsed.
                        if d.outcome == *outcome && token_ok && shows(d.record(), record, hi) {
                            push(Some(norm(d.record())));
                        }
                    }
                }
            }
            (Call::Claim(args), Answer::Unknown(_)) => {
                let mut nows = candidates(lo, hi, cur);
                nows.extend(self.critical.iter().map(|c| c - args.lease_ttl));
                for now in nows.into_iter().filter(|n| (lo..=hi).contains(n)) {
                    if let Ok(d) = ledger::claim(id, cur, args, now) {
                        push(Some(norm(d.record())));
                    }
                }
            }
            (Call::Renew { token, lease_ttl }, answer) => {
                let nows = match answer {
                    Answer::Renewed { expires_at } => vec![expires_at - lease_ttl],
                    Answer::Unknown(_) => {
                        let mut n = candidates(lo, hi, cur);
                        n.extend(self.critical.iter().map(|c| c - lease_ttl));
                        n
                    }
                    _ => candidates(lo, hi, cur),
                };
                for now in nows.into_iter().filter(|n| (lo..=hi).contains(n)) {
                    let decided = ledger::renew(cur, *token, *lease_ttl, now);
                    match (answer, decided) {
                        (Answer::Renewed { expires_at }, Ok((lease, t)))
                            if lease.expires_at == *expires_at =>
                        {
                            push(t.record.as_ref().map(norm));
                        }
                        (Answer::Unknown(_), Ok((_, t))) => push(t.record.as_ref().map(norm)),
                        (Answer::Refused(e), Err(d)) if *e == d => push(state.clone()),
                        _ => {}
                    }
                }
            }
            (Call::Complete { .. } | Call::Fail { .. }, answer) => {
                for now in candidates(lo, hi, cur) {
                    let decided = match &op.call {
                        Call::Complete { token, result } => {
                            ledger::complete(cur, *token, result, now)
                        }
                        Call::Fail {
                            token,
                            error,
                            disposition,
                        } => ledger::fail(cur, *token, error, *disposition, now),
                        _ => unreachable!(),
                    };
                    match (answer, decided) {
                        (Answer::Settled(seen), Ok(t)) => {
                            if let Some(rec) = t.record.as_ref().filter(|r| shows(r, seen, now)) {
                                push(Some(norm(rec)));
                            }
                        }
                        (Answer::Unknown(_), Ok(t)) => push(t.record.as_ref().map(norm)),
                        (Answer::Refused(e), Err(d)) if *e == d => push(state.clone()),
                        _ => {}
                    }
                }
            }
            (Call::Lookup, Answer::Found(seen)) => {
                for now in candidates(lo, hi, cur) {
                    let visible =
                        cur.filter(|r| !r.is_expired(now) && r.status != Status::Abandoned);
                    let ok = match (visible, seen) {
                        (None, None) => true,
                        (Some(r), Some(s)) => shows(r, s, now),
                        _ => false,
                    };
                    if ok {
                        push(state.clone());
                    }
                }
            }
            // A read without an answer changes nothing.
            (Call::Lookup, Answer::Unknown(_)) => push(state.clone()),
            _ => {}
        }
        out
    }
}

/// The window of server times the operation's `now` lies in.
fn window(op: &Op) -> (Millis, Millis) {
    let slack = if op.answer.is_known() {
        0
    } else {
        UNKNOWN_SLACK
    };
    (
        op.invoke + op.skew.0 - TOLERANCE,
        op.ret + op.skew.1 + TOLERANCE + slack,
    )
}

/// The instants in `lo..=hi` that can give different decisions on `cur`: the ends, and around
/// the lease end and the expiry.
fn candidates(lo: Millis, hi: Millis, cur: Option<&Record>) -> Vec<Millis> {
    let mut v = vec![lo, hi];
    if let Some(r) = cur {
        for t in r.lease_expires_at.into_iter().chain(r.expires_at) {
            v.extend(
                (-1..=1)
                    .map(|d| t.saturating_add(d))
                    .filter(|x| (lo..=hi).contains(x)),
            );
        }
    }
    v.sort_unstable();
    v.dedup();
    v
}
