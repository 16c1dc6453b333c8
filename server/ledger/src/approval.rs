//! The approval gate: Approve and Reject of a record a Claim created AWAITING_APPROVAL.
//!
//! Approve makes it APPROVED (the next Claim acquires it); Reject settles it FAILED with error
//! `{403, note}`, replayed to every later Claim. Both record who decided and why (`Approval`) and
//! leave a receipt. The same decision sent again while the record still stands as decided is OK
//! (a lost answer is safe to retry); any other decision, or one on a record that has moved on or
//! never awaited approval, is NOT_AWAITING_APPROVAL; a key without a live record is NOT_FOUND.

use super::expiry::with_expiry;
use super::{next_version, LedgerError, Transition};
use super::{Approval, Decision, EventKind, Millis, OpError, Record, Status};

/// The error code of a rejected operation.
pub const REJECTED_CODE: i32 = 403;

/// Approve: AWAITING_APPROVAL → APPROVED. `fingerprint`, when given, pins the decision to the
/// arguments the approver saw (another stored fingerprint is KEY_REUSED).
pub fn approve(
    current: Option<&Record>,
    fingerprint: Option<&[u8; 32]>,
    decided_by: &str,
    note: &str,
    now: Millis,
) -> Result<Transition, LedgerError> {
    decide(
        current,
        fingerprint,
        Decision::Approved,
        decided_by,
        note,
        now,
    )
}

/// Reject: AWAITING_APPROVAL → FAILED with error `{403, note}`.
pub fn reject(
    current: Option<&Record>,
    fingerprint: Option<&[u8; 32]>,
    decided_by: &str,
    note: &str,
    now: Millis,
) -> Result<Transition, LedgerError> {
    decide(
        current,
        fingerprint,
        Decision::Rejected,
        decided_by,
        note,
        now,
    )
}

fn decide(
    current: Option<&Record>,
    fingerprint: Option<&[u8; 32]>,
    decision: Decision,
    decided_by: &str,
    note: &str,
    now: Millis,
) -> Result<Transition, LedgerError> {
    let current = current
        .filter(|r| !r.is_expired(now) && !r.status.is_tombstone())
        .ok_or(LedgerError::NotFound)?;
    if fingerprint.is_some_and(|fp| *fp != current.fingerprint) {
        return Err(LedgerError::KeyReused);
    }
    if current.status != Status::AwaitingApproval {
        return if stands_as_decided(current, decision) {
            Ok(Transition::keep(current))
        } else {
            Err(LedgerError::NotAwaitingApproval)
        };
    }
    let mut next = next_version(current, now);
    next.approval = Some(Approval {
        decision,
        decided_by: decided_by.to_owned(),
        note: note.to_owned(),
        decided_at: now,
    });
    let (kind, outcome) = match decision {
        Decision::Approved => {
            next.status = Status::Approved;
            (EventKind::Approve, "APPROVED")
        }
        Decision::Rejected => {
            next.status = Status::Failed;
            next.error = Some(OpError {
                code: REJECTED_CODE,
                message: note.to_owned(),
                details: Vec::new(),
            });
            (EventKind::Reject, "REJECTED")
        }
    };
    next.push_event(now, kind, outcome, decided_by);
    Ok(Transition::replace(current, with_expiry(next), true))
}

/// Whether `record` still stands as `decision` left it: APPROVED (not yet acquired), or FAILED
/// by that rejection (a rejected record is never acquired, so a FAILED one with a rejection is
/// the rejection's).
fn stands_as_decided(record: &Record, decision: Decision) -> bool {
    let decided = record.approval.as_ref().map(|a| a.decision);
    match decision {
        Decision::Approved => record.status == Status::Approved && decided == Some(decision),
        Decision::Rejected => record.status == Status::Failed && decided == Some(decision),
    }
}
