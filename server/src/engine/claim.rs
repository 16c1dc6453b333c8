//! Claim: one decision (acquire, replay, in progress, reconcile), or — for a Claim that may
//! `wait` — a loop of decisions that writes nothing while the answer would be IN_PROGRESS, so
//! that only the final answer counts a dedup hit and leaves a receipt.

use super::{millis, Engine, EngineError, First};
use crate::ledger::{self, ClaimArgs, ClaimOutcome, Lease, Millis, Record, RecordId, Status};
use crate::ledger::{Change, Transition};
use crate::store::Store;
use std::time::Duration;

/// Longest `retry_after` hint for an IN_PROGRESS answer.
const MAX_RETRY_HINT: Millis = 1_000;
/// Polling bounds for waiters on a store shared with other processes.
const POLL_MIN: Millis = 50;
const POLL_MAX: Millis = 1_000;

/// The answer to a Claim.
#[derive(Debug, Clone)]
pub struct ClaimReply {
    /// What the caller should do.
    pub outcome: ClaimOutcome,
    /// The record after the Claim; its history may be missing (a Claim's answer does not show it:
    /// `lookup` does).
    pub record: Record,
    /// The caller's lease when ACQUIRED.
    pub lease: Option<Lease>,
    /// When IN_PROGRESS: how long to wait before claiming again.
    pub retry_after: Option<Millis>,
}

/// What one round of a Claim decided.
enum Claimed {
    /// The answer (written, or parked as a dedup hit).
    Answer {
        outcome: ClaimOutcome,
        takeover: bool,
    },
    /// IN_PROGRESS with wait left: nothing written, look again later.
    Held { lease_end: Option<Millis> },
}

impl<S: Store> Engine<S> {
    /// Claim, holding an IN_PROGRESS answer up to `wait` for the record to settle.
    ///
    /// The wait is a loop around the decision: while a Claim would answer IN_PROGRESS and wait
    /// is left, it writes nothing (no dedup hit, no receipt) and sleeps until the record settles
    /// (a notification from this process, or a poll when other processes share the store), its
    /// lease runs out, the wait runs out or the server shuts down; then it decides again. So
    /// duplicates that lose the race to create a fresh key are held like any other, and one Claim
    /// counts at most one answer.
    pub async fn claim(
        &self,
        id: &RecordId,
        args: &ClaimArgs,
        wait: Option<Millis>,
    ) -> Result<ClaimReply, EngineError> {
        let deadline = wait
            .filter(|w| *w > 0)
            .map(|w| tokio::time::Instant::now() + millis(w));
        let mut shutdown = self.shutdown.subscribe();
        let mut first = if self.store.insert_first() {
            First::Absent
        } else {
            First::Brief
        };
        let mut poll = POLL_MIN;
        loop {
            let holding = deadline.is_some_and(|d| tokio::time::Instant::now() < d)
                && !*shutdown.borrow_and_update();
            // Listen before deciding, so that a settle right after the decision still wakes us.
            let notified = self.waiters.channel(id).notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let (record, claimed) = self
                .run(id, first, |current, now| {
                    let decision = ledger::claim(id, current, args, now)?;
                    if holding && decision.outcome == ClaimOutcome::InProgress {
                        // Hold it: nothing is written until the answer is final.
                        let lease_end = decision.record().lease_expires_at;
                        let keep = Transition {
                            record: None,
                            change: Change::Keep,
                        };
                        return Ok((keep, Claimed::Held { lease_end }));
                    }
                    // An acquisition of a PROCESSING record is a takeover of an expired lease.
                    let takeover = decision.outcome == ClaimOutcome::Acquired
                        && current
                            .is_some_and(|r| r.status == Status::Processing && !r.is_expired(now));
                    let outcome = decision.outcome;
                    Ok((decision.transition, Claimed::Answer { outcome, takeover }))
                })
                .await?;
            let (outcome, takeover) = match claimed {
                Claimed::Answer { outcome, takeover } => (outcome, takeover),
                Claimed::Held { lease_end } => {
                    let deadline = deadline.expect("only a waiting Claim is held");
                    let nap = self.nap(lease_end, &mut poll);
                    let wake = (tokio::time::Instant::now() + nap).min(deadline);
                    tokio::select! {
                        _ = &mut notified => {}
                        _ = tokio::time::sleep_until(wake) => {}
                        _ = shutdown.wait_for(|down| *down) => {}
                    }
                    // The record exists now: read it rather than try to create it again.
                    first = First::Brief;
                    continue;
                }
            };
            let mut record = record.expect("a claim always yields a record");
            // A Claim's answer shows the counter, not the history (a brief read left it out).
            self.hits.merge_counts_into(&mut record).await;
            self.metrics.claim(&id.tenant, &id.namespace, outcome);
            if takeover {
                self.metrics.takeover();
            }
            let now = self.clock.now();
            return Ok(ClaimReply {
                lease: (outcome == ClaimOutcome::Acquired).then(|| record.lease()),
                retry_after: (outcome == ClaimOutcome::InProgress)
                    .then(|| retry_hint(&record, now)),
                outcome,
                record,
            });
        }
    }

    /// How long a held Claim sleeps before it looks again (a settle in this process wakes it
    /// earlier): until the holder's lease runs out, and on a store other processes share at most
    /// `poll`, which doubles up to `POLL_MAX` from one look to the next.
    fn nap(&self, lease_end: Option<Millis>, poll: &mut Millis) -> Duration {
        let now = self.clock.now();
        let mut nap = lease_end.map_or(1, |end| end - now).max(1);
        if !self.store.single_process() {
            nap = nap.min(*poll);
            *poll = (*poll * 2).min(POLL_MAX);
        }
        millis(nap)
    }
}

/// How long an IN_PROGRESS caller should wait: the lease's remainder, at most a second.
fn retry_hint(record: &Record, now: Millis) -> Millis {
    record
        .lease_expires_at
        .map_or(MAX_RETRY_HINT, |end| (end - now).clamp(1, MAX_RETRY_HINT))
}
