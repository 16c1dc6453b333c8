//! Complete, Fail and Renew: changes only the current fencing token may make (docs/api.md,
//! "Settling").

use super::expiry::with_expiry;
use super::{next_version, LedgerError, Transition};
use super::{EventKind, Lease, Millis, OpError, OpResult, Record, Status};

/// How a Fail settles the operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Disposition {
    /// Released: the next Claim acquires.
    Retryable,
    /// Failed for good: replayed to later Claims.
    Final,
    /// Deleted: the key may be claimed again, even with another payload.
    Abandon,
}

/// The live record whose current token is `token`, or LEASE_LOST. A record none of whose life's
/// acquisitions happened yet (awaiting approval, approved, rejected: attempt 0) holds the token
/// of the key's earlier life, which no holder may use on it; nor may any token act on a Purge
/// tombstone.
fn held(current: Option<&Record>, token: u64, now: Millis) -> Result<&Record, LedgerError> {
    match current.filter(|r| !r.is_expired(now)) {
        Some(record)
            if record.fencing_token == token
                && record.attempt > 0
                && record.status != Status::Purged =>
        {
            Ok(record)
        }
        _ => Err(LedgerError::LeaseLost),
    }
}

/// Whether the holder may still settle: PROCESSING, or UNKNOWN not yet taken for reconciliation
/// (a lease that ran out but was not taken over stays valid for its holder).
fn open(record: &Record) -> bool {
    matches!(record.status, Status::Processing | Status::Unknown)
}

/// `current` settled at `now`: lease cleared, kept for its retention from now.
fn settled(current: &Record, status: Status, now: Millis) -> Record {
    let mut next = next_version(current, now);
    next.status = status;
    next.lease_expires_at = None;
    with_expiry(next)
}

/// Complete: SUCCEEDED with `result`; the identical Complete again is OK.
pub fn complete(
    current: Option<&Record>,
    token: u64,
    result: &OpResult,
    now: Millis,
) -> Result<Transition, LedgerError> {
    let current = held(current, token, now)?;
    if open(current) {
        let mut next = settled(current, Status::Succeeded, now);
        next.result = Some(result.clone());
        next.error = None;
        next.push_event(now, EventKind::Complete, "SUCCEEDED", &current.lease_owner);
        return Ok(Transition::replace(current, next, true));
    }
    if current.status == Status::Succeeded && current.result.as_ref() == Some(result) {
        return Ok(Transition::keep(current));
    }
    Err(LedgerError::AlreadySettled)
}

/// Fail: RETRY, FAILED or abandoned (a tombstone the caller never sees); the identical Fail again
/// is OK (for ABANDON: on its tombstone). Like every settlement it needs the current token of a
/// live record: ABANDON of a key the caller does not hold (absent, expired, never claimed) is
/// LEASE_LOST.
pub fn fail(
    current: Option<&Record>,
    token: u64,
    error: &OpError,
    disposition: Disposition,
    now: Millis,
) -> Result<Transition, LedgerError> {
    fail_as(current, token, error, disposition, false, now)
}

/// `fail` by a holder that says it ran nothing under its lease (`FailRequest.nothing_ran`):
/// the same settlement, but the acquisition is not counted against the attempt cap (it joins
/// the acquisitions the cap leaves out, `Record::reconciliations`), and the receipt says why
/// (`NOTHING_RAN`). A repeat of it, like any identical Fail, changes nothing.
pub fn fail_nothing_ran(
    current: Option<&Record>,
    token: u64,
    error: &OpError,
    disposition: Disposition,
    now: Millis,
) -> Result<Transition, LedgerError> {
    fail_as(current, token, error, disposition, true, now)
}

/// The `Event::reason` of a Fail whose holder ran nothing.
pub const NOTHING_RAN: &str = "NOTHING_RAN";

fn fail_as(
    current: Option<&Record>,
    token: u64,
    error: &OpError,
    disposition: Disposition,
    nothing_ran: bool,
    now: Millis,
) -> Result<Transition, LedgerError> {
    let current = held(current, token, now)?;
    if open(current) {
        let status = match disposition {
            Disposition::Retryable => Status::Retry,
            Disposition::Final => Status::Failed,
            Disposition::Abandon => Status::Abandoned,
        };
        let mut next = settled(current, status, now);
        next.error = (status != Status::Abandoned).then(|| error.clone());
        let outcome = match disposition {
            Disposition::Retryable => "RETRYABLE",
            Disposition::Final => "FINAL",
            Disposition::Abandon => "ABANDON",
        };
        let reason = if nothing_ran {
            // Not counted against the cap: a reconciliation is not either (`attempts_exhausted`).
            next.reconciliations = next.reconciliations.saturating_add(1).min(next.attempt);
            NOTHING_RAN
        } else {
            ""
        };
        next.push_event_because(now, EventKind::Fail, outcome, &current.lease_owner, reason);
        next.result = None;
        return Ok(Transition::replace(current, next, true));
    }
    let same_status = matches!(
        (current.status, disposition),
        (Status::Retry, Disposition::Retryable) | (Status::Failed, Disposition::Final)
    );
    if (same_status && current.error.as_ref() == Some(error))
        || (current.status == Status::Abandoned && disposition == Disposition::Abandon)
    {
        return Ok(Transition::keep(current));
    }
    Err(LedgerError::AlreadySettled)
}

/// Renew: the lease runs until `now + lease_ttl`. Returns the new lease and the transition.
pub fn renew(
    current: Option<&Record>,
    token: u64,
    lease_ttl: Millis,
    now: Millis,
) -> Result<(Lease, Transition), LedgerError> {
    let current = held(current, token, now)?;
    match current.status {
        Status::Processing => {
            let mut next = next_version(current, now);
            let lease_end = now.saturating_add(lease_ttl);
            next.lease_expires_at = Some(lease_end);
            next.push_event(now, EventKind::Renew, "RENEWED", &current.lease_owner);
            let next = with_expiry(next);
            Ok((next.lease(), Transition::replace(current, next, true)))
        }
        // The lease ran out and the record awaits reconciliation: renewing cannot bring it back.
        // (`held` never yields a record without a holder: awaiting approval, approved, purged.)
        Status::Unknown | Status::AwaitingApproval | Status::Approved | Status::Purged => {
            Err(LedgerError::LeaseLost)
        }
        Status::Succeeded | Status::Failed | Status::Retry | Status::Abandoned => {
            Err(LedgerError::AlreadySettled)
        }
    }
}
