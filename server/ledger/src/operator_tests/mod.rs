//! The operator rules, one test per rule: the approval gate (Approve, Reject) here, the attempt
//! cap and Purge in `cap_and_purge`, with their edge cases; the helpers they share.

use super::*;

mod cap_and_purge;
mod nothing_ran;

const T0: Millis = 1_000_000;
const LEASE: Millis = 30_000;
const RETENTION: Millis = 3_600_000;

fn id() -> RecordId {
    RecordId::new("tenant", "payments.refund", "refund-7")
}

fn args(fp: u8) -> ClaimArgs {
    ClaimArgs::for_test(
        [fp; 32],
        Semantics::AtLeastOnce,
        LEASE,
        RETENTION,
        "agent-1",
    )
}

fn gated(fp: u8) -> ClaimArgs {
    ClaimArgs {
        require_approval: true,
        ..args(fp)
    }
}

fn capped(max_attempts: u32) -> ClaimArgs {
    ClaimArgs {
        max_attempts,
        ..args(1)
    }
}

fn after(t: &Transition) -> Record {
    t.record.clone().expect("a record")
}

fn claimed(a: &ClaimArgs, current: Option<&Record>, now: Millis) -> (ClaimOutcome, Record) {
    let d = claim(&id(), current, a, now).unwrap();
    (d.outcome, d.record().clone())
}

fn error(msg: &str) -> OpError {
    OpError {
        code: 500,
        message: msg.into(),
        details: vec![],
    }
}

fn approved(now: Millis) -> Record {
    let (_, awaiting) = claimed(&gated(1), None, T0);
    after(&approve(Some(&awaiting), None, "alice", "ok", now).unwrap())
}

fn last(record: &Record) -> &Event {
    record.history.last().expect("a receipt")
}

#[test]
fn approval_gate_creates_the_record_awaiting_approval_without_lease_or_token() {
    let d = claim(&id(), None, &gated(1), T0).unwrap();
    assert_eq!(d.outcome, ClaimOutcome::AwaitingApproval);
    assert_eq!(d.transition.change, Change::Insert);
    let r = d.record();
    assert_eq!(
        (r.status, r.fencing_token, r.attempt, r.lease_expires_at),
        (Status::AwaitingApproval, 0, 0, None)
    );
    assert!(r.require_approval && r.approval.is_none() && r.lease_owner.is_empty());
    assert_eq!(r.expires_at, Some(T0 + RETENTION), "created_at + retention");
    let receipt = last(r);
    assert_eq!(
        (
            receipt.kind,
            receipt.outcome.as_str(),
            receipt.owner.as_str()
        ),
        (EventKind::Claim, "AWAITING_APPROVAL", "agent-1")
    );
}

#[test]
fn approval_gate_answers_every_later_claim_awaiting_approval_as_a_dedup_hit() {
    let (_, awaiting) = claimed(&gated(1), None, T0);
    // A later Claim without require_approval, or even with reconcile, is gated all the same.
    for later in [
        args(1),
        gated(1),
        ClaimArgs {
            reconcile: true,
            ..args(1)
        },
    ] {
        let d = claim(&id(), Some(&awaiting), &later, T0 + LEASE * 10).unwrap();
        assert_eq!(d.outcome, ClaimOutcome::AwaitingApproval);
        assert_eq!(d.record().dedup_hits, 1);
        assert!(matches!(
            d.transition.change,
            Change::Replace { durable: false, .. }
        ));
    }
}

#[test]
fn approval_gate_refuses_other_arguments_as_key_reused() {
    let (_, awaiting) = claimed(&gated(1), None, T0);
    let approved = approved(T0 + 1);
    for record in [&awaiting, &approved] {
        let err = claim(&id(), Some(record), &args(2), T0 + 2).unwrap_err();
        assert_eq!(err, LedgerError::KeyReused, "{:?}", record.status);
    }
}

#[test]
fn approval_gate_and_attempt_cap_are_set_by_the_first_claim_only() {
    // require_approval and max_attempts on a Claim of an existing key change nothing.
    let (_, open) = claimed(&args(1), None, T0);
    let late = ClaimArgs {
        require_approval: true,
        max_attempts: 1,
        ..args(1)
    };
    let d = claim(&id(), Some(&open), &late, T0 + 1).unwrap();
    assert_eq!(d.outcome, ClaimOutcome::InProgress);
    assert!(!d.record().require_approval);
    assert_eq!(d.record().max_attempts, 0);
    let retry = after(&fail(Some(&open), 1, &error("e"), Disposition::Retryable, T0 + 2).unwrap());
    let again = claim(&id(), Some(&retry), &late, T0 + 3).unwrap();
    assert_eq!(again.outcome, ClaimOutcome::Acquired, "no cap was set");
    assert_eq!(again.record().attempt, 2);
    // And the other way round: a gated key stays gated for Claims that do not ask.
    let (_, awaiting) = claimed(&gated(1), None, T0);
    let d = claim(&id(), Some(&awaiting), &capped(5), T0 + 1).unwrap();
    assert_eq!(d.record().max_attempts, 0);
}

#[test]
fn approve_makes_the_record_approved_and_the_next_claim_acquires_token_1() {
    let (_, awaiting) = claimed(&gated(1), None, T0);
    let t = approve(
        Some(&awaiting),
        None,
        "alice@example.com",
        "refund ok",
        T0 + 5,
    )
    .unwrap();
    assert!(matches!(t.change, Change::Replace { durable: true, .. }));
    let rec = after(&t);
    assert_eq!(rec.status, Status::Approved);
    assert_eq!(
        rec.approval,
        Some(Approval {
            decision: Decision::Approved,
            decided_by: "alice@example.com".into(),
            note: "refund ok".into(),
            decided_at: T0 + 5,
        })
    );
    assert_eq!(
        rec.expires_at,
        Some(T0 + RETENTION),
        "still created_at + retention"
    );
    let receipt = last(&rec);
    assert_eq!(
        (
            receipt.kind,
            receipt.outcome.as_str(),
            receipt.owner.as_str()
        ),
        (EventKind::Approve, "APPROVED", "alice@example.com")
    );
    let (outcome, acquired) = claimed(&args(1), Some(&rec), T0 + 6);
    assert_eq!(outcome, ClaimOutcome::Acquired);
    assert_eq!(
        (acquired.status, acquired.fencing_token, acquired.attempt),
        (Status::Processing, 1, 1)
    );
    assert_eq!(acquired.lease_expires_at, Some(T0 + 6 + LEASE));
    assert!(
        acquired.approval.is_some(),
        "the decision stays on the record"
    );
    // From here on it proceeds as usual.
    let done = after(&complete(Some(&acquired), 1, &OpResult::default(), T0 + 7).unwrap());
    assert_eq!(done.status, Status::Succeeded);
}

#[test]
fn approve_again_is_ok_and_any_other_decision_is_not_awaiting_approval() {
    let rec = approved(T0 + 1);
    let again = approve(Some(&rec), None, "bob", "other note", T0 + 2).unwrap();
    assert_eq!(again.change, Change::Keep, "a lost answer is safe to retry");
    assert_eq!(after(&again).approval.unwrap().decided_by, "alice");
    assert_eq!(
        reject(Some(&rec), None, "bob", "no", T0 + 2).unwrap_err(),
        LedgerError::NotAwaitingApproval
    );
    // Once acquired, the record has moved on: even the same decision is refused.
    let (_, acquired) = claimed(&args(1), Some(&rec), T0 + 3);
    for decide in [approve, reject] {
        assert_eq!(
            decide(Some(&acquired), None, "alice", "ok", T0 + 4).unwrap_err(),
            LedgerError::NotAwaitingApproval
        );
    }
}

#[test]
fn reject_fails_the_record_with_403_and_the_note_replayed_to_every_claim() {
    let (_, awaiting) = claimed(&gated(1), None, T0);
    let rec = after(&reject(Some(&awaiting), None, "alice", "amount too high", T0 + 10).unwrap());
    assert_eq!(rec.status, Status::Failed);
    let expected = OpError {
        code: REJECTED_CODE,
        message: "amount too high".into(),
        details: vec![],
    };
    assert_eq!(rec.error, Some(expected.clone()));
    assert_eq!(rec.approval.as_ref().unwrap().decision, Decision::Rejected);
    assert_eq!(
        rec.expires_at,
        Some(T0 + 10 + RETENTION),
        "settled: retention from now"
    );
    assert_eq!(
        (last(&rec).kind, last(&rec).outcome.as_str()),
        (EventKind::Reject, "REJECTED")
    );
    let d = claim(&id(), Some(&rec), &args(1), T0 + 11).unwrap();
    assert_eq!(d.outcome, ClaimOutcome::Failed);
    assert_eq!(d.record().error, Some(expected));
    // The same rejection again is OK; an approval now is not.
    let again = reject(Some(&rec), None, "bob", "", T0 + 12).unwrap();
    assert_eq!(again.change, Change::Keep);
    assert_eq!(
        approve(Some(&rec), None, "bob", "", T0 + 12).unwrap_err(),
        LedgerError::NotAwaitingApproval
    );
}

#[test]
fn decisions_on_a_record_that_never_awaited_approval_are_not_awaiting_approval() {
    let (_, processing) = claimed(&args(1), None, T0);
    let done = after(&complete(Some(&processing), 1, &OpResult::default(), T0 + 1).unwrap());
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
    for rec in [&processing, &done, &failed] {
        for decide in [approve, reject] {
            let err = decide(Some(rec), None, "alice", "", T0 + 2).unwrap_err();
            assert_eq!(err, LedgerError::NotAwaitingApproval, "{:?}", rec.status);
        }
    }
}

#[test]
fn decisions_on_an_absent_expired_or_abandoned_key_are_not_found() {
    let (_, awaiting) = claimed(&gated(1), None, T0);
    let expired_at = awaiting.expires_at.unwrap();
    let (_, processing) = claimed(&args(1), None, T0);
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
    for decide in [approve, reject] {
        assert_eq!(
            decide(None, None, "a", "", T0).unwrap_err(),
            LedgerError::NotFound
        );
        assert_eq!(
            decide(Some(&awaiting), None, "a", "", expired_at).unwrap_err(),
            LedgerError::NotFound,
            "approval must come within the retention"
        );
        assert_eq!(
            decide(Some(&tombstone), None, "a", "", T0 + 2).unwrap_err(),
            LedgerError::NotFound
        );
    }
    // An approval state that expired counts as absent for Claims too: the key starts over.
    let fresh = claim(&id(), Some(&awaiting), &args(2), expired_at).unwrap();
    assert_eq!(fresh.transition.change, Change::Insert);
}

#[test]
fn a_pinned_fingerprint_other_than_the_stored_one_is_key_reused() {
    let (_, awaiting) = claimed(&gated(1), None, T0);
    for decide in [approve, reject] {
        assert_eq!(
            decide(Some(&awaiting), Some(&[2; 32]), "a", "", T0 + 1).unwrap_err(),
            LedgerError::KeyReused
        );
        assert!(decide(Some(&awaiting), Some(&[1; 32]), "a", "", T0 + 1).is_ok());
    }
}

#[test]
fn a_record_awaiting_approval_refuses_every_token() {
    // Life 1: acquired (token 1), abandoned; life 2 awaits approval with the sequence at 1.
    let (_, first) = claimed(&gated(1), None, T0);
    let first = after(&approve(Some(&first), None, "a", "", T0 + 1).unwrap());
    let (_, held) = claimed(&args(1), Some(&first), T0 + 2);
    let tombstone =
        after(&fail(Some(&held), 1, &error("e"), Disposition::Abandon, T0 + 3).unwrap());
    let (outcome, awaiting) = claimed(&args(2), Some(&tombstone), T0 + 4);
    assert_eq!(outcome, ClaimOutcome::AwaitingApproval);
    assert_eq!(awaiting.fencing_token, 1);
    // The old holder's token 1 is not this life's.
    let stale = complete(Some(&awaiting), 1, &OpResult::default(), T0 + 5);
    assert_eq!(stale.unwrap_err(), LedgerError::LeaseLost);
    let stale = fail(
        Some(&awaiting),
        1,
        &error("e"),
        Disposition::Abandon,
        T0 + 5,
    );
    assert_eq!(stale.unwrap_err(), LedgerError::LeaseLost);
    assert_eq!(
        renew(Some(&awaiting), 1, LEASE, T0 + 5).unwrap_err(),
        LedgerError::LeaseLost
    );
}

#[test]
fn abandon_after_approval_leaves_a_tombstone_that_keeps_the_key_gated() {
    let rec = approved(T0 + 1);
    let (_, held) = claimed(&args(1), Some(&rec), T0 + 2);
    let tombstone = after(
        &fail(
            Some(&held),
            1,
            &error("bad input"),
            Disposition::Abandon,
            T0 + 3,
        )
        .unwrap(),
    );
    assert!(
        tombstone.require_approval,
        "the tombstone remembers the gate"
    );
    // The next Claim, with any arguments and without asking, awaits approval again.
    let (outcome, again) = claimed(&args(9), Some(&tombstone), T0 + 4);
    assert_eq!(outcome, ClaimOutcome::AwaitingApproval);
    assert_eq!(
        (
            again.status,
            again.fencing_token,
            again.attempt,
            again.fingerprint
        ),
        (Status::AwaitingApproval, 1, 0, [9; 32])
    );
    assert!(again.approval.is_none(), "a new life needs a new decision");
    let kinds: Vec<_> = again.history.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [
            EventKind::Claim,
            EventKind::Approve,
            EventKind::Claim,
            EventKind::Fail,
            EventKind::Claim
        ],
        "the audit trail continues"
    );
    // Approved again, its acquisition continues the fencing sequence.
    let approved = after(&approve(Some(&again), None, "a", "", T0 + 5).unwrap());
    let (_, acquired) = claimed(&args(9), Some(&approved), T0 + 6);
    assert_eq!((acquired.fencing_token, acquired.attempt), (2, 1));
}
