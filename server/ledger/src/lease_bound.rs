//! A lease never has more than its length left (docs/api.md, "Leases and retention").
//!
//! A lease granted while the server's clock ran ahead (a clock stepped back after running days
//! fast, a replica whose clock is ahead of the others') ends that far in the future by the
//! corrected clock: without a bound it would stay valid for as long as the clock was off after
//! its holder is gone, and every Claim would answer IN_PROGRESS for days. So whoever reads a
//! lease treats it as ending at most its length from now (`lease_end`), and a Claim writes that
//! end (`bound_lease`), so that the lease then runs out and is taken over or reconciled like any
//! other.
//!
//! A lease's length is what it was granted or last renewed for: from the change that set it
//! (`updated_at`: while a record is PROCESSING only acquisitions and renewals change it) to its
//! end, at most `MAX_LEASE_TTL`. A lease no more than `CLOCK_TOLERANCE` beyond that is left as
//! it is: replicas whose clocks differ by milliseconds must not shorten each other's leases (or
//! write on every duplicate). Pure, like the rest of the ledger.

use super::{next_version, EventKind, Millis, Record, Status, Transition};

/// The longest lease a caller may ask for (1 h).
pub const MAX_LEASE_TTL: Millis = 3_600_000;

/// How far a lease may end beyond its length from now before it is shortened: more than the
/// clocks of NTP-synced replicas differ by.
pub const CLOCK_TOLERANCE: Millis = 1_000;

/// The `Event::reason` of a lease shortened because it ended further ahead than its length.
pub const LEASE_AHEAD_OF_CLOCK: &str = "LEASE_AHEAD_OF_CLOCK";

/// The length `record`'s current lease was granted (or last renewed) for.
fn length(record: &Record, end: Millis) -> Millis {
    end.saturating_sub(record.updated_at)
        .clamp(0, MAX_LEASE_TTL)
}

/// When `record`'s lease ends as seen at `now`: its stored end, or — when that is further ahead
/// than the lease's length plus `CLOCK_TOLERANCE` — its length from now. `None` without a lease.
pub fn lease_end(record: &Record, now: Millis) -> Option<Millis> {
    let end = record.lease_expires_at?;
    let length = length(record, end);
    match end.saturating_sub(now) > length.saturating_add(CLOCK_TOLERANCE) {
        true => Some(now.saturating_add(length)),
        false => Some(end),
    }
}

/// `current` with its lease shortened to `lease_end` at `now`, when it is a PROCESSING record
/// whose stored lease ends further ahead; `None` when nothing needs shortening. The change is
/// durable and leaves a receipt (a renewal by the server, outcome `SHORTENED`, reason
/// `LEASE_AHEAD_OF_CLOCK`).
pub(super) fn shortened(current: &Record, now: Millis) -> Option<Record> {
    if current.status != Status::Processing {
        return None;
    }
    let bounded = lease_end(current, now)?;
    if Some(bounded) == current.lease_expires_at {
        return None;
    }
    let mut next = next_version(current, now);
    next.lease_expires_at = Some(bounded);
    next.push_event_because(
        now,
        EventKind::Renew,
        "SHORTENED",
        &current.lease_owner,
        LEASE_AHEAD_OF_CLOCK,
    );
    Some(super::expiry::with_expiry(next))
}

/// The write that shortens `current`'s lease (see `shortened`), for a reader that answers
/// nothing from it (a Claim held by `wait`).
pub fn bound_lease(current: &Record, now: Millis) -> Option<Transition> {
    shortened(current, now).map(|next| Transition::replace(current, next, true))
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use super::*;

    const DAY: Millis = 86_400_000;
    const T0: Millis = 1_000 * DAY;
    const LEASE: Millis = 30_000;

    fn id() -> RecordId {
        RecordId::new("tenant", "ns", "k")
    }

    fn args(semantics: Semantics) -> ClaimArgs {
        ClaimArgs::for_test([1; 32], semantics, LEASE, DAY, "worker")
    }

    #[test]
    fn a_lease_granted_while_the_clock_ran_ahead_has_no_more_than_its_length_left() {
        for semantics in [Semantics::AtLeastOnce, Semantics::AtMostOnce] {
            // Granted while the clock was three days ahead; the clock is back at T0.
            let ahead = claim(&id(), None, &args(semantics), T0 + 3 * DAY)
                .unwrap()
                .record()
                .clone();
            assert_eq!(lease_end(&ahead, T0), Some(T0 + LEASE));
            let d = claim(&id(), Some(&ahead), &args(semantics), T0).unwrap();
            assert_eq!(d.outcome, ClaimOutcome::InProgress);
            assert!(matches!(
                d.transition.change,
                Change::Replace { durable: true, .. }
            ));
            let bounded = d.record().clone();
            assert_eq!(bounded.lease_expires_at, Some(T0 + LEASE));
            assert_eq!(bounded.dedup_hits, 1);
            assert_eq!(bounded.expires_at, expiry(&bounded));
            let reasons: Vec<_> = bounded.history.iter().map(|e| e.reason.as_str()).collect();
            assert!(reasons.contains(&LEASE_AHEAD_OF_CLOCK), "{reasons:?}");
            // Shortened once: the next Claim within the lease is an ordinary hit.
            let hit = claim(&id(), Some(&bounded), &args(semantics), T0 + 1).unwrap();
            assert!(hit.is_dedup_hit(), "{semantics:?}");
            // Its length later, the lease has run out like any other.
            let after = claim(&id(), Some(&bounded), &args(semantics), T0 + LEASE).unwrap();
            let expected = match semantics {
                Semantics::AtLeastOnce => ClaimOutcome::Acquired,
                Semantics::AtMostOnce => ClaimOutcome::NeedsReconciliation,
            };
            assert_eq!(after.outcome, expected);
            // The holder's token still settles it meanwhile.
            let done = complete(Some(&bounded), 1, &OpResult::default(), T0 + 2).unwrap();
            assert_eq!(done.record.unwrap().status, Status::Succeeded);
        }
    }

    #[test]
    fn a_lease_within_the_tolerance_or_its_length_is_left_as_it_is() {
        let a = args(Semantics::AtLeastOnce);
        // A replica's clock a little ahead: no write, no shortening.
        let slightly = claim(&id(), None, &a, T0 + CLOCK_TOLERANCE)
            .unwrap()
            .record()
            .clone();
        assert_eq!(lease_end(&slightly, T0), slightly.lease_expires_at);
        assert!(claim(&id(), Some(&slightly), &a, T0)
            .unwrap()
            .is_dedup_hit());
        assert!(bound_lease(&slightly, T0).is_none());
        // A lease renewed for an hour keeps its hour.
        let long = claim(&id(), None, &a, T0).unwrap().record().clone();
        let (_, renewed) = renew(Some(&long), 1, MAX_LEASE_TTL, T0 + 5).unwrap();
        let renewed = renewed.record.unwrap();
        assert_eq!(lease_end(&renewed, T0 + 6), Some(T0 + 5 + MAX_LEASE_TTL));
        assert!(bound_lease(&renewed, T0 + 6).is_none());
        // A renewal after the clock came back sets a sane end by itself.
        let ahead = claim(&id(), None, &a, T0 + DAY).unwrap().record().clone();
        let (lease, _) = renew(Some(&ahead), 1, LEASE, T0).unwrap();
        assert_eq!(lease.expires_at, T0 + LEASE);
    }
}
