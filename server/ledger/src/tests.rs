//! Every Claim transition rule of the ledger (docs/api.md, "Claim transitions"; the tests are
//! named after the rule they check) and every ledger error, including the edge cases. Settling
//! (Complete, Fail, Renew) and the history are in `settle.rs`.

use super::*;

mod settle;

const T0: Millis = 1_000_000;
const LEASE: Millis = 30_000;
const RETENTION: Millis = 3_600_000;

fn id() -> RecordId {
    RecordId::new("tenant", "payments.charge", "order-1")
}

fn args(fp: u8) -> ClaimArgs {
    ClaimArgs::for_test(
        [fp; 32],
        Semantics::AtLeastOnce,
        LEASE,
        RETENTION,
        "worker-1",
    )
}

fn amo(fp: u8) -> ClaimArgs {
    ClaimArgs {
        semantics: Semantics::AtMostOnce,
        ..args(fp)
    }
}

fn result(body: &str) -> OpResult {
    OpResult {
        code: 200,
        body: body.as_bytes().to_vec(),
        ..OpResult::default()
    }
}

fn error(msg: &str) -> OpError {
    OpError {
        code: 500,
        message: msg.into(),
        details: vec![],
    }
}

/// The record a decision leaves (applying it as a store would).
fn after(t: &Transition) -> Record {
    t.record.clone().expect("a record")
}

fn claimed(a: &ClaimArgs, now: Millis) -> Record {
    claim(&id(), None, a, now).unwrap().record().clone()
}

fn completed(now: Millis) -> Record {
    let rec = claimed(&args(1), T0);
    after(&complete(Some(&rec), 1, &result("ok"), now).unwrap())
}

#[test]
fn rule2_absent_creates_processing_token1() {
    let d = claim(&id(), None, &args(1), T0).unwrap();
    assert_eq!(d.outcome, ClaimOutcome::Acquired);
    assert_eq!(d.transition.change, Change::Insert);
    let r = d.record();
    assert_eq!(
        (r.status, r.fencing_token, r.attempt, r.version),
        (Status::Processing, 1, 1, 1)
    );
    assert_eq!(r.lease_expires_at, Some(T0 + LEASE));
    assert_eq!(
        (r.created_at, r.expires_at, r.lease_owner.as_str()),
        (T0, Some(T0 + LEASE + RETENTION), "worker-1")
    );
}

#[test]
fn rule2_expired_record_counts_as_absent_exactly_at_the_boundary() {
    let rec = completed(T0 + 10);
    let expires_at = rec.expires_at.expect("a settled record expires");
    let just_before = claim(&id(), Some(&rec), &args(2), expires_at - 1);
    assert_eq!(just_before.unwrap_err(), LedgerError::KeyReused);
    let at = claim(&id(), Some(&rec), &args(2), expires_at).unwrap();
    assert_eq!(
        (at.outcome, at.transition.change),
        (ClaimOutcome::Acquired, Change::Insert)
    );
    assert_eq!(at.record().fencing_token, 1);
}

#[test]
fn rule3_other_fingerprint_is_key_reused_in_every_state() {
    let processing = claimed(&args(1), T0);
    let mut states = vec![processing.clone(), completed(T0 + 1)];
    for s in [Status::Failed, Status::Retry, Status::Unknown] {
        states.push(Record {
            status: s,
            ..processing.clone()
        });
    }
    for rec in states {
        assert_eq!(
            claim(&id(), Some(&rec), &args(2), T0 + 2).unwrap_err(),
            LedgerError::KeyReused,
            "{:?}",
            rec.status
        );
    }
}

#[test]
fn rule4_succeeded_replays_and_counts_a_dedup_hit() {
    let rec = completed(T0 + 5);
    let d = claim(&id(), Some(&rec), &args(1), T0 + 6).unwrap();
    assert_eq!(d.outcome, ClaimOutcome::Completed);
    assert_eq!(d.record().result, Some(result("ok")));
    assert_eq!(d.record().dedup_hits, 1);
    assert_eq!(
        d.transition.change,
        Change::Replace {
            expected_version: rec.version,
            durable: false
        }
    );
    assert_eq!(d.record().updated_at, rec.updated_at);
}

#[test]
fn rule5_failed_replays_the_error() {
    let rec = claimed(&args(1), T0);
    let failed = after(
        &fail(
            Some(&rec),
            1,
            &error("card declined"),
            Disposition::Final,
            T0 + 1,
        )
        .unwrap(),
    );
    let d = claim(&id(), Some(&failed), &args(1), T0 + 2).unwrap();
    assert_eq!(d.outcome, ClaimOutcome::Failed);
    assert_eq!(d.record().error, Some(error("card declined")));
    assert_eq!(d.record().dedup_hits, 1);
}

#[test]
fn rule6_valid_lease_is_in_progress_until_the_boundary() {
    let rec = claimed(&args(1), T0);
    let d = claim(&id(), Some(&rec), &args(1), T0 + LEASE - 1).unwrap();
    assert_eq!(d.outcome, ClaimOutcome::InProgress);
    assert_eq!(d.record().fencing_token, 1);
    assert_eq!(d.record().dedup_hits, 1);
    let at = claim(&id(), Some(&rec), &args(1), T0 + LEASE).unwrap();
    assert_eq!(
        at.outcome,
        ClaimOutcome::Acquired,
        "a lease is valid strictly before its end"
    );
}

#[test]
fn rule7_expired_at_least_once_lease_is_taken_over() {
    let rec = claimed(&args(1), T0);
    let mut taker = args(1);
    taker.owner = "worker-2".into();
    let d = claim(&id(), Some(&rec), &taker, T0 + LEASE + 5).unwrap();
    assert_eq!(d.outcome, ClaimOutcome::Acquired);
    let r = d.record();
    assert_eq!(
        (r.fencing_token, r.attempt, r.lease_owner.as_str()),
        (2, 2, "worker-2")
    );
    assert_eq!(r.lease_expires_at, Some(T0 + LEASE + 5 + LEASE));
    assert_eq!(
        d.transition.change,
        Change::Replace {
            expected_version: 1,
            durable: true
        }
    );
}

#[test]
fn rule8_expired_at_most_once_needs_reconciliation() {
    let rec = claimed(&amo(1), T0);
    let d = claim(&id(), Some(&rec), &amo(1), T0 + LEASE).unwrap();
    assert_eq!(d.outcome, ClaimOutcome::NeedsReconciliation);
    assert_eq!(d.record().status, Status::Unknown);
    assert_eq!(d.record().fencing_token, 1);
    assert!(matches!(
        d.transition.change,
        Change::Replace { durable: true, .. }
    ));
    // Already UNKNOWN: the answer repeats; only the counter changes.
    let unknown = d.record().clone();
    let again = claim(&id(), Some(&unknown), &args(1), T0 + LEASE + 1).unwrap();
    assert_eq!(again.outcome, ClaimOutcome::NeedsReconciliation);
    assert!(matches!(
        again.transition.change,
        Change::Replace { durable: false, .. }
    ));
}

#[test]
fn rule8_reconcile_acquires_with_a_new_token() {
    let rec = claimed(&amo(1), T0);
    let unknown = claim(&id(), Some(&rec), &amo(1), T0 + LEASE)
        .unwrap()
        .record()
        .clone();
    let reconciler = ClaimArgs {
        reconcile: true,
        ..amo(1)
    };
    let d = claim(&id(), Some(&unknown), &reconciler, T0 + LEASE + 1).unwrap();
    assert_eq!(d.outcome, ClaimOutcome::Acquired);
    assert_eq!(
        (d.record().status, d.record().fencing_token),
        (Status::Processing, 2)
    );
    // The same works straight from an expired PROCESSING record.
    let direct = claim(&id(), Some(&rec), &reconciler, T0 + LEASE).unwrap();
    assert_eq!(
        (direct.outcome, direct.record().fencing_token),
        (ClaimOutcome::Acquired, 2)
    );
    // And the old holder has lost the lease.
    let old = complete(Some(d.record()), 1, &result("late"), T0 + LEASE + 2);
    assert_eq!(old.unwrap_err(), LedgerError::LeaseLost);
}

#[test]
fn rule8_semantics_are_fixed_by_the_first_claim() {
    let rec = claimed(&amo(1), T0);
    let d = claim(&id(), Some(&rec), &args(1), T0 + LEASE).unwrap();
    assert_eq!(d.outcome, ClaimOutcome::NeedsReconciliation);
}

#[test]
fn rule9_retry_is_acquired_again() {
    let rec = claimed(&args(1), T0);
    let retry = after(
        &fail(
            Some(&rec),
            1,
            &error("timeout"),
            Disposition::Retryable,
            T0 + 1,
        )
        .unwrap(),
    );
    assert_eq!(
        (retry.status, retry.error.clone()),
        (Status::Retry, Some(error("timeout")))
    );
    let d = claim(&id(), Some(&retry), &args(1), T0 + 2).unwrap();
    assert_eq!(d.outcome, ClaimOutcome::Acquired);
    assert_eq!((d.record().fencing_token, d.record().attempt), (2, 2));
}

#[test]
fn a_dedup_hit_is_decided_without_its_record_and_writes_only_the_counter_and_receipt() {
    let processing = claimed(&args(1), T0);
    let gated = ClaimArgs {
        require_approval: true,
        ..args(1)
    };
    let failed = fail(
        Some(&processing),
        1,
        &error("no"),
        Disposition::Final,
        T0 + 1,
    );
    let amo_record = claimed(&amo(1), T0);
    let unknown = claim(&id(), Some(&amo_record), &amo(1), T0 + LEASE).unwrap();
    let cases = [
        (completed(T0 + 1), ClaimOutcome::Completed, T0 + 10),
        (after(&failed.unwrap()), ClaimOutcome::Failed, T0 + 10),
        (claimed(&gated, T0), ClaimOutcome::AwaitingApproval, T0 + 10),
        (processing, ClaimOutcome::InProgress, T0 + 10),
        (
            after(&unknown.transition),
            ClaimOutcome::NeedsReconciliation,
            T0 + LEASE + 1,
        ),
    ];
    let duplicate = ClaimArgs {
        owner: "duplicate".into(),
        ..args(1)
    };
    for (stored, outcome, now) in cases {
        let Claimed::Hit {
            outcome: answered,
            receipt,
        } = decide_claim(&id(), Some(&stored), &duplicate, now).unwrap()
        else {
            panic!("{outcome:?} is answered from the record");
        };
        assert_eq!(answered, outcome);
        assert_eq!(
            (receipt.at, receipt.kind, receipt.owner.as_str()),
            (now, EventKind::Claim, "duplicate")
        );
        assert_eq!(
            (receipt.attempt, receipt.fencing_token),
            (stored.attempt, stored.fencing_token)
        );
        // `claim` writes exactly that: the record with its counter and the receipt.
        let decision = claim(&id(), Some(&stored), &duplicate, now).unwrap();
        assert!(decision.is_dedup_hit());
        assert_eq!(decision.outcome, outcome);
        let mut expected = stored.clone();
        expected.version += 1;
        expected.dedup_hits += 1;
        expected.history.push(receipt);
        assert_eq!(decision.record(), &expected, "{outcome:?}");
    }
    // Anything else comes with its write.
    let fresh = decide_claim(&id(), None, &args(1), T0).unwrap();
    assert!(matches!(fresh, Claimed::Decided(_)));
    assert_eq!(fresh.outcome(), ClaimOutcome::Acquired);
}
