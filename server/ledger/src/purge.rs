//! Purge: an operator removes a record and its history in any state.
//!
//! The record becomes a Purge tombstone (`Status::Purged`), never shown to callers, that keeps
//! only the key's fencing sequence: the next Claim creates a new record with a higher token, so
//! the purged record's holders get LEASE_LOST from then on (the tombstone itself refuses every
//! token). Nothing else carries over — neither history nor the approval gate. Purging an
//! unsettled at-most-once operation (PROCESSING or UNKNOWN) lets its effect run again, so it
//! needs `force`.

use super::expiry::with_expiry;
use super::{next_version, LedgerError, Transition};
use super::{Millis, Record, Semantics, Status};

/// Purge: the record of `current` becomes a Purge tombstone. NOT_FOUND without a live record
/// (tombstones included); UNSETTLED_AT_MOST_ONCE for an unsettled at-most-once operation unless
/// `force`.
pub fn purge(
    current: Option<&Record>,
    force: bool,
    now: Millis,
) -> Result<Transition, LedgerError> {
    let current = current
        .filter(|r| !r.is_expired(now) && !r.status.is_tombstone())
        .ok_or(LedgerError::NotFound)?;
    let unsettled = matches!(current.status, Status::Processing | Status::Unknown);
    if unsettled && current.semantics == Semantics::AtMostOnce && !force {
        return Err(LedgerError::UnsettledAtMostOnce);
    }
    let mut next = next_version(current, now);
    next.status = Status::Purged;
    // Kept: the fencing sequence, and the lease end the last holder may still act on (the
    // tombstone outlives it by the retention).
    next.lease_expires_at = current.lease_expires_at;
    next.attempt = 0;
    next.reconciliations = 0;
    next.dedup_hits = 0;
    next.lease_owner = String::new();
    next.result = None;
    next.error = None;
    next.parent = None;
    next.history = Vec::new();
    next.require_approval = false;
    next.max_attempts = 0;
    next.approval = None;
    next.created_at = now;
    Ok(Transition::replace(current, with_expiry(next), true))
}
