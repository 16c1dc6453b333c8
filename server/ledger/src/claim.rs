//! Claim (docs/api.md, "Claim transitions", rules 2–9): acquire, replay, report in-progress or
//! ask for reconciliation; and the Claim's side of the operator rules: a record created awaiting
//! approval is answered AWAITING_APPROVAL until decided, and the attempt cap (`max_attempts`)
//! fails a RETRY record, or sends a lapsed at-least-once lease to reconciliation, instead of
//! acquiring it again.

use super::expiry::with_expiry;
use super::lease_bound::shortened;
use super::ATTEMPTS_EXHAUSTED;
use super::{bound_history, Event, EventKind, Millis, OpError, ParentRef, Record, RecordId};
use super::{next_version, Change, LedgerError, Transition};
use super::{Budget, Semantics, Status};

/// The error code of an operation the attempt cap failed.
pub const EXHAUSTED_CODE: i32 = 429;
/// The error message of an operation the attempt cap failed.
pub const EXHAUSTED_MESSAGE: &str = "attempts exhausted";

/// A validated Claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimArgs {
    /// SHA-256 of the canonical arguments.
    pub fingerprint: [u8; 32],
    /// Lease length on acquisition.
    pub lease_ttl: Millis,
    /// Retention; used only when this Claim creates the record.
    pub retention: Millis,
    /// Semantics; used only when this Claim creates the record.
    pub semantics: Semantics,
    /// Who is claiming.
    pub owner: String,
    /// The parent operation; recorded only when this Claim creates the record.
    pub parent: Option<ParentRef>,
    /// Acquire an UNKNOWN at-most-once operation to reconcile it.
    pub reconcile: bool,
    /// Create the record awaiting approval; used only when this Claim creates the record.
    pub require_approval: bool,
    /// The attempt cap (0: none); used only when this Claim creates the record.
    pub max_attempts: u32,
    /// The run budget of this operation's children; used only when this Claim creates the
    /// record (kept only when it limits something).
    pub budget: Option<Budget>,
}

#[cfg(any(test, feature = "fixtures"))]
impl ClaimArgs {
    /// The tests' Claim: every option off (no parent, reconcile, approval or attempt cap).
    pub fn for_test(
        fingerprint: [u8; 32],
        semantics: Semantics,
        lease_ttl: Millis,
        retention: Millis,
        owner: &str,
    ) -> Self {
        Self {
            fingerprint,
            lease_ttl,
            retention,
            semantics,
            owner: owner.into(),
            parent: None,
            reconcile: false,
            require_approval: false,
            max_attempts: 0,
            budget: None,
        }
    }
}

/// What the caller should do: the one outcome type of the server (the API maps it to the wire's
/// enum, metrics label counters with `name`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClaimOutcome {
    /// The caller holds the lease.
    Acquired,
    /// Replay of a stored result.
    Completed,
    /// Replay of a stored final error.
    Failed,
    /// Someone else holds a valid lease.
    InProgress,
    /// An at-most-once outcome is unknown.
    NeedsReconciliation,
    /// The operation awaits an Approve or Reject.
    AwaitingApproval,
    /// The intent guard refused a new key: its arguments were claimed under another key within
    /// the window (decided by the engine from the guard's index, never by `claim`).
    DuplicateIntent,
}

impl ClaimOutcome {
    /// Every outcome, in declaration order (`outcome as usize` indexes it).
    pub const ALL: [ClaimOutcome; 7] = [
        ClaimOutcome::Acquired,
        ClaimOutcome::Completed,
        ClaimOutcome::Failed,
        ClaimOutcome::InProgress,
        ClaimOutcome::NeedsReconciliation,
        ClaimOutcome::AwaitingApproval,
        ClaimOutcome::DuplicateIntent,
    ];

    /// The outcome's name in the documented API (`ACQUIRED`, `IN_PROGRESS`, …).
    pub fn name(self) -> &'static str {
        match self {
            ClaimOutcome::Acquired => "ACQUIRED",
            ClaimOutcome::Completed => "COMPLETED",
            ClaimOutcome::Failed => "FAILED",
            ClaimOutcome::InProgress => "IN_PROGRESS",
            ClaimOutcome::NeedsReconciliation => "NEEDS_RECONCILIATION",
            ClaimOutcome::AwaitingApproval => "AWAITING_APPROVAL",
            ClaimOutcome::DuplicateIntent => "DUPLICATE_INTENT",
        }
    }
}

/// The answer to a Claim and the change that makes it true.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimDecision {
    /// What the caller should do.
    pub outcome: ClaimOutcome,
    /// The record after the Claim and how to store it (`record` is always set).
    pub transition: Transition,
}

impl ClaimDecision {
    /// The record after the Claim.
    pub fn record(&self) -> &Record {
        self.transition
            .record
            .as_ref()
            .expect("a claim always yields a record")
    }

    /// The receipt the Claim leaves in the record's history; its kind tells an acquisition that
    /// took an expired lease over (`EventKind::Takeover`) from any other.
    pub fn receipt(&self) -> &super::Event {
        self.record()
            .history
            .last()
            .expect("every Claim leaves its receipt last")
    }

    /// Whether the Claim was answered from the record as it is (a dedup hit): its write changes
    /// only the counter and the history (`durable: false`), so it may be gathered with other
    /// hits and added later (`add_hits`).
    pub fn is_dedup_hit(&self) -> bool {
        matches!(
            self.transition.change,
            Change::Replace { durable: false, .. }
        )
    }
}

/// A Claim decided without copying the record it is answered from: the ledger's answer to a
/// Claim, as `claim` gives it, but a dedup hit comes as its outcome and receipt alone, not as
/// the whole next record (a copy of the record, its result included, that a caller parking the
/// hit would throw away).
#[derive(Debug, Clone, PartialEq, Eq)]
// Returned by value and taken apart at once, as `claim` returns a `ClaimDecision`: boxing the
// large variant would add an allocation to every Claim that writes.
#[allow(clippy::large_enum_variant)]
pub enum Claimed {
    /// Answered from the record as it is (rules 4–6, a repeated NEEDS_RECONCILIATION): only its
    /// counter and history change, by this receipt (`claim` gives the write).
    Hit {
        /// What the caller should do.
        outcome: ClaimOutcome,
        /// The receipt the hit leaves in the record's history.
        receipt: Event,
    },
    /// Any other answer, with the write that makes it true.
    Decided(ClaimDecision),
}

impl Claimed {
    /// What the caller should do.
    pub fn outcome(&self) -> ClaimOutcome {
        match self {
            Claimed::Hit { outcome, .. } => *outcome,
            Claimed::Decided(decision) => decision.outcome,
        }
    }
}

/// Decides a Claim of `id` at `now` given the stored record (`None` when absent).
pub fn claim(
    id: &RecordId,
    current: Option<&Record>,
    args: &ClaimArgs,
    now: Millis,
) -> Result<ClaimDecision, LedgerError> {
    Ok(match decide_claim(id, current, args, now)? {
        Claimed::Decided(decision) => decision,
        Claimed::Hit { outcome, receipt } => {
            let current = current.expect("a hit is answered from a record");
            let mut decision = dedup_hit(current, outcome);
            if let Some(record) = decision.transition.record.as_mut() {
                record.history.push(receipt);
                bound_history(&mut record.history);
            }
            decision
        }
    })
}

/// `claim`, with a dedup hit answered by its outcome and receipt (`Claimed::Hit`) instead of
/// the record it would write.
pub fn decide_claim(
    id: &RecordId,
    current: Option<&Record>,
    args: &ClaimArgs,
    now: Millis,
) -> Result<Claimed, LedgerError> {
    let Some(current) = current.filter(|r| !r.is_expired(now)) else {
        return Ok(Claimed::Decided(create(id, args, 0, false, now)));
    };
    match current.status {
        Status::Abandoned => return Ok(Claimed::Decided(recreate(id, current, args, now))),
        Status::Purged => {
            return Ok(Claimed::Decided(recreate_after_purge(
                id, current, args, now,
            )))
        }
        _ => {}
    }
    if current.fingerprint != args.fingerprint {
        return Err(LedgerError::KeyReused);
    }
    let lapsed = current.status == Status::Processing && current.lease_expired(now);
    let hit = |outcome: ClaimOutcome| {
        let receipt = current.event_because(now, EventKind::Claim, outcome.name(), &args.owner, "");
        Ok(Claimed::Hit { outcome, receipt })
    };
    let (mut decision, kind, reason) = match current.status {
        Status::Succeeded => return hit(ClaimOutcome::Completed),
        Status::Failed => return hit(ClaimOutcome::Failed),
        Status::AwaitingApproval => return hit(ClaimOutcome::AwaitingApproval),
        Status::Approved => (acquire(current, args, now), EventKind::Claim, ""),
        // A lease that ends further ahead than its length (granted while the clock ran ahead)
        // is shortened as the Claim answers (`lease_bound`).
        Status::Processing if !lapsed => match shortened(current, now) {
            Some(next) => (in_progress(current, next), EventKind::Claim, ""),
            None => return hit(ClaimOutcome::InProgress),
        },
        Status::Processing
            if current.semantics == Semantics::AtLeastOnce && !current.attempts_exhausted() =>
        {
            (acquire(current, args, now), EventKind::Takeover, "")
        }
        // A reconciler acquires whatever the cap says: reconciliation never counts against it.
        Status::Processing | Status::Unknown if args.reconcile => {
            (reconcile(current, args, now), EventKind::Claim, "")
        }
        // A lapsed at-least-once lease past the cap: the effect may have run, so the record goes
        // to reconciliation instead of being taken over once more.
        Status::Processing if current.semantics == Semantics::AtLeastOnce => {
            let decision = needs_reconciliation(current, now);
            (decision, EventKind::Claim, ATTEMPTS_EXHAUSTED)
        }
        Status::Processing => (needs_reconciliation(current, now), EventKind::Claim, ""),
        // Already UNKNOWN: answered from the record as it is.
        Status::Unknown => return hit(ClaimOutcome::NeedsReconciliation),
        Status::Retry if current.attempts_exhausted() => (
            exhausted(current, now),
            EventKind::Claim,
            ATTEMPTS_EXHAUSTED,
        ),
        Status::Retry => (acquire(current, args, now), EventKind::Claim, ""),
        Status::Abandoned | Status::Purged => unreachable!("handled above"),
    };
    record_event(&mut decision, kind, &args.owner, reason, now);
    Ok(Claimed::Decided(decision))
}

/// Appends the Claim's receipt to the record it writes.
fn record_event(
    decision: &mut ClaimDecision,
    kind: EventKind,
    owner: &str,
    reason: &str,
    now: Millis,
) {
    let outcome = decision.outcome.name();
    if let Some(record) = decision.transition.record.as_mut() {
        record.push_event_because(now, kind, outcome, owner, reason);
    }
}

/// Rule 2: a new record for a key whose fencing sequence stands at `sequence` (0 for a new
/// key): PROCESSING with token `sequence + 1`, attempt 1 — or, when the Claim asks for approval
/// (or the key's earlier life did: `gated`), AWAITING_APPROVAL with no lease and no token
/// handed out (`fencing_token` stays at `sequence`, attempt 0), so that the acquisition after
/// the approval gets `sequence + 1`.
fn create(
    id: &RecordId,
    args: &ClaimArgs,
    sequence: u64,
    gated: bool,
    now: Millis,
) -> ClaimDecision {
    let awaiting = gated || args.require_approval;
    let (status, token, attempt, owner, lease) = if awaiting {
        (Status::AwaitingApproval, sequence, 0, "", None)
    } else {
        let lease_end = now.saturating_add(args.lease_ttl);
        let owner = args.owner.as_str();
        (Status::Processing, sequence + 1, 1, owner, Some(lease_end))
    };
    let record = with_expiry(Record {
        id: id.clone(),
        status,
        fingerprint: args.fingerprint,
        semantics: args.semantics,
        fencing_token: token,
        attempt,
        dedup_hits: 0,
        lease_owner: owner.to_owned(),
        lease_expires_at: lease,
        result: None,
        error: None,
        parent: args.parent.clone(),
        created_at: now,
        updated_at: now,
        expires_at: None,
        retention: args.retention,
        version: 1,
        history: Vec::new(),
        require_approval: awaiting,
        max_attempts: args.max_attempts,
        reconciliations: 0,
        approval: None,
        kept_until: None,
        budget: args.budget.clone().filter(Budget::limits),
    });
    let mut decision = ClaimDecision {
        outcome: if awaiting {
            ClaimOutcome::AwaitingApproval
        } else {
            ClaimOutcome::Acquired
        },
        transition: Transition {
            record: Some(record),
            change: Change::Insert,
        },
    };
    record_event(&mut decision, EventKind::Claim, &args.owner, "", now);
    decision
}

/// Rule 2 over an ABANDON tombstone: a new record for any arguments, whose token continues the
/// sequence and whose history continues the tombstone's. A gated key stays gated: the new
/// record awaits approval again whatever this Claim asked.
fn recreate(id: &RecordId, tombstone: &Record, args: &ClaimArgs, now: Millis) -> ClaimDecision {
    let mut decision = over_tombstone(id, tombstone, args, tombstone.require_approval, now);
    let record = decision.transition.record.as_mut().expect("created");
    // The audit trail continues across the abandonment.
    let created = std::mem::take(&mut record.history);
    record.history = tombstone.history.clone();
    for event in created {
        record.push_event_because(
            event.at,
            event.kind,
            &event.outcome,
            &event.owner,
            &event.reason,
        );
    }
    decision
}

/// Rule 2 over a Purge tombstone: a new record whose token continues the sequence; nothing else
/// of the purged record (history, approval gate) carries over.
fn recreate_after_purge(
    id: &RecordId,
    tombstone: &Record,
    args: &ClaimArgs,
    now: Millis,
) -> ClaimDecision {
    over_tombstone(id, tombstone, args, false, now)
}

/// A record created over `tombstone`: the fencing sequence continues, the write replaces it.
fn over_tombstone(
    id: &RecordId,
    tombstone: &Record,
    args: &ClaimArgs,
    gated: bool,
    now: Millis,
) -> ClaimDecision {
    let mut decision = create(id, args, tombstone.fencing_token, gated, now);
    let record = decision.transition.record.as_mut().expect("created");
    record.version = tombstone.version + 1;
    // A purged holder may still believe in its lease: the new life is kept as long as the
    // tombstone would have been (an ABANDON tombstone passes on what it was given).
    record.kept_until = match tombstone.status {
        Status::Purged => tombstone.expires_at,
        _ => tombstone.kept_until,
    };
    record.expires_at = super::expiry(record);
    decision.transition.change = Change::Replace {
        expected_version: tombstone.version,
        durable: true,
    };
    decision
}

/// Rules 7, 9 and the acquisition of an APPROVED record: token+1, attempt+1, new owner and
/// lease.
fn acquire(current: &Record, args: &ClaimArgs, now: Millis) -> ClaimDecision {
    let mut next = next_version(current, now);
    let lease_end = now.saturating_add(args.lease_ttl);
    next.status = Status::Processing;
    next.fencing_token = current.fencing_token + 1;
    next.attempt = current.attempt.saturating_add(1);
    next.lease_owner = args.owner.clone();
    next.lease_expires_at = Some(lease_end);
    next.result = None;
    next.error = None;
    ClaimDecision {
        outcome: ClaimOutcome::Acquired,
        transition: Transition::replace(current, with_expiry(next), true),
    }
}

/// Rule 8 with `reconcile`: acquired like any other acquisition, but counted as a
/// reconciliation, which the attempt cap never counts.
fn reconcile(current: &Record, args: &ClaimArgs, now: Millis) -> ClaimDecision {
    let mut decision = acquire(current, args, now);
    let next = decision.transition.record.as_mut().expect("acquired");
    next.reconciliations = current.reconciliations.saturating_add(1);
    decision
}

/// The attempt cap on a RETRY record: instead of acquiring it once more, the Claim settles it
/// FAILED {429, "attempts exhausted"} (replayed to later Claims); `attempt` stays at the cap.
fn exhausted(current: &Record, now: Millis) -> ClaimDecision {
    let mut next = next_version(current, now);
    next.status = Status::Failed;
    next.lease_expires_at = None;
    next.result = None;
    next.error = Some(OpError {
        code: EXHAUSTED_CODE,
        message: EXHAUSTED_MESSAGE.to_owned(),
        details: Vec::new(),
    });
    next.dedup_hits = current.dedup_hits.saturating_add(1);
    ClaimDecision {
        outcome: ClaimOutcome::Failed,
        transition: Transition::replace(current, with_expiry(next), true),
    }
}

/// Rule 6 on a record whose lease had to be shortened (`next`): IN_PROGRESS, and the shortened
/// lease written with the dedup hit.
fn in_progress(current: &Record, mut next: Record) -> ClaimDecision {
    next.dedup_hits = current.dedup_hits.saturating_add(1);
    ClaimDecision {
        outcome: ClaimOutcome::InProgress,
        transition: Transition::replace(current, next, true),
    }
}

/// Rules 4–6: answered from the record; only the dedup counter changes (no fsync needed for it).
fn dedup_hit(current: &Record, outcome: ClaimOutcome) -> ClaimDecision {
    let mut next = current.clone();
    next.version = current.version + 1;
    next.dedup_hits = current.dedup_hits.saturating_add(1);
    ClaimDecision {
        outcome,
        transition: Transition::replace(current, next, false),
    }
}

/// Rule 8 (and a lapsed at-least-once lease past the attempt cap): the outcome is unknown; the
/// status change itself is durable.
fn needs_reconciliation(current: &Record, now: Millis) -> ClaimDecision {
    let mut next = next_version(current, now);
    next.dedup_hits = current.dedup_hits.saturating_add(1);
    let durable = current.status != Status::Unknown;
    if durable {
        next.status = Status::Unknown;
        next = with_expiry(next);
    } else {
        next.updated_at = current.updated_at;
    }
    ClaimDecision {
        outcome: ClaimOutcome::NeedsReconciliation,
        transition: Transition::replace(current, next, durable),
    }
}
