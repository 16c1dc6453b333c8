//! Settling (docs/api.md, "Settling"): Complete, Fail and Renew, which only the current fencing
//! token may do, and the receipt history they leave.

use super::*;

#[test]
fn complete_stores_the_result_and_retention() {
    let rec = claimed(&args(1), T0);
    let t = complete(Some(&rec), 1, &result("ok"), T0 + 100).unwrap();
    let done = after(&t);
    assert_eq!(
        (done.status, done.lease_expires_at),
        (Status::Succeeded, None)
    );
    assert_eq!(done.expires_at, Some(T0 + 100 + RETENTION));
    assert_eq!(
        t.change,
        Change::Replace {
            expected_version: 1,
            durable: true
        }
    );
}

#[test]
fn complete_with_a_wrong_token_or_on_absent_is_lease_lost() {
    let rec = claimed(&args(1), T0);
    assert_eq!(
        complete(Some(&rec), 2, &result("x"), T0).unwrap_err(),
        LedgerError::LeaseLost
    );
    assert_eq!(
        complete(None, 1, &result("x"), T0).unwrap_err(),
        LedgerError::LeaseLost
    );
    assert_eq!(
        renew(None, 1, LEASE, T0).unwrap_err(),
        LedgerError::LeaseLost
    );
    assert_eq!(
        fail(None, 1, &error("e"), Disposition::Final, T0).unwrap_err(),
        LedgerError::LeaseLost
    );
}

#[test]
fn expired_lease_not_taken_over_still_completes() {
    let rec = claimed(&args(1), T0);
    let late = complete(Some(&rec), 1, &result("ok"), T0 + 10 * LEASE).unwrap();
    assert_eq!(after(&late).status, Status::Succeeded);
    let renewed = renew(Some(&rec), 1, LEASE, T0 + 2 * LEASE).unwrap().0;
    assert_eq!(renewed.expires_at, T0 + 3 * LEASE);
}

#[test]
fn holder_of_an_unknown_record_may_still_settle_it() {
    let rec = claimed(&amo(1), T0);
    let unknown = claim(&id(), Some(&rec), &amo(1), T0 + LEASE)
        .unwrap()
        .record()
        .clone();
    assert_eq!(
        renew(Some(&unknown), 1, LEASE, T0 + LEASE).unwrap_err(),
        LedgerError::LeaseLost
    );
    let done = after(&complete(Some(&unknown), 1, &result("ok"), T0 + LEASE + 1).unwrap());
    assert_eq!(done.status, Status::Succeeded);
}

#[test]
fn complete_after_takeover_is_lease_lost() {
    let rec = claimed(&args(1), T0);
    let taken = claim(&id(), Some(&rec), &args(1), T0 + LEASE)
        .unwrap()
        .record()
        .clone();
    assert_eq!(
        complete(Some(&taken), 1, &result("ok"), T0 + LEASE + 1).unwrap_err(),
        LedgerError::LeaseLost
    );
    assert!(complete(Some(&taken), 2, &result("ok"), T0 + LEASE + 1).is_ok());
}

#[test]
fn repeated_identical_complete_is_ok_and_different_is_already_settled() {
    let done = completed(T0 + 1);
    let again = complete(Some(&done), 1, &result("ok"), T0 + 2).unwrap();
    assert_eq!((again.change, after(&again)), (Change::Keep, done.clone()));
    assert_eq!(
        complete(Some(&done), 1, &result("other"), T0 + 2).unwrap_err(),
        LedgerError::AlreadySettled
    );
    assert_eq!(
        fail(Some(&done), 1, &error("e"), Disposition::Final, T0 + 2).unwrap_err(),
        LedgerError::AlreadySettled
    );
    assert_eq!(
        renew(Some(&done), 1, LEASE, T0 + 2).unwrap_err(),
        LedgerError::AlreadySettled
    );
}

#[test]
fn repeated_identical_fail_is_ok() {
    let rec = claimed(&args(1), T0);
    for (disposition, status) in [
        (Disposition::Final, Status::Failed),
        (Disposition::Retryable, Status::Retry),
    ] {
        let failed = after(&fail(Some(&rec), 1, &error("e"), disposition, T0 + 1).unwrap());
        assert_eq!(failed.status, status);
        assert_eq!(
            fail(Some(&failed), 1, &error("e"), disposition, T0 + 2)
                .unwrap()
                .change,
            Change::Keep
        );
        assert_eq!(
            fail(Some(&failed), 1, &error("other"), disposition, T0 + 2).unwrap_err(),
            LedgerError::AlreadySettled
        );
        assert_eq!(
            complete(Some(&failed), 1, &result("ok"), T0 + 2).unwrap_err(),
            LedgerError::AlreadySettled
        );
    }
    let retry = after(&fail(Some(&rec), 1, &error("e"), Disposition::Retryable, T0 + 1).unwrap());
    assert_eq!(
        fail(Some(&retry), 1, &error("e"), Disposition::Final, T0 + 2).unwrap_err(),
        LedgerError::AlreadySettled
    );
}

#[test]
fn abandon_leaves_a_tombstone_the_key_can_be_claimed_with_another_payload() {
    let rec = claimed(&args(1), T0);
    let t = fail(
        Some(&rec),
        1,
        &error("invalid input"),
        Disposition::Abandon,
        T0 + 1,
    )
    .unwrap();
    let tombstone = after(&t);
    assert_eq!(tombstone.status, Status::Abandoned);
    assert_eq!(
        t.change,
        Change::Replace {
            expected_version: 1,
            durable: true
        }
    );
    // Claimable again with another fingerprint; the fencing sequence continues.
    let d = claim(&id(), Some(&tombstone), &args(2), T0 + 2).unwrap();
    assert_eq!(d.outcome, ClaimOutcome::Acquired);
    let r = d.record();
    assert_eq!(
        (r.fencing_token, r.attempt, r.dedup_hits, r.fingerprint),
        (2, 1, 0, [2; 32])
    );
    assert_eq!(
        d.transition.change,
        Change::Replace {
            expected_version: tombstone.version,
            durable: true
        }
    );
    // The abandoning holder retrying its ABANDON is OK; anything else it tries is ALREADY_SETTLED.
    assert_eq!(
        fail(
            Some(&tombstone),
            1,
            &error("x"),
            Disposition::Abandon,
            T0 + 3
        )
        .unwrap()
        .change,
        Change::Keep
    );
    assert_eq!(
        complete(Some(&tombstone), 1, &result("ok"), T0 + 3).unwrap_err(),
        LedgerError::AlreadySettled
    );
    // The old token cannot touch the new claim.
    let new_life = d.record().clone();
    assert_eq!(
        complete(Some(&new_life), 1, &result("ok"), T0 + 3).unwrap_err(),
        LedgerError::LeaseLost
    );
    let stale = fail(
        Some(&new_life),
        1,
        &error("x"),
        Disposition::Abandon,
        T0 + 3,
    );
    assert_eq!(stale.unwrap_err(), LedgerError::LeaseLost);
}

#[test]
fn abandon_of_a_key_not_held_is_lease_lost() {
    // Never claimed (or another tenant's: the caller's tenant has no record).
    assert_eq!(
        fail(None, 1, &error("x"), Disposition::Abandon, T0).unwrap_err(),
        LedgerError::LeaseLost
    );
    // Expired: a settled record past its retention, and the tombstone of an ABANDON past its own.
    let rec = claimed(&args(1), T0);
    let done = after(&complete(Some(&rec), 1, &result("ok"), T0 + 1).unwrap());
    let gone = done.expires_at.expect("a settled record expires") + 1;
    assert_eq!(
        fail(Some(&done), 1, &error("x"), Disposition::Abandon, gone).unwrap_err(),
        LedgerError::LeaseLost
    );
    let tombstone = after(&fail(Some(&rec), 1, &error("x"), Disposition::Abandon, T0 + 1).unwrap());
    let same = fail(
        Some(&tombstone),
        1,
        &error("x"),
        Disposition::Abandon,
        T0 + 2,
    );
    assert_eq!(
        same.unwrap().change,
        Change::Keep,
        "a retried ABANDON is OK"
    );
    assert_eq!(
        fail(
            Some(&tombstone),
            1,
            &error("x"),
            Disposition::Abandon,
            tombstone.expires_at.expect("a tombstone expires") + 1
        )
        .unwrap_err(),
        LedgerError::LeaseLost
    );
}

#[test]
fn renew_extends_the_lease_and_the_record() {
    let short = ClaimArgs {
        retention: 60_000,
        lease_ttl: 50_000,
        ..args(1)
    };
    let rec = claimed(&short, T0);
    let (lease, t) = renew(Some(&rec), 1, 3_600_000, T0 + 10).unwrap();
    assert_eq!(
        (lease.token, lease.expires_at, lease.attempt),
        (1, T0 + 10 + 3_600_000, 1)
    );
    assert!(
        after(&t).expires_at >= Some(lease.expires_at + 60_000),
        "a record never expires under a live lease, nor within retention after it"
    );
}

#[test]
fn renew_after_retry_is_already_settled_and_after_takeover_lease_lost() {
    let rec = claimed(&args(1), T0);
    let retry = after(&fail(Some(&rec), 1, &error("e"), Disposition::Retryable, T0 + 1).unwrap());
    assert_eq!(
        renew(Some(&retry), 1, LEASE, T0 + 2).unwrap_err(),
        LedgerError::AlreadySettled
    );
    let reacquired = claim(&id(), Some(&retry), &args(1), T0 + 3)
        .unwrap()
        .record()
        .clone();
    assert_eq!(
        renew(Some(&reacquired), 1, LEASE, T0 + 4).unwrap_err(),
        LedgerError::LeaseLost
    );
}

#[test]
fn versions_increase_by_one_on_every_write() {
    let rec = claimed(&args(1), T0);
    let hit = claim(&id(), Some(&rec), &args(1), T0 + 1).unwrap();
    assert_eq!(hit.record().version, 2);
    let (_, renewed) = renew(Some(hit.record()), 1, LEASE, T0 + 2).unwrap();
    assert_eq!(after(&renewed).version, 3);
}

#[test]
fn history_records_claim_takeover_complete_and_replay_in_order() {
    let first = claimed(&args(1), T0);
    let mut taker = args(1);
    taker.owner = "worker-2".into();
    let taken = claim(&id(), Some(&first), &taker, T0 + LEASE)
        .unwrap()
        .record()
        .clone();
    let (_, renewed) = renew(Some(&taken), 2, LEASE, T0 + LEASE + 1).unwrap();
    let done = after(&complete(renewed.record.as_ref(), 2, &result("ok"), T0 + LEASE + 2).unwrap());
    let replay = claim(&id(), Some(&done), &args(1), T0 + LEASE + 3)
        .unwrap()
        .record()
        .clone();
    let seen: Vec<_> = replay
        .history
        .iter()
        .map(|e| {
            (
                e.at,
                e.kind,
                e.outcome.as_str(),
                e.fencing_token,
                e.attempt,
                e.owner.as_str(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            (T0, EventKind::Claim, "ACQUIRED", 1, 1, "worker-1"),
            (
                T0 + LEASE,
                EventKind::Takeover,
                "ACQUIRED",
                2,
                2,
                "worker-2"
            ),
            (
                T0 + LEASE + 1,
                EventKind::Renew,
                "RENEWED",
                2,
                2,
                "worker-2"
            ),
            (
                T0 + LEASE + 2,
                EventKind::Complete,
                "SUCCEEDED",
                2,
                2,
                "worker-2"
            ),
            (
                T0 + LEASE + 3,
                EventKind::Claim,
                "COMPLETED",
                2,
                2,
                "worker-1"
            ),
        ]
    );
}

#[test]
fn history_is_bounded_and_keeps_the_newest() {
    let mut rec = claimed(&args(1), T0);
    for i in 0..(MAX_HISTORY as i64 + 10) {
        rec = claim(&id(), Some(&rec), &args(1), T0 + 1 + i)
            .unwrap()
            .record()
            .clone();
    }
    assert_eq!(rec.history.len(), MAX_HISTORY);
    assert_eq!(rec.history.last().unwrap().at, T0 + MAX_HISTORY as i64 + 10);
    // Replays are routine: the acquisition's receipt outlives any number of them.
    assert_eq!(rec.history[0].outcome, "ACQUIRED");
    assert_eq!(rec.history[0].at, T0);
    assert_eq!(rec.history[1].at, T0 + 12, "the 11 oldest replays went");
}
