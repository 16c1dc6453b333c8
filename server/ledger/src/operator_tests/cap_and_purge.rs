//! The operator rules of the attempt cap and of Purge, one test per rule.

use super::*;

#[test]
fn attempt_cap_fails_a_retry_record_past_the_cap_with_429() {
    let (_, mut rec) = claimed(&capped(2), None, T0);
    let mut now = T0;
    for token in 1..=2 {
        now += 10;
        rec = after(
            &fail(
                Some(&rec),
                token,
                &error("timeout"),
                Disposition::Retryable,
                now,
            )
            .unwrap(),
        );
        if token < 2 {
            let (outcome, next) = claimed(&capped(2), Some(&rec), now + 1);
            assert_eq!(outcome, ClaimOutcome::Acquired);
            rec = next;
        }
    }
    assert_eq!((rec.status, rec.attempt), (Status::Retry, 2));
    let d = claim(&id(), Some(&rec), &capped(2), now + 5).unwrap();
    assert_eq!(d.outcome, ClaimOutcome::Failed);
    assert!(matches!(
        d.transition.change,
        Change::Replace { durable: true, .. }
    ));
    let failed = d.record();
    assert_eq!(failed.status, Status::Failed);
    assert_eq!(failed.attempt, 2, "attempt stays at the cap");
    assert_eq!(failed.fencing_token, 2);
    assert_eq!(
        failed.error,
        Some(OpError {
            code: EXHAUSTED_CODE,
            message: EXHAUSTED_MESSAGE.into(),
            details: vec![]
        })
    );
    assert_eq!(failed.expires_at, Some(now + 5 + RETENTION));
    let receipt = last(failed);
    assert_eq!(
        (
            receipt.kind,
            receipt.outcome.as_str(),
            receipt.reason.as_str()
        ),
        (EventKind::Claim, "FAILED", ATTEMPTS_EXHAUSTED),
        "the receipt says why"
    );
    assert!(!receipt.is_routine());
    // Replayed from then on, like any final failure.
    let later = claim(&id(), Some(failed), &capped(2), now + 6).unwrap();
    assert_eq!(later.outcome, ClaimOutcome::Failed);
    assert_eq!(later.record().error.as_ref().unwrap().code, 429);
}

#[test]
fn attempt_cap_zero_never_stops_retries() {
    let (_, mut rec) = claimed(&capped(0), None, T0);
    for token in 1..=20 {
        rec = after(
            &fail(
                Some(&rec),
                token,
                &error("e"),
                Disposition::Retryable,
                T0 + 1,
            )
            .unwrap(),
        );
        let (outcome, next) = claimed(&capped(0), Some(&rec), T0 + 2);
        assert_eq!(outcome, ClaimOutcome::Acquired);
        rec = next;
    }
    assert_eq!(rec.attempt, 21);
}

#[test]
fn attempt_cap_sends_a_lapsed_at_least_once_lease_to_reconciliation() {
    let (_, rec) = claimed(&capped(1), None, T0);
    let lapsed = T0 + LEASE;
    let d = claim(&id(), Some(&rec), &capped(1), lapsed).unwrap();
    assert_eq!(d.outcome, ClaimOutcome::NeedsReconciliation);
    let unknown = d.record().clone();
    assert_eq!(
        (unknown.status, unknown.fencing_token, unknown.attempt),
        (Status::Unknown, 1, 1)
    );
    assert_eq!(
        last(&unknown).reason,
        ATTEMPTS_EXHAUSTED,
        "the receipt says why"
    );
    assert!(
        unknown.expires_at.is_some(),
        "an at-least-once record keeps its expiry by state"
    );
    // Until someone takes it over, the lapsed holder's Complete is still accepted.
    let late = complete(Some(&unknown), 1, &OpResult::default(), lapsed + 1);
    assert_eq!(after(&late.unwrap()).status, Status::Succeeded);
    // Later Claims keep asking for reconciliation; a reconciler acquires it.
    let again = claim(&id(), Some(&unknown), &capped(1), lapsed + 2).unwrap();
    assert_eq!(again.outcome, ClaimOutcome::NeedsReconciliation);
    let reconciler = ClaimArgs {
        reconcile: true,
        ..capped(1)
    };
    let (outcome, reconciling) = claimed(&reconciler, Some(&unknown), lapsed + 3);
    assert_eq!(outcome, ClaimOutcome::Acquired);
    assert_eq!(reconciling.fencing_token, 2);
    // A reconciler may also take the lapsed PROCESSING record directly.
    let (outcome, direct) = claimed(&reconciler, Some(&rec), lapsed);
    assert_eq!((outcome, direct.fencing_token), (ClaimOutcome::Acquired, 2));
    // Below the cap, a lapsed lease is taken over as before.
    let (outcome, taken) = claimed(&capped(2), Some(&claimed(&capped(2), None, T0).1), lapsed);
    assert_eq!((outcome, taken.attempt), (ClaimOutcome::Acquired, 2));
}

#[test]
fn attempt_cap_never_counts_reconciliations() {
    // At most once, cap 2: the first holder vanishes, a reconciler finds nothing happened.
    let amo = ClaimArgs {
        semantics: Semantics::AtMostOnce,
        ..capped(2)
    };
    let (_, rec) = claimed(&amo, None, T0);
    let reconciler = ClaimArgs {
        reconcile: true,
        ..amo.clone()
    };
    let (_, reconciling) = claimed(&reconciler, Some(&rec), T0 + LEASE);
    assert_eq!((reconciling.attempt, reconciling.reconciliations), (2, 1));
    let retry = after(
        &fail(
            Some(&reconciling),
            2,
            &error("not done"),
            Disposition::Retryable,
            T0 + LEASE + 1,
        )
        .unwrap(),
    );
    // The cap still allows a second ordinary run.
    let (outcome, second) = claimed(&amo, Some(&retry), T0 + LEASE + 2);
    assert_eq!(outcome, ClaimOutcome::Acquired);
    assert_eq!(second.fencing_token, 3);
    let retry = after(
        &fail(
            Some(&second),
            3,
            &error("again"),
            Disposition::Retryable,
            T0 + LEASE + 3,
        )
        .unwrap(),
    );
    // Two ordinary runs: that is the cap.
    let (outcome, done) = claimed(&amo, Some(&retry), T0 + LEASE + 4);
    assert_eq!(outcome, ClaimOutcome::Failed);
    assert_eq!(done.error.unwrap().code, EXHAUSTED_CODE);
}

#[test]
fn purge_removes_a_record_in_any_state_and_the_fencing_sequence_continues() {
    let (_, processing) = claimed(&args(1), None, T0);
    let done = after(&complete(Some(&processing), 1, &OpResult::default(), T0 + 1).unwrap());
    let retry = after(
        &fail(
            Some(&processing),
            1,
            &error("e"),
            Disposition::Retryable,
            T0 + 1,
        )
        .unwrap(),
    );
    let failed = after(
        &fail(
            Some(&processing),
            1,
            &error("e"),
            Disposition::Final,
            T0 + 1,
        )
        .unwrap(),
    );
    let (_, awaiting) = claimed(&gated(1), None, T0);
    let approved = approved(T0 + 1);
    let unknown = claimed(
        &capped(1),
        Some(&claimed(&capped(1), None, T0).1),
        T0 + LEASE,
    )
    .1;
    for rec in [
        &processing,
        &done,
        &retry,
        &failed,
        &awaiting,
        &approved,
        &unknown,
    ] {
        let t = purge(Some(rec), false, T0 + 2).unwrap();
        assert!(matches!(t.change, Change::Replace { durable: true, .. }));
        let tombstone = after(&t);
        assert_eq!(tombstone.status, Status::Purged, "{:?}", rec.status);
        assert!(tombstone.history.is_empty() && tombstone.approval.is_none());
        assert!(!tombstone.require_approval && tombstone.result.is_none());
        // The next Claim, with any arguments, creates the key anew with a higher token.
        let (outcome, next) = claimed(&args(7), Some(&tombstone), T0 + 3);
        assert_eq!(outcome, ClaimOutcome::Acquired, "{:?}", rec.status);
        assert_eq!(
            next.fencing_token,
            rec.fencing_token + 1,
            "{:?}",
            rec.status
        );
        assert_eq!(next.attempt, 1);
        assert_eq!(next.history.len(), 1, "nothing of the purged history");
        // Purge again: nothing is there.
        assert_eq!(
            purge(Some(&tombstone), true, T0 + 3).unwrap_err(),
            LedgerError::NotFound
        );
    }
}

#[test]
fn purge_leaves_the_old_holder_lease_lost() {
    let (_, held) = claimed(&args(1), None, T0);
    let tombstone = after(&purge(Some(&held), false, T0 + 1).unwrap());
    // On the tombstone itself, and on the record claimed after it.
    assert_eq!(
        complete(Some(&tombstone), 1, &OpResult::default(), T0 + 2).unwrap_err(),
        LedgerError::LeaseLost
    );
    assert_eq!(
        fail(
            Some(&tombstone),
            1,
            &error("e"),
            Disposition::Abandon,
            T0 + 2
        )
        .unwrap_err(),
        LedgerError::LeaseLost
    );
    assert_eq!(
        renew(Some(&tombstone), 1, LEASE, T0 + 2).unwrap_err(),
        LedgerError::LeaseLost
    );
    let (_, next) = claimed(&args(1), Some(&tombstone), T0 + 3);
    assert_eq!(
        complete(Some(&next), 1, &OpResult::default(), T0 + 4).unwrap_err(),
        LedgerError::LeaseLost
    );
}

#[test]
fn purge_of_an_unsettled_at_most_once_operation_needs_force() {
    let amo = ClaimArgs {
        semantics: Semantics::AtMostOnce,
        ..args(1)
    };
    let (_, processing) = claimed(&amo, None, T0);
    let (_, unknown) = claimed(&amo, Some(&processing), T0 + LEASE);
    assert_eq!(unknown.status, Status::Unknown);
    for rec in [&processing, &unknown] {
        assert_eq!(
            purge(Some(rec), false, T0 + LEASE + 1).unwrap_err(),
            LedgerError::UnsettledAtMostOnce
        );
        let forced = after(&purge(Some(rec), true, T0 + LEASE + 1).unwrap());
        assert_eq!(forced.status, Status::Purged);
    }
    // Settled, it needs no force.
    let done = after(&complete(Some(&processing), 1, &OpResult::default(), T0 + 1).unwrap());
    assert!(purge(Some(&done), false, T0 + 2).is_ok());
}

#[test]
fn purge_of_an_absent_expired_or_tombstoned_key_is_not_found() {
    assert_eq!(purge(None, true, T0).unwrap_err(), LedgerError::NotFound);
    let (_, processing) = claimed(&args(1), None, T0);
    let done = after(&complete(Some(&processing), 1, &OpResult::default(), T0 + 1).unwrap());
    let gone = done.expires_at.unwrap();
    assert_eq!(
        purge(Some(&done), true, gone).unwrap_err(),
        LedgerError::NotFound
    );
    let tombstone = after(
        &fail(
            Some(&processing),
            1,
            &error("e"),
            Disposition::Abandon,
            T0 + 1,
        )
        .unwrap(),
    );
    assert_eq!(
        purge(Some(&tombstone), true, T0 + 2).unwrap_err(),
        LedgerError::NotFound
    );
}

#[test]
fn purge_clears_the_approval_gate_that_an_abandon_keeps() {
    let rec = approved(T0 + 1);
    let (_, held) = claimed(&args(1), Some(&rec), T0 + 2);
    let abandoned =
        after(&fail(Some(&held), 1, &error("e"), Disposition::Abandon, T0 + 3).unwrap());
    let (_, gated_again) = claimed(&args(1), Some(&abandoned), T0 + 4);
    assert_eq!(gated_again.status, Status::AwaitingApproval);
    let tombstone = after(&purge(Some(&gated_again), false, T0 + 5).unwrap());
    let (outcome, open) = claimed(&args(1), Some(&tombstone), T0 + 6);
    assert_eq!(
        outcome,
        ClaimOutcome::Acquired,
        "only Purge clears the gate"
    );
    assert_eq!(open.fencing_token, 2);
}

#[test]
fn purge_tombstone_outlives_the_last_lease_by_the_retention() {
    // A lease that runs long past the purge: the tombstone keeps the sequence until retention
    // after the lease end, so the purged holder's token is never handed out again meanwhile.
    let long = ClaimArgs {
        lease_ttl: 10 * RETENTION,
        ..args(1)
    };
    let (_, held) = claimed(&long, None, T0);
    let lease_end = held.lease_expires_at.unwrap();
    let tombstone = after(&purge(Some(&held), false, T0 + 1).unwrap());
    assert_eq!(tombstone.expires_at, Some(lease_end + RETENTION));
    assert_eq!(tombstone.expires_at, expiry(&tombstone));
    assert!(!tombstone.is_expired(lease_end + RETENTION - 1));
    // A record without a live lease: retention after the purge.
    let done = after(&complete(Some(&held), 1, &OpResult::default(), T0 + 1).unwrap());
    let tombstone = after(&purge(Some(&done), false, T0 + 2).unwrap());
    assert_eq!(tombstone.expires_at, Some(T0 + 2 + RETENTION));
}

#[test]
fn purge_record_claimed_after_it_outlives_the_purged_lease_by_the_retention() {
    // Found by the model check: a record claimed over the tombstone that settles at once would
    // otherwise expire `retention` after it settled, while the purged holder still believes in
    // its lease, and the key's next life would hand out token 1 again.
    let long = ClaimArgs {
        lease_ttl: 10 * RETENTION,
        ..args(1)
    };
    let (_, held) = claimed(&long, None, T0);
    let lease_end = held.lease_expires_at.unwrap();
    let tombstone = after(&purge(Some(&held), false, T0 + 1).unwrap());
    let (_, next) = claimed(&args(1), Some(&tombstone), T0 + 2);
    assert_eq!(next.fencing_token, 2);
    assert_eq!(next.kept_until, Some(lease_end + RETENTION));
    let done = after(&complete(Some(&next), 2, &OpResult::default(), T0 + 3).unwrap());
    assert_eq!(done.expires_at, Some(lease_end + RETENTION));
    assert_eq!(done.expires_at, expiry(&done));
    // Until then the sequence continues (token 3, never 1 again) …
    let (outcome, retried) = claimed(
        &args(1),
        Some(&after(
            &fail(Some(&next), 2, &error("e"), Disposition::Retryable, T0 + 3).unwrap(),
        )),
        lease_end + RETENTION - 1,
    );
    assert_eq!(
        (outcome, retried.fencing_token),
        (ClaimOutcome::Acquired, 3)
    );
    // … across an ABANDON tombstone too, which passes the floor on to the next life.
    let abandoned =
        after(&fail(Some(&next), 2, &error("e"), Disposition::Abandon, T0 + 3).unwrap());
    assert_eq!(abandoned.expires_at, Some(lease_end + RETENTION));
    let (_, again) = claimed(&args(1), Some(&abandoned), T0 + 4);
    assert_eq!(again.fencing_token, 3);
    assert_eq!(again.kept_until, Some(lease_end + RETENTION));
    // An unsettled at-most-once record stays kept until it settles, floor or not.
    let amo = ClaimArgs {
        semantics: Semantics::AtMostOnce,
        ..args(1)
    };
    let (_, amo_next) = claimed(&amo, Some(&tombstone), T0 + 2);
    assert_eq!(amo_next.expires_at, None);
    // Without a purge there is no floor.
    assert_eq!(held.kept_until, None);
}
