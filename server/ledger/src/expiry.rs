//! When a record expires: expiry by state, the one definition every store follows.
//!
//! - A settled record (SUCCEEDED, FAILED, RETRY) expires `retention` after it settled.
//! - An unsettled AT_LEAST_ONCE record expires `retention` after its lease ends (and never before
//!   `created_at + retention`), recomputed at every acquisition and renewal: a lapsed holder's
//!   fencing token is never handed out again within `retention` of its lease end.
//! - An unsettled AT_MOST_ONCE record (PROCESSING or UNKNOWN) never expires: a holder that died
//!   mid-effect must be reconciled, never forgotten, or the next Claim would run the effect again.
//! - A record awaiting approval, or approved and not yet acquired, expires `retention` after it
//!   was created: the decision must come within it — unless its key was acquired before (its
//!   fencing token is above 0: gated again after an ABANDON, or asking for approval after a
//!   Purge): then it is kept until decided (or purged), so that a gated key stays gated.
//! - An ABANDON tombstone of a gated key (`require_approval`) never expires: it is what keeps the
//!   key gated ("only Purge clears the gate"); other ABANDON tombstones expire `retention` after
//!   the abandon.
//! - A Purge tombstone is kept `retention` after the later of the purge and the lease end its last
//!   holder may still believe in, so that the purged key's fencing sequence outlives every lease
//!   handed out before it.
//! - A record created over a Purge tombstone is kept at least as long as that tombstone would have
//!   been (`kept_until`), in every state but unsettled AT_MOST_ONCE (kept anyway): otherwise it
//!   could settle and expire while the purged holder still believes in its lease, and the key's
//!   next life would hand that holder's token out again.
//!
//! Pure: the transitions call `expiry` on the record they write; stores only compare the result
//! with their clock (or turn it into a row TTL) and never decide it themselves.

use super::{Millis, Record, Semantics, Status};

/// When `record` expires, `None` for never (until a later transition settles it).
///
/// Evaluated by every transition that changes a record's status or lease, on the record it
/// writes: `updated_at` is then the time of that change (for a settled record, when it settled).
/// Writes that only count a dedup hit keep `updated_at`, the lease and the status, so the answer
/// stays the same: `record.expires_at == expiry(&record)` holds for every record the ledger makes.
///
/// A new status gets its arm here and nowhere else.
pub fn expiry(record: &Record) -> Option<Millis> {
    let by_state = expiry_by_state(record)?;
    Some(
        record
            .kept_until
            .map_or(by_state, |floor| by_state.max(floor)),
    )
}

/// `expiry` before `kept_until`.
fn expiry_by_state(record: &Record) -> Option<Millis> {
    let kept_after = |from: Millis| Some(from.saturating_add(record.retention));
    match (record.status, record.semantics) {
        // Gated again after the key's earlier life: expiring would let the next Claim past the
        // gate.
        (Status::AwaitingApproval | Status::Approved, _) if record.fencing_token > 0 => None,
        (Status::AwaitingApproval | Status::Approved, _) => kept_after(record.created_at),
        (Status::Abandoned, _) if record.require_approval => None,
        (Status::Purged, _) => {
            let lease_end = record.lease_expires_at.unwrap_or(record.updated_at);
            kept_after(lease_end.max(record.updated_at))
        }
        (Status::Succeeded | Status::Failed | Status::Retry | Status::Abandoned, _) => {
            kept_after(record.updated_at)
        }
        (Status::Processing | Status::Unknown, Semantics::AtMostOnce) => None,
        (Status::Processing | Status::Unknown, Semantics::AtLeastOnce) => {
            let lease_end = record.lease_expires_at.unwrap_or(record.created_at);
            kept_after(lease_end.max(record.created_at))
        }
    }
}

/// `record` with `expires_at` set by `expiry`.
pub(super) fn with_expiry(mut record: Record) -> Record {
    record.expires_at = expiry(&record);
    record
}

#[cfg(test)]
mod tests {
    //! One test per expiry rule, through the transitions that apply it.

    use super::super::*;

    const T0: Millis = 1_000_000;
    const LEASE: Millis = 30_000;
    const RETENTION: Millis = 60_000;

    fn id() -> RecordId {
        RecordId::new("tenant", "payments.charge", "order-1")
    }

    fn args(semantics: Semantics) -> ClaimArgs {
        ClaimArgs::for_test([1; 32], semantics, LEASE, RETENTION, "worker-1")
    }

    fn claimed(semantics: Semantics, now: Millis) -> Record {
        claim(&id(), None, &args(semantics), now)
            .unwrap()
            .record()
            .clone()
    }

    fn written(t: Transition) -> Record {
        t.record.expect("a record")
    }

    fn error() -> OpError {
        OpError {
            code: 500,
            message: "e".into(),
            details: vec![],
        }
    }

    /// Renews `record` (token `token`) every `LEASE / 2` from `from` until its lease runs past
    /// `until`; returns the renewed record.
    fn renewed_until(mut record: Record, token: u64, from: Millis, until: Millis) -> Record {
        let mut now = from;
        while record.lease_expires_at.unwrap() < until {
            record = written(renew(Some(&record), token, LEASE, now).unwrap().1);
            now += LEASE / 2;
        }
        record
    }

    #[test]
    fn settled_records_expire_retention_after_they_settled() {
        for semantics in [Semantics::AtLeastOnce, Semantics::AtMostOnce] {
            // Settled long after the original retention, by a holder that kept renewing.
            let held = renewed_until(claimed(semantics, T0), 1, T0, T0 + 5 * RETENTION);
            let at = T0 + 4 * RETENTION;
            let done = written(complete(Some(&held), 1, &OpResult::default(), at).unwrap());
            assert_eq!(done.expires_at, Some(at + RETENTION), "{semantics:?}");
            for (disposition, status) in [
                (Disposition::Final, Status::Failed),
                (Disposition::Retryable, Status::Retry),
            ] {
                let failed = written(fail(Some(&held), 1, &error(), disposition, at).unwrap());
                assert_eq!(failed.status, status);
                assert_eq!(failed.expires_at, Some(at + RETENTION), "{status:?}");
            }
            assert!(done.is_expired(at + RETENTION) && !done.is_expired(at + RETENTION - 1));
        }
    }

    #[test]
    fn abandon_tombstone_is_kept_retention_after_the_abandon() {
        let rec = claimed(Semantics::AtMostOnce, T0);
        let at = T0 + 10 * RETENTION;
        let tombstone = written(fail(Some(&rec), 1, &error(), Disposition::Abandon, at).unwrap());
        assert_eq!(tombstone.status, Status::Abandoned);
        assert_eq!(tombstone.expires_at, Some(at + RETENTION));
        // Within it, the fencing sequence continues; after it, the key starts over.
        let again = claim(
            &id(),
            Some(&tombstone),
            &args(Semantics::AtLeastOnce),
            at + 1,
        );
        assert_eq!(again.unwrap().record().fencing_token, 2);
        let later = claim(
            &id(),
            Some(&tombstone),
            &args(Semantics::AtLeastOnce),
            at + RETENTION,
        );
        assert_eq!(later.unwrap().transition.change, Change::Insert);
    }

    #[test]
    fn a_gated_key_stays_gated_however_long_after_its_abandon() {
        let gated = ClaimArgs {
            require_approval: true,
            ..args(Semantics::AtLeastOnce)
        };
        let awaiting = claim(&id(), None, &gated, T0).unwrap().record().clone();
        assert_eq!(
            awaiting.expires_at,
            Some(T0 + RETENTION),
            "a first gate expires"
        );
        let approved = written(approve(Some(&awaiting), None, "ops", "", T0 + 1).unwrap());
        let plain = args(Semantics::AtLeastOnce);
        let held = claim(&id(), Some(&approved), &plain, T0 + 2)
            .unwrap()
            .record()
            .clone();
        let at = T0 + 3;
        let tombstone = written(fail(Some(&held), 1, &error(), Disposition::Abandon, at).unwrap());
        assert_eq!(
            (tombstone.status, tombstone.expires_at),
            (Status::Abandoned, None)
        );
        // Long after retention, a Claim that does not ask for approval still awaits it; and so
        // does every Claim after that, however long the decision takes.
        let long_after = at + 100 * RETENTION;
        assert!(!tombstone.is_expired(long_after));
        let again = claim(&id(), Some(&tombstone), &plain, long_after).unwrap();
        assert_eq!(again.outcome, ClaimOutcome::AwaitingApproval);
        let regated = again.record().clone();
        assert_eq!((regated.fencing_token, regated.expires_at), (1, None));
        let approved = written(approve(Some(&regated), None, "ops", "", long_after).unwrap());
        assert_eq!(approved.expires_at, None);
        let later = long_after + 100 * RETENTION;
        for record in [&regated, &approved] {
            assert!(!record.is_expired(later));
        }
        let still = claim(&id(), Some(&regated), &plain, later).unwrap();
        assert_eq!(still.outcome, ClaimOutcome::AwaitingApproval);
        // Decided, it expires as usual; a Reject is replayed for retention, then the key is new.
        let rejected = written(reject(Some(&regated), None, "ops", "no", later).unwrap());
        assert_eq!(rejected.expires_at, Some(later + RETENTION));
        // An ungated key's ABANDON tombstone still expires retention after the abandon.
        let ungated = claim(&id(), None, &plain, T0).unwrap().record().clone();
        let gone = written(fail(Some(&ungated), 1, &error(), Disposition::Abandon, at).unwrap());
        assert_eq!(gone.expires_at, Some(at + RETENTION));
    }

    #[test]
    fn at_least_once_unsettled_expires_retention_after_its_lease_end() {
        let rec = claimed(Semantics::AtLeastOnce, T0);
        assert_eq!(rec.expires_at, Some(T0 + LEASE + RETENTION));
        // Expiry never comes before created_at + retention, whatever the lease end says.
        let mut odd = rec.clone();
        odd.lease_expires_at = None;
        assert_eq!(expiry(&odd), Some(T0 + RETENTION));
    }

    #[test]
    fn at_least_once_expiry_is_recomputed_at_every_acquisition_and_renewal() {
        // A holder renewing past the original retention keeps the record alive.
        let held = renewed_until(
            claimed(Semantics::AtLeastOnce, T0),
            1,
            T0,
            T0 + 3 * RETENTION,
        );
        let lease_end = held.lease_expires_at.unwrap();
        assert_eq!(held.expires_at, Some(lease_end + RETENTION));
        // Lapsed: taken over, not forgotten, anywhere within retention after the lease end.
        for at in [lease_end, lease_end + RETENTION - 1] {
            let d = claim(&id(), Some(&held), &args(Semantics::AtLeastOnce), at).unwrap();
            assert_eq!(d.outcome, ClaimOutcome::Acquired);
            let taken = d.record();
            assert_eq!((taken.fencing_token, taken.attempt), (2, 2), "at {at}");
            assert_eq!(taken.expires_at, Some(at + LEASE + RETENTION));
        }
        // A RETRY record acquired again: its expiry follows the new lease.
        let retry = written(fail(Some(&held), 1, &error(), Disposition::Retryable, T0).unwrap());
        let again = claim(&id(), Some(&retry), &args(Semantics::AtLeastOnce), T0 + 1).unwrap();
        assert_eq!(again.record().expires_at, Some(T0 + 1 + LEASE + RETENTION));
    }

    #[test]
    fn at_least_once_lapsed_token_is_never_handed_out_again_within_retention() {
        let held = renewed_until(
            claimed(Semantics::AtLeastOnce, T0),
            1,
            T0,
            T0 + 3 * RETENTION,
        );
        let lease_end = held.lease_expires_at.unwrap();
        // The lapsed holder may still complete until someone takes over, even late.
        let late = complete(
            Some(&held),
            1,
            &OpResult::default(),
            lease_end + RETENTION - 1,
        );
        assert_eq!(written(late.unwrap()).status, Status::Succeeded);
        // Only once retention after its lease end has passed is the key a new operation.
        assert!(!held.is_expired(lease_end + RETENTION - 1));
        let fresh = claim(
            &id(),
            Some(&held),
            &args(Semantics::AtLeastOnce),
            lease_end + RETENTION,
        );
        assert_eq!(fresh.unwrap().transition.change, Change::Insert);
    }

    #[test]
    fn at_most_once_processing_never_expires_before_it_settles() {
        let rec = claimed(Semantics::AtMostOnce, T0);
        assert_eq!(rec.expires_at, None);
        let renewed = written(renew(Some(&rec), 1, LEASE, T0 + 1).unwrap().1);
        assert_eq!(renewed.expires_at, None, "a renewal keeps no expiry");
        let long_after = T0 + 1_000 * RETENTION;
        assert!(!rec.is_expired(long_after));
        let d = claim(&id(), Some(&rec), &args(Semantics::AtMostOnce), long_after).unwrap();
        assert_eq!(d.outcome, ClaimOutcome::NeedsReconciliation);
        let unknown = d.record().clone();
        assert_eq!(
            (unknown.status, unknown.expires_at),
            (Status::Unknown, None)
        );
        // Still there, still asking for reconciliation, even longer after.
        let again = claim(
            &id(),
            Some(&unknown),
            &args(Semantics::AtMostOnce),
            long_after * 2,
        )
        .unwrap();
        assert_eq!(again.outcome, ClaimOutcome::NeedsReconciliation);
        assert_eq!(again.record().fencing_token, 1);
    }

    #[test]
    fn at_most_once_record_expires_once_a_reconciler_settles_it() {
        let rec = claimed(Semantics::AtMostOnce, T0);
        let at = T0 + 100 * RETENTION;
        let reconciler = ClaimArgs {
            reconcile: true,
            ..args(Semantics::AtMostOnce)
        };
        let d = claim(&id(), Some(&rec), &reconciler, at).unwrap();
        assert_eq!(d.outcome, ClaimOutcome::Acquired);
        let reconciling = d.record().clone();
        assert_eq!(
            (reconciling.fencing_token, reconciling.expires_at),
            (2, None)
        );
        let done = complete(Some(&reconciling), 2, &OpResult::default(), at + 5).unwrap();
        assert_eq!(written(done).expires_at, Some(at + 5 + RETENTION));
        let failed = fail(Some(&reconciling), 2, &error(), Disposition::Final, at + 5).unwrap();
        assert_eq!(written(failed).expires_at, Some(at + 5 + RETENTION));
    }

    #[test]
    fn every_transition_leaves_expires_at_equal_to_the_rule() {
        for semantics in [Semantics::AtLeastOnce, Semantics::AtMostOnce] {
            let mut now = T0;
            let mut rec = claimed(semantics, now);
            let mut seen = vec![rec.clone()];
            let mut token = 1;
            for step in 0..12 {
                now += LEASE / 2 + 7;
                let next = match step % 6 {
                    0 | 3 => claim(&id(), Some(&rec), &args(semantics), now).map(|d| d.transition),
                    1 => renew(Some(&rec), token, LEASE, now).map(|(_, t)| t),
                    2 => {
                        now += 2 * LEASE;
                        let reconciler = ClaimArgs {
                            reconcile: true,
                            ..args(semantics)
                        };
                        claim(&id(), Some(&rec), &reconciler, now).map(|d| d.transition)
                    }
                    4 => fail(Some(&rec), token, &error(), Disposition::Retryable, now),
                    _ => complete(Some(&rec), token, &OpResult::default(), now),
                };
                if let Ok(Transition {
                    record: Some(next), ..
                }) = next
                {
                    token = next.fencing_token;
                    seen.push(next.clone());
                    rec = next;
                }
            }
            assert!(seen.len() > 8, "{semantics:?}: the walk got stuck");
            for r in &seen {
                assert_eq!(r.expires_at, expiry(r), "{:?} {:?}", r.status, semantics);
            }
        }
    }
}
