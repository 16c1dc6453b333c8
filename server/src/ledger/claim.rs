//! Claim (docs/api.md, "Claim transitions", rules 2–9): acquire, replay, report in-progress or
//! ask for reconciliation.

use super::expiry::with_expiry;
use super::{next_version, Change, LedgerError, Transition};
use super::{EventKind, Millis, ParentRef, Record, RecordId, Semantics, Status};

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
}

impl ClaimOutcome {
    /// Every outcome, in declaration order (`outcome as usize` indexes it).
    pub const ALL: [ClaimOutcome; 5] = [
        ClaimOutcome::Acquired,
        ClaimOutcome::Completed,
        ClaimOutcome::Failed,
        ClaimOutcome::InProgress,
        ClaimOutcome::NeedsReconciliation,
    ];

    /// The outcome's name in the documented API (`ACQUIRED`, `IN_PROGRESS`, …).
    pub fn name(self) -> &'static str {
        match self {
            ClaimOutcome::Acquired => "ACQUIRED",
            ClaimOutcome::Completed => "COMPLETED",
            ClaimOutcome::Failed => "FAILED",
            ClaimOutcome::InProgress => "IN_PROGRESS",
            ClaimOutcome::NeedsReconciliation => "NEEDS_RECONCILIATION",
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

/// Decides a Claim of `id` at `now` given the stored record (`None` when absent).
pub fn claim(
    id: &RecordId,
    current: Option<&Record>,
    args: &ClaimArgs,
    now: Millis,
) -> Result<ClaimDecision, LedgerError> {
    let Some(current) = current.filter(|r| !r.is_expired(now)) else {
        return Ok(create(id, args, now));
    };
    if current.status == Status::Abandoned {
        return Ok(recreate(id, current, args, now));
    }
    if current.fingerprint != args.fingerprint {
        return Err(LedgerError::KeyReused);
    }
    let (mut decision, kind) = match current.status {
        Status::Succeeded => (
            dedup_hit(current, ClaimOutcome::Completed),
            EventKind::Claim,
        ),
        Status::Failed => (dedup_hit(current, ClaimOutcome::Failed), EventKind::Claim),
        Status::Processing if !current.lease_expired(now) => (
            dedup_hit(current, ClaimOutcome::InProgress),
            EventKind::Claim,
        ),
        Status::Processing if current.semantics == Semantics::AtLeastOnce => {
            (acquire(current, args, now), EventKind::Takeover)
        }
        Status::Processing | Status::Unknown if args.reconcile => {
            (acquire(current, args, now), EventKind::Claim)
        }
        Status::Processing | Status::Unknown => {
            (needs_reconciliation(current, now), EventKind::Claim)
        }
        Status::Retry => (acquire(current, args, now), EventKind::Claim),
        Status::Abandoned => unreachable!("handled above"),
    };
    record_event(&mut decision, kind, &args.owner, now);
    Ok(decision)
}

/// Appends the Claim's receipt to the record it writes.
fn record_event(decision: &mut ClaimDecision, kind: EventKind, owner: &str, now: Millis) {
    let outcome = match decision.outcome {
        ClaimOutcome::Acquired => "ACQUIRED",
        ClaimOutcome::Completed => "COMPLETED",
        ClaimOutcome::Failed => "FAILED",
        ClaimOutcome::InProgress => "IN_PROGRESS",
        ClaimOutcome::NeedsReconciliation => "NEEDS_RECONCILIATION",
    };
    if let Some(record) = decision.transition.record.as_mut() {
        record.push_event(now, kind, outcome, owner);
    }
}

/// Rule 2: a new record, PROCESSING, token 1, attempt 1.
fn create(id: &RecordId, args: &ClaimArgs, now: Millis) -> ClaimDecision {
    let lease_end = now.saturating_add(args.lease_ttl);
    let record = with_expiry(Record {
        id: id.clone(),
        status: Status::Processing,
        fingerprint: args.fingerprint,
        semantics: args.semantics,
        fencing_token: 1,
        attempt: 1,
        dedup_hits: 0,
        lease_owner: args.owner.clone(),
        lease_expires_at: Some(lease_end),
        result: None,
        error: None,
        parent: args.parent.clone(),
        created_at: now,
        updated_at: now,
        expires_at: None,
        retention: args.retention,
        version: 1,
        history: Vec::new(),
    });
    let mut decision = ClaimDecision {
        outcome: ClaimOutcome::Acquired,
        transition: Transition {
            record: Some(record),
            change: Change::Insert,
        },
    };
    record_event(&mut decision, EventKind::Claim, &args.owner, now);
    decision
}

/// Rule 2 over a tombstone: a new record for any arguments, whose token continues the sequence.
fn recreate(id: &RecordId, tombstone: &Record, args: &ClaimArgs, now: Millis) -> ClaimDecision {
    let mut decision = create(id, args, now);
    let record = decision.transition.record.as_mut().expect("created");
    record.fencing_token = tombstone.fencing_token + 1;
    record.version = tombstone.version + 1;
    // The audit trail continues across the abandonment.
    let created = std::mem::take(&mut record.history);
    record.history = tombstone.history.clone();
    for event in created {
        record.push_event(event.at, event.kind, &event.outcome, &event.owner);
    }
    decision.transition.change = Change::Replace {
        expected_version: tombstone.version,
        durable: true,
    };
    decision
}

/// Rules 7, 8 (reconcile) and 9: token+1, attempt+1, new owner and lease.
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

/// Rule 8: the at-most-once outcome is unknown; the status change itself is durable.
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
