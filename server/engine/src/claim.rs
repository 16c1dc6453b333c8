//! Claim: one decision (acquire, replay, in progress, reconcile), or — for a Claim that may
//! `wait` — a loop of decisions that writes nothing while the answer would be IN_PROGRESS (or
//! AWAITING_APPROVAL), so that only the final answer counts a dedup hit and leaves a receipt. A
//! dry run decides once on the stored record and writes nothing at all.

use super::first::Leading;
use super::rounds::{nothing, Basis, Ran};
use super::waiters::Listener;
use super::{millis, Engine, EngineError};
use oncekey_ledger::{
    self as ledger, ClaimArgs, ClaimOutcome, Claimed, Event, EventKind, Lease, Millis,
};
use oncekey_ledger::{Record, RecordId, Transition};
use oncekey_store::Store;
use std::time::Duration;
use tokio::sync::watch;

/// Longest `retry_after` hint for an IN_PROGRESS answer.
const MAX_RETRY_HINT: Millis = 1_000;
/// Pushback of a Claim refused for its tenant's held-claims bound: the holder's remaining lease
/// (when a takeover may be due), at least a second and at most ten. A tenant is refused only
/// past a bound that normal duplicates never reach; its refused Claims coming back every few
/// seconds, not in a tight loop, keep the refusals from flooding the server in turn.
const MIN_HELD_RETRY: Millis = 1_000;
const MAX_HELD_RETRY: Millis = 10_000;
/// Polling bounds for waiters on a store shared with other processes.
const POLL_MIN: Millis = 50;
const POLL_MAX: Millis = 1_000;
/// How long a held Claim of a record without a lease (awaiting approval) sleeps at most: the
/// longest `wait` the API accepts, so that it wakes no later than its deadline.
const NO_LEASE_NAP: Millis = 60_000;

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
    /// Whether this Claim created the record (a new key, or one after a tombstone): what a run
    /// budget counts.
    pub created: bool,
}

/// What a Claim that may be held waits with: until when, and the server's shutdown. A look is
/// given one only while wait is left, and only a look given one can answer `Held` or `Unread`.
struct Hold {
    deadline: tokio::time::Instant,
    shutdown: watch::Receiver<bool>,
}

impl Hold {
    /// Whether the Claim may be held now: its wait is not over and the server is not stopping.
    fn open(&self) -> bool {
        tokio::time::Instant::now() < self.deadline && !*self.shutdown.borrow()
    }
}

/// What one round of a Claim decided, beside its transition.
enum Round<'h> {
    /// The Claim is answered.
    Answered(Answer),
    /// IN_PROGRESS (or AWAITING_APPROVAL) with wait left: nothing written, look again later.
    Held {
        lease_end: Option<Millis>,
        hold: &'h Hold,
    },
}

/// What one look of a Claim came to.
// Returned once from a look and taken apart at once: boxing the answer would add an allocation
// to every Claim.
#[allow(clippy::large_enum_variant)]
enum Look<'h> {
    /// The Claim is answered.
    Answered(ClaimReply),
    /// Held: nothing written; the holder's lease ends at `lease_end` (none: awaiting approval).
    Held {
        lease_end: Option<Millis>,
        hold: &'h Hold,
    },
    /// A held Claim could not read its record: it looks again a little later.
    Unread(&'h Hold),
}

/// The answer to a dry run: what a Claim would get now, and the record as stored.
#[derive(Debug, Clone)]
pub struct DryRunReply {
    /// What the Claim would answer.
    pub outcome: ClaimOutcome,
    /// The record as stored (history left out); `None` when absent, expired or a tombstone.
    pub record: Option<Record>,
    /// When the Claim would be IN_PROGRESS: how long to wait before claiming.
    pub retry_after: Option<Millis>,
}

/// How a Claim is answered.
enum Answer {
    /// By the record its transition writes (ACQUIRED, or NEEDS_RECONCILIATION turning a record
    /// UNKNOWN).
    Written {
        outcome: ClaimOutcome,
        /// Whether the acquisition took an expired lease over (the ledger's receipt says so).
        takeover: bool,
    },
    /// From the record as it is (a dedup hit): nothing is written now, the hit is parked with
    /// its receipt.
    Hit {
        outcome: ClaimOutcome,
        receipt: Event,
    },
}

impl<S: Store> Engine<S> {
    /// Claim, holding an IN_PROGRESS answer up to `wait` for the record to settle, with no bound
    /// on how many Claims a tenant may hold (`claim_bounded`).
    pub async fn claim(
        &self,
        id: &RecordId,
        args: &ClaimArgs,
        wait: Option<Millis>,
    ) -> Result<ClaimReply, EngineError> {
        self.claim_bounded(id, args, wait, 0).await
    }

    /// Claim, holding an IN_PROGRESS answer up to `wait` for the record to settle, unless the
    /// tenant holds `max_held` Claims already (0: no bound): then `EngineError::HeldLimit`, with
    /// nothing written.
    ///
    /// The wait is a loop around the decision: while a Claim would answer IN_PROGRESS and wait
    /// is left, it writes nothing (no dedup hit, no receipt) and sleeps until the record settles
    /// (a notification from this process, or a poll when other processes share the store), its
    /// lease runs out, the wait runs out or the server shuts down; then it decides again. So
    /// duplicates that lose the race to create a fresh key are held like any other, and one Claim
    /// counts at most one answer. The first time a Claim would be held it is counted against its
    /// tenant's bound and starts listening for settles of its key (and of no other), then looks
    /// again, so that a settle between the two looks is not missed.
    pub async fn claim_bounded(
        &self,
        id: &RecordId,
        args: &ClaimArgs,
        wait: Option<Millis>,
        max_held: u32,
    ) -> Result<ClaimReply, EngineError> {
        // Only a Claim that may wait listens for shutdown and settles.
        let waits = wait.filter(|w| *w > 0).map(|w| Hold {
            deadline: tokio::time::Instant::now() + millis(w),
            shutdown: self.shutdown.subscribe(),
        });
        // The first look may assume the key is new, where a failed insert returns what exists —
        // unless another Claim of the key was doing just that: then it has ended, and this one
        // reads (`first`). Later looks (after a hold: the record exists) read.
        let mut leading = match self.core.capabilities.insert_returns_live {
            true => self.core.first_looks.enter(id).await,
            false => None,
        };
        let mut assume_new = leading.is_some();
        let mut poll = POLL_MIN;
        // Set once the Claim is held: counted for its tenant, and listening on its key.
        let mut permit = None;
        let mut listener: Option<Listener<'_>> = None;
        loop {
            if permit.is_some() && listener.is_none() {
                listener = Some(self.core.waiters.listen(id));
            }
            let hold = waits.as_ref().filter(|h| h.open());
            // Listen before looking, so that a settle right after the look still wakes us.
            let notified = listener
                .as_ref()
                .filter(|_| hold.is_some())
                .map(|listener| listener.notified());
            tokio::pin!(notified);
            if let Some(notified) = notified.as_mut().as_pin_mut() {
                notified.enable();
            }
            // Boxed: a look holds records while it runs, and a held Claim should keep only
            // what it waits with (a Claim may be held for a minute, thousands at once).
            let look = self.look(
                id,
                args,
                hold,
                std::mem::take(&mut assume_new),
                &mut leading,
            );
            let (lease_end, hold) = match Box::pin(look).await? {
                Look::Answered(reply) => return Ok(reply),
                Look::Held { lease_end, hold } => (lease_end, hold),
                Look::Unread(hold) => {
                    let nap = (POLL_MIN * 2).min(POLL_MAX);
                    let wake = (tokio::time::Instant::now() + millis(nap)).min(hold.deadline);
                    tokio::time::sleep_until(wake).await;
                    continue;
                }
            };
            let Some(notified) = notified.as_pin_mut() else {
                // Held for the first time: counted within the tenant's bound (or refused), then
                // listening on the key from the next look on.
                if permit.is_none() {
                    permit = self.core.held.enter(&id.tenant, max_held);
                }
                if permit.is_none() {
                    self.core.metrics.admission_refused("held");
                    tracing::debug!(tenant = %id.tenant, "Claim refused: too many held");
                    let now = self.core.clock.now();
                    let retry_after = lease_end.map_or(MAX_HELD_RETRY, |end| end - now);
                    return Err(EngineError::HeldLimit {
                        retry_after: retry_after.clamp(MIN_HELD_RETRY, MAX_HELD_RETRY),
                    });
                }
                continue;
            };
            let nap = self.nap(lease_end, &mut poll);
            let wake = (tokio::time::Instant::now() + nap).min(hold.deadline);
            let mut shutdown = hold.shutdown.clone();
            tokio::select! {
                _ = notified => {}
                _ = tokio::time::sleep_until(wake) => {}
                _ = shutdown.wait_for(|down| *down) => {}
            }
        }
    }

    /// One look of a Claim at its record: read it (unless the key is assumed new), decide, and
    /// answer or write; `leading` (the first look at a new key) ends with it.
    async fn look<'a, 'h>(
        &'a self,
        id: &RecordId,
        args: &ClaimArgs,
        hold: Option<&'h Hold>,
        assume_new: bool,
        leading: &mut Option<Leading<'a>>,
    ) -> Result<Look<'h>, EngineError> {
        let basis = match assume_new {
            true => Basis::Assumed(None),
            false => match self.core.read_brief(id).await {
                Ok(basis) => basis,
                // A held Claim looks again later: a read that failed wrote nothing, and a store
                // that times out now and then must not end a wait that has time left.
                Err(e) => match hold {
                    Some(hold) => {
                        tracing::warn!(error = %e, "a held Claim could not read its record: looking again");
                        return Ok(Look::Unread(hold));
                    }
                    None => return Err(e.into()),
                },
            },
        };
        let Ran {
            record,
            decided_on,
            extra,
        } = self
            .core
            .run(id, basis, |current, now| {
                decide(id, current, args, now, hold)
            })
            .await?;
        // The first look has ended: the duplicates waiting for it go on.
        drop(leading.take());
        Ok(match extra {
            Round::Held { lease_end, hold } => Look::Held { lease_end, hold },
            Round::Answered(answer) => {
                Look::Answered(self.answer(id, answer, record, decided_on).await)
            }
        })
    }

    /// The reply to a Claim: the record written, or for a dedup hit (parked here) the record
    /// it was decided on. Counts it in the metrics.
    async fn answer(
        &self,
        id: &RecordId,
        answer: Answer,
        written: Option<Record>,
        decided_on: Option<Record>,
    ) -> ClaimReply {
        let created = matches!(answer, Answer::Written { .. })
            && decided_on.as_ref().is_none_or(|r| r.status.is_tombstone());
        let (mut record, outcome, takeover) = match answer {
            Answer::Written { outcome, takeover } => {
                (written.expect("a Claim writes a record"), outcome, takeover)
            }
            Answer::Hit { outcome, receipt } => {
                let stored = decided_on.expect("a hit is answered from a record");
                self.park_hit(&stored, receipt);
                (stored, outcome, false)
            }
        };
        // A Claim's answer shows the counter, not the history (a brief read left it out).
        self.core.hits.merge_counts_into(&mut record).await;
        self.core.metrics.claim(&id.tenant, &id.namespace, outcome);
        if takeover {
            self.core.metrics.takeover();
        }
        let now = self.core.clock.now();
        ClaimReply {
            lease: (outcome == ClaimOutcome::Acquired).then(|| record.lease()),
            retry_after: (outcome == ClaimOutcome::InProgress).then(|| retry_hint(&record, now)),
            outcome,
            record,
            created,
        }
    }

    /// What `claim` would answer now, deciding on the stored record without writing anything:
    /// no record, lease, dedup hit or receipt. KEY_REUSED like the Claim itself.
    pub async fn dry_run(
        &self,
        id: &RecordId,
        args: &ClaimArgs,
    ) -> Result<DryRunReply, EngineError> {
        let basis = self.core.read_brief(id).await?;
        let now = self.core.clock.now();
        let stored = basis.into_record();
        let outcome = ledger::decide_claim(id, stored.as_ref(), args, now)?.outcome();
        let mut record = stored.filter(|r| !r.status.is_tombstone());
        if let Some(record) = record.as_mut() {
            self.core.hits.merge_counts_into(record).await;
        }
        let retry_after = match (&record, outcome) {
            (Some(record), ClaimOutcome::InProgress) => Some(retry_hint(record, now)),
            _ => None,
        };
        Ok(DryRunReply {
            outcome,
            record,
            retry_after,
        })
    }

    /// How long a held Claim sleeps before it looks again (a settle or decision in this process
    /// wakes it earlier): until the holder's lease runs out (a record awaiting approval has none:
    /// until the wait runs out), and on a store other processes share at most `poll`, which
    /// doubles up to `POLL_MAX` from one look to the next.
    fn nap(&self, lease_end: Option<Millis>, poll: &mut Millis) -> Duration {
        let now = self.core.clock.now();
        let mut nap = lease_end.map_or(NO_LEASE_NAP, |end| end - now).max(1);
        if !self.core.capabilities.single_process {
            nap = nap.min(*poll);
            *poll = (*poll * 2).min(POLL_MAX);
        }
        millis(nap)
    }
}

/// One round of a Claim: the ledger's decision on `current`, held when it would answer
/// IN_PROGRESS (or AWAITING_APPROVAL) and `hold` says wait is left, parked when it is a dedup
/// hit.
fn decide<'h>(
    id: &RecordId,
    current: Option<&Record>,
    args: &ClaimArgs,
    now: Millis,
    hold: Option<&'h Hold>,
) -> Result<(Transition, Round<'h>), ledger::LedgerError> {
    let (transition, outcome, lease_end, answer) =
        match ledger::decide_claim(id, current, args, now)? {
            // Answered from `current` as it is: nothing is copied, nothing written now.
            Claimed::Hit { outcome, receipt } => {
                let lease_end = current.and_then(|r| r.lease_expires_at);
                (
                    nothing(),
                    outcome,
                    lease_end,
                    Answer::Hit { outcome, receipt },
                )
            }
            Claimed::Decided(decision) => {
                let outcome = decision.outcome;
                let lease_end = decision.record().lease_expires_at;
                let takeover = decision.receipt().kind == EventKind::Takeover;
                let written = Answer::Written { outcome, takeover };
                (decision.transition, outcome, lease_end, written)
            }
        };
    let pending = matches!(
        outcome,
        ClaimOutcome::InProgress | ClaimOutcome::AwaitingApproval
    );
    if let (Some(hold), true) = (hold, pending) {
        // Nothing is written until the answer is final — but a lease that ends further ahead
        // than its length is shortened now, or the Claim would be held until the clock caught
        // up. (A record that awaits approval has no lease: it is looked at again when decided,
        // or when the wait runs out.)
        let bounded = current.and_then(|c| ledger::bound_lease(c, now));
        return Ok(match bounded {
            Some(transition) => {
                let lease_end = transition.record.as_ref().and_then(|r| r.lease_expires_at);
                (transition, Round::Held { lease_end, hold })
            }
            None => (nothing(), Round::Held { lease_end, hold }),
        });
    }
    Ok((transition, Round::Answered(answer)))
}

/// How long an IN_PROGRESS caller should wait: the lease's remainder, at most a second.
fn retry_hint(record: &Record, now: Millis) -> Millis {
    record
        .lease_expires_at
        .map_or(MAX_RETRY_HINT, |end| (end - now).clamp(1, MAX_RETRY_HINT))
}
