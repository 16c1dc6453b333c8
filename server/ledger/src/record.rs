//! The ledger's data: a record's identity, its fields and the values they take.
//!
//! Plain data only, shared by the state machine, the stores and the API; no behaviour beyond small
//! accessors. Times are milliseconds since the Unix epoch on the server clock.

use std::collections::BTreeMap;

/// Milliseconds since the Unix epoch (a point in time) or a length of time in milliseconds.
pub type Millis = i64;

/// Identifies one record: the same key in another namespace or tenant is another record.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RecordId {
    /// Who owns the record, from the caller's credentials.
    pub tenant: String,
    /// The kind of operation.
    pub namespace: String,
    /// The caller's idempotency key.
    pub key: String,
}

impl RecordId {
    /// Builds an identity from its three parts.
    pub fn new(
        tenant: impl Into<String>,
        namespace: impl Into<String>,
        key: impl Into<String>,
    ) -> Self {
        Self {
            tenant: tenant.into(),
            namespace: namespace.into(),
            key: key.into(),
        }
    }
}

/// Where an operation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// Acquired; the holder's side effect is under way.
    Processing,
    /// Completed; the result is replayed.
    Succeeded,
    /// Failed for good; the error is replayed.
    Failed,
    /// Released after a retryable failure; the next Claim acquires.
    Retry,
    /// An at-most-once operation whose lease ran out; needs reconciliation.
    Unknown,
    /// Abandoned: a tombstone, never shown to callers (Lookup answers NOT_FOUND). The key may be
    /// claimed again with any arguments, but its fencing sequence continues, so that no holder of
    /// an earlier token can act on the new claim.
    Abandoned,
    /// Created by a Claim that asked for approval: no lease and no token until an Approve (then
    /// `Approved`) or a Reject (then `Failed`).
    AwaitingApproval,
    /// Approved: the next Claim acquires it.
    Approved,
    /// Purged by an operator: a tombstone like `Abandoned`, but without history or approval gate,
    /// and no token (not even the last one) may act on it. It remembers only the fencing sequence,
    /// and the lease end its last holder may still believe in (`lease_expires_at`), until
    /// `retention` after the later of that and the purge.
    Purged,
}

impl Status {
    /// Whether the record is a tombstone: stored, never shown to callers.
    pub fn is_tombstone(self) -> bool {
        matches!(self, Status::Abandoned | Status::Purged)
    }
}

/// What an approver decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Decision {
    /// The operation may be acquired.
    Approved,
    /// The operation failed for good.
    Rejected,
}

/// The decision on an operation that awaited approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    /// Approved or rejected.
    pub decision: Decision,
    /// Who decided (the approver's token label).
    pub decided_by: String,
    /// The approver's note.
    pub note: String,
    /// When.
    pub decided_at: Millis,
}

/// What a lost lease means for the operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Semantics {
    /// Another caller may take over an expired lease.
    #[default]
    AtLeastOnce,
    /// Never run twice: an expired lease makes the outcome unknown.
    AtMostOnce,
}

/// The stored outcome of a succeeded operation.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OpResult {
    /// The caller's status code.
    pub code: i32,
    /// The response body.
    pub body: Vec<u8>,
    /// The media type of `body`.
    pub content_type: String,
    /// Extra string pairs.
    pub metadata: BTreeMap<String, String>,
}

/// The stored error of a failed attempt.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OpError {
    /// The caller's error code.
    pub code: i32,
    /// A human-readable message.
    pub message: String,
    /// Opaque details.
    pub details: Vec<u8>,
}

/// The (namespace, key) of a parent operation, recorded for audit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParentRef {
    /// The parent's namespace.
    pub namespace: String,
    /// The parent's key.
    pub key: String,
}

/// One operation's entry in the ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Identity.
    pub id: RecordId,
    /// Where the operation stands.
    pub status: Status,
    /// SHA-256 of the canonical arguments of the first Claim.
    pub fingerprint: [u8; 32],
    /// Fixed by the first Claim.
    pub semantics: Semantics,
    /// +1 on every acquisition; only the current token may Renew/Complete/Fail.
    pub fencing_token: u64,
    /// Number of acquisitions so far.
    pub attempt: u32,
    /// Claims answered from the record instead of acquiring it.
    pub dedup_hits: u64,
    /// Free text naming the (last) holder.
    pub lease_owner: String,
    /// When the current lease runs out; `None` once settled.
    pub lease_expires_at: Option<Millis>,
    /// Set when SUCCEEDED.
    pub result: Option<OpResult>,
    /// Set when FAILED, and the last error when RETRY.
    pub error: Option<OpError>,
    /// The parent operation, if any.
    pub parent: Option<ParentRef>,
    /// When the record was created.
    pub created_at: Millis,
    /// When the record last changed.
    pub updated_at: Millis,
    /// When the record disappears (it counts as absent from then on); `None` while an
    /// at-most-once operation is unsettled: such a record is kept until it settles. Set by every
    /// transition from `ledger::expiry`.
    pub expires_at: Option<Millis>,
    /// How long the record is kept after it settles, from the first Claim.
    pub retention: Millis,
    /// Compare-and-set version: +1 on every write, so a store can refuse a write based on a stale read.
    pub version: u64,
    /// The receipt history, oldest first, at most `MAX_HISTORY` events: past that, the oldest
    /// routine receipt (a replay, a renewal) goes first, so that the receipts of who acquired,
    /// took over and settled the operation outlive any number of retries (`bound_history`).
    pub history: Vec<Event>,
    /// Whether nobody may acquire the operation before an approval; fixed by the first Claim and
    /// kept by an ABANDON tombstone for the key's next life (only a Purge clears it).
    pub require_approval: bool,
    /// The most acquisitions allowed, reconciliations not counted (0: no cap); fixed by the
    /// first Claim.
    pub max_attempts: u32,
    /// How many of the `attempt` acquisitions `max_attempts` does not count: reconciliations,
    /// and acquisitions whose holder released them saying it ran nothing (`NOTHING_RAN`). (Named
    /// after the first kind; the stores keep it under this name.)
    pub reconciliations: u32,
    /// The approval decision, once made.
    pub approval: Option<Approval>,
    /// The record is never expired before this, whatever its state: set on a record created over
    /// a Purge tombstone (and carried over an ABANDON tombstone) to the tombstone's expiry, so
    /// that the purged holder's fencing token, still believed in until its lease ends, is not
    /// handed out again by a new life of the key (whose tokens start over at 1) within
    /// `retention` of that lease end.
    pub kept_until: Option<Millis>,
    /// The run budget of the operation's children and their use (`budget`), set by the first
    /// Claim; `None` without one.
    pub budget: Option<super::Budget>,
}

/// Most events a record keeps.
pub const MAX_HISTORY: usize = 64;

/// What happened to a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// A Claim (outcome: what it answered).
    Claim,
    /// A Claim that acquired an expired lease from another holder.
    Takeover,
    /// A Complete.
    Complete,
    /// A Fail (outcome: the disposition).
    Fail,
    /// A Renew (including the server's keep-alive renewals).
    Renew,
    /// An Approve (owner: the approver).
    Approve,
    /// A Reject (owner: the approver).
    Reject,
}

/// The `Event::reason` of an answer the attempt cap decided.
pub const ATTEMPTS_EXHAUSTED: &str = "ATTEMPTS_EXHAUSTED";

/// One receipt in a record's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// When (server clock).
    pub at: Millis,
    /// What.
    pub kind: EventKind,
    /// The answer, e.g. `ACQUIRED`, `COMPLETED`, `SUCCEEDED`, `RETRYABLE`, `RENEWED`.
    pub outcome: String,
    /// The record's attempt after the event.
    pub attempt: u32,
    /// The fencing token after the event.
    pub fencing_token: u64,
    /// Who: the claimer, or the lease holder.
    pub owner: String,
    /// Why the ledger answered as it did when the caller did not choose it (e.g.
    /// `ATTEMPTS_EXHAUSTED`); empty otherwise.
    pub reason: String,
}

impl Event {
    /// Whether this receipt only repeats what the record already says: a Claim answered from the
    /// record (COMPLETED, FAILED, IN_PROGRESS) or a renewal. These go first when the history is
    /// full.
    pub fn is_routine(&self) -> bool {
        match self.kind {
            EventKind::Renew => self.reason.is_empty(),
            EventKind::Claim => {
                self.reason.is_empty()
                    && matches!(
                        self.outcome.as_str(),
                        "COMPLETED" | "FAILED" | "IN_PROGRESS" | "AWAITING_APPROVAL"
                    )
            }
            EventKind::Takeover
            | EventKind::Complete
            | EventKind::Fail
            | EventKind::Approve
            | EventKind::Reject => false,
        }
    }
}

/// Trims a time-ordered history to `MAX_HISTORY` receipts: the oldest routine ones go first, then
/// (only if the decisive ones alone are too many) the oldest.
pub fn bound_history(history: &mut Vec<Event>) {
    let mut excess = history.len().saturating_sub(MAX_HISTORY);
    if excess == 0 {
        return;
    }
    let routine = history.iter().filter(|e| e.is_routine()).count();
    let mut drop_routine = excess.min(routine);
    excess -= drop_routine;
    history.retain(|e| {
        if drop_routine > 0 && e.is_routine() {
            drop_routine -= 1;
            return false;
        }
        true
    });
    history.drain(..excess);
}

impl Record {
    /// Appends an event built from the record's own attempt and token, trimming the history to
    /// `MAX_HISTORY` (`bound_history`).
    pub fn push_event(&mut self, at: Millis, kind: EventKind, outcome: &str, owner: &str) {
        self.push_event_because(at, kind, outcome, owner, "");
    }

    /// `push_event` with the reason the ledger chose the outcome.
    pub fn push_event_because(
        &mut self,
        at: Millis,
        kind: EventKind,
        outcome: &str,
        owner: &str,
        reason: &str,
    ) {
        let event = self.event_because(at, kind, outcome, owner, reason);
        self.history.push(event);
        bound_history(&mut self.history);
    }

    /// The event `push_event_because` would append, built from the record's own attempt and
    /// token, without appending it.
    pub fn event_because(
        &self,
        at: Millis,
        kind: EventKind,
        outcome: &str,
        owner: &str,
        reason: &str,
    ) -> Event {
        Event {
            at,
            kind,
            outcome: outcome.to_owned(),
            attempt: self.attempt,
            fencing_token: self.fencing_token,
            owner: owner.to_owned(),
            reason: reason.to_owned(),
        }
    }

    /// Whether the attempt cap is reached: the next ordinary acquisition would go past it.
    pub fn attempts_exhausted(&self) -> bool {
        self.max_attempts > 0
            && self.attempt.saturating_sub(self.reconciliations) >= self.max_attempts
    }

    /// An expired record counts as absent: it expires at `expires_at` exactly, and never while
    /// `expires_at` is unset.
    pub fn is_expired(&self, now: Millis) -> bool {
        self.expires_at.is_some_and(|at| now >= at)
    }

    /// Whether the current lease has run out at `now` (a lease is valid strictly before its end).
    pub fn lease_expired(&self, now: Millis) -> bool {
        self.lease_expires_at.is_none_or(|end| now >= end)
    }

    /// The caller's view of the current lease.
    pub fn lease(&self) -> Lease {
        Lease {
            token: self.fencing_token,
            expires_at: self.lease_expires_at.unwrap_or(self.updated_at),
            attempt: self.attempt,
        }
    }
}

/// A holder's lease on an acquired operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// The fencing token.
    pub token: u64,
    /// When the lease runs out unless renewed.
    pub expires_at: Millis,
    /// Which acquisition this is.
    pub attempt: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_history_drops_routine_receipts_before_decisive_ones() {
        let event = |at, kind, outcome: &str| Event {
            at,
            kind,
            outcome: outcome.into(),
            attempt: 1,
            fencing_token: 1,
            owner: "w".into(),
            reason: String::new(),
        };
        let mut history = vec![event(0, EventKind::Claim, "ACQUIRED")];
        history.extend((1..=40).map(|i| event(i, EventKind::Renew, "RENEWED")));
        history.push(event(41, EventKind::Complete, "SUCCEEDED"));
        history.extend((42..=80).map(|i| event(i, EventKind::Claim, "COMPLETED")));
        bound_history(&mut history);
        assert_eq!(history.len(), MAX_HISTORY);
        assert_eq!(history[0].outcome, "ACQUIRED");
        let complete = history.iter().filter(|e| e.kind == EventKind::Complete);
        assert_eq!(complete.count(), 1);
        assert_eq!(history.last().unwrap().at, 80, "the newest receipts stay");
        assert!(
            history.windows(2).all(|w| w[0].at < w[1].at),
            "still in order"
        );

        // Only when decisive receipts alone overflow do the oldest of them go.
        let mut decisive: Vec<_> = (0..70)
            .map(|i| event(i, EventKind::Takeover, "ACQUIRED"))
            .collect();
        decisive.push(event(70, EventKind::Renew, "RENEWED"));
        bound_history(&mut decisive);
        assert_eq!(decisive.len(), MAX_HISTORY);
        assert_eq!(decisive[0].at, 6);
        assert!(decisive.iter().all(|e| !e.is_routine()));
    }
}
