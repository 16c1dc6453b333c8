//! The ledger state machine (docs/api.md, "Claim transitions" and "Settling"): given the current
//! record (or none), a request and `now`, it decides the answer and the next record. Pure code,
//! the one definition for every store. That includes the dedup hits a Claim answered from the
//! record leaves, and where hits gathered to be written later go (`hits`); and the operator's
//! transitions: the approval gate (`approval`), the attempt cap (in `claim`) and purge (`purge`).
//!
//! It must not do I/O, read a clock, or know about gRPC or a database: the engine feeds it records
//! read from a store and writes back what it decides with compare-and-set.

#![warn(unreachable_pub)]

mod approval;
mod budget;
mod claim;
mod expiry;
mod hits;
mod intent;
mod lease_bound;
mod listing;
#[cfg(test)]
mod operator_tests;
mod purge;
mod record;
mod settle;
#[cfg(test)]
mod tests;

pub use approval::{approve, reject, REJECTED_CODE};
pub use budget::{give_back, reserve, Budget, Exhausted, Reservation};
pub use budget::{MAX_BUDGET_CHILDREN, MAX_BUDGET_NAMESPACES};
pub use claim::{claim, ClaimArgs, ClaimDecision, ClaimOutcome, EXHAUSTED_CODE, EXHAUSTED_MESSAGE};
pub use claim::{decide_claim, Claimed};
pub use expiry::expiry;
pub use hits::{add_hits, count_hits, HitBatch, Life, Share};
pub use intent::{
    admit as admit_intent, entry_id as intent_entry_id, entry_of as intent_entry_of, is_internal,
    keys as intent_keys, to_read as intent_keys_to_read, GuardMode, IntentKey, IntentMatch,
    IntentRule, Verdict, DEFAULT_WINDOW as DEFAULT_INTENT_WINDOW, INTENT_NAMESPACE,
    MAX_WINDOW as MAX_INTENT_WINDOW, MIN_WINDOW as MIN_INTENT_WINDOW,
};
pub use lease_bound::{
    bound_lease, lease_end, CLOCK_TOLERANCE, LEASE_AHEAD_OF_CLOCK, MAX_LEASE_TTL,
};
pub use listing::{Attention, AttentionCounts, Bucket, ListFilter, LISTED};
pub use purge::purge;
pub use record::{bound_history, Event, EventKind, ATTEMPTS_EXHAUSTED, MAX_HISTORY};
pub use record::{
    Approval, Decision, Lease, Millis, OpError, OpResult, ParentRef, Record, RecordId, Semantics,
    Status,
};
pub use settle::{complete, fail, fail_nothing_ran, renew, Disposition, NOTHING_RAN};

/// A request the state machine refuses; nothing changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LedgerError {
    /// The key exists with another fingerprint: a different intent reuses the key.
    #[error("the key was first claimed with different arguments")]
    KeyReused,
    /// The token is not the record's current token (taken over, reconciled, expired or deleted).
    #[error("the lease token is not the current one")]
    LeaseLost,
    /// This token already settled the record with a different outcome.
    #[error("the operation was already settled with a different outcome")]
    AlreadySettled,
    /// An operator's transition (approve, reject, purge) on a key without a live record.
    #[error("no such record")]
    NotFound,
    /// An Approve or Reject of a record that does not await approval (never did, was decided
    /// otherwise, or has moved on since).
    #[error("the operation does not await approval")]
    NotAwaitingApproval,
    /// A Purge of an unsettled at-most-once operation without `force`.
    #[error("the operation is an unsettled at-most-once operation: purging it lets the effect run again; pass force to purge it anyway")]
    UnsettledAtMostOnce,
}

/// How a decision changes the stored record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Nothing to store: the answer comes from the record as it is.
    Keep,
    /// Create the record (an expired row counts as absent).
    Insert,
    /// Replace the stored record whose version is `expected_version`.
    Replace {
        /// The version read before deciding.
        expected_version: u64,
        /// `false` when only counters change (dedup hits): the store may group such a write with
        /// the next durable commit instead of forcing its own fsync.
        durable: bool,
    },
}

/// A decision: the record after it (none when absent) and how to store it. A tombstone
/// (`Status::Abandoned`) is stored like any record; the engine shows callers no record for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    /// The record as the caller should see it after the decision.
    pub record: Option<Record>,
    /// What the store must do for the decision to hold.
    pub change: Change,
}

impl Transition {
    fn keep(record: &Record) -> Self {
        Self {
            record: Some(record.clone()),
            change: Change::Keep,
        }
    }

    /// `next` replaces `current`; `next.version` must already be `current.version + 1`.
    fn replace(current: &Record, next: Record, durable: bool) -> Self {
        debug_assert_eq!(next.version, current.version + 1);
        Self {
            record: Some(next),
            change: Change::Replace {
                expected_version: current.version,
                durable,
            },
        }
    }
}

/// Returns a copy of `current` ready to be changed at `now`: version +1, updated_at = now.
fn next_version(current: &Record, now: Millis) -> Record {
    let mut next = current.clone();
    next.version = current.version + 1;
    next.updated_at = now;
    next
}
