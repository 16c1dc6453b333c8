//! The linearizability checker on small hand-written histories: each broken history is caught,
//! and its repaired twin (concurrency, a skewed clock, an unanswered operation that explains the
//! outcome) passes. These need no cluster.

use super::history::{Answer, Call, Op, Seen};
use super::linearizability::check;
use oncekey_server::ledger::{ClaimArgs, ClaimOutcome, Millis, OpResult, Semantics, Status};

const TTL: Millis = 1_000;

fn claim_args() -> ClaimArgs {
    ClaimArgs {
        fingerprint: [1; 32],
        lease_ttl: TTL,
        retention: 86_400_000,
        semantics: Semantics::AtLeastOnce,
        owner: "o".into(),
        parent: None,
        reconcile: false,
        require_approval: false,
        max_attempts: 0,
        budget: None,
    }
}

fn op(client: u32, invoke: Millis, ret: Millis, call: Call, answer: Answer) -> Op {
    Op {
        key: "k".into(),
        client,
        server: 0,
        invoke,
        ret,
        skew: (0, 0),
        call,
        answer,
    }
}

fn claim(client: u32, invoke: Millis, ret: Millis, answer: Answer) -> Op {
    op(client, invoke, ret, Call::Claim(claim_args()), answer)
}

fn processing(token: u64, attempt: u32, lease_end: Millis) -> Seen {
    Seen {
        status: Status::Processing,
        token,
        attempt,
        owner: "o".into(),
        lease_expires_at: Some(lease_end),
        result: None,
        error: None,
    }
}

fn acquired(token: u64, attempt: u32, now: Millis) -> Answer {
    Answer::Claimed {
        outcome: ClaimOutcome::Acquired,
        record: processing(token, attempt, now + TTL),
        lease: Some((token, now + TTL)),
    }
}

fn in_progress(token: u64, attempt: u32, lease_end: Millis) -> Answer {
    Answer::Claimed {
        outcome: ClaimOutcome::InProgress,
        record: processing(token, attempt, lease_end),
        lease: None,
    }
}

fn result() -> OpResult {
    OpResult {
        code: 200,
        body: b"done".to_vec(),
        content_type: "text/plain".into(),
        ..Default::default()
    }
}

fn succeeded(token: u64) -> Seen {
    Seen {
        status: Status::Succeeded,
        token,
        attempt: 1,
        owner: "o".into(),
        lease_expires_at: None,
        result: Some(result()),
        error: None,
    }
}

fn complete(client: u32, invoke: Millis, ret: Millis, answer: Answer) -> Op {
    let call = Call::Complete {
        token: 1,
        result: result(),
    };
    op(client, invoke, ret, call, answer)
}

fn lookup(client: u32, invoke: Millis, ret: Millis, seen: Option<Seen>) -> Op {
    op(client, invoke, ret, Call::Lookup, Answer::Found(seen))
}

fn linearizable(ops: &[Op]) -> bool {
    let report = check(ops);
    assert!(report.inconclusive.is_empty(), "{}", report.summary());
    report.violations.is_empty() && report.untold.is_empty()
}

#[test]
fn a_sequential_history_is_linearizable() {
    let ops = [
        lookup(0, 900, 910, None),
        claim(0, 1000, 1010, acquired(1, 1, 1005)),
        complete(0, 1100, 1110, Answer::Settled(succeeded(1))),
        claim(
            1,
            1200,
            1210,
            Answer::Claimed {
                outcome: ClaimOutcome::Completed,
                record: succeeded(1),
                lease: None,
            },
        ),
        lookup(1, 1300, 1310, Some(succeeded(1))),
    ];
    assert!(linearizable(&ops));
}

#[test]
fn two_holders_of_one_token_are_caught() {
    let ops = [
        claim(0, 1000, 1050, acquired(1, 1, 1020)),
        claim(1, 1000, 1060, acquired(1, 1, 1030)),
    ];
    assert!(!linearizable(&ops));
    // One winner, one IN_PROGRESS behind it: fine.
    let ops = [
        claim(0, 1000, 1050, acquired(1, 1, 1020)),
        claim(1, 1000, 1060, in_progress(1, 1, 1020 + TTL)),
    ];
    assert!(linearizable(&ops));
}

#[test]
fn a_stale_read_after_an_acknowledged_complete_is_caught() {
    let base = [
        claim(0, 1000, 1010, acquired(1, 1, 1005)),
        complete(0, 1100, 1110, Answer::Settled(succeeded(1))),
    ];
    let mut ops = base.to_vec();
    ops.push(lookup(1, 1200, 1210, Some(processing(1, 1, 1005 + TTL))));
    assert!(!linearizable(&ops));
    // A read concurrent with the Complete may still see the record before it.
    let mut ops = base.to_vec();
    ops.push(lookup(1, 1105, 1210, Some(processing(1, 1, 1005 + TTL))));
    assert!(linearizable(&ops));
}

#[test]
fn an_unanswered_claim_may_have_acquired() {
    // Someone holds token 1 with a lease to 3200: only the unanswered Claim can have taken it.
    let holder = in_progress(1, 1, 3_200);
    let ops = [claim(1, 3_000, 3_010, holder.clone())];
    assert!(!linearizable(&ops));
    let ops = [
        claim(0, 1_000, 1_500, Answer::Unknown("timeout".into())),
        claim(1, 3_000, 3_010, holder),
    ];
    assert!(linearizable(&ops));
}

#[test]
fn a_takeover_needs_the_lease_to_have_run_out_on_the_server_clock() {
    let first = claim(0, 995, 1_005, acquired(1, 1, 1_000));
    // A takeover at server time 2105, invoked at 1500 on the client clock.
    let mut takeover = claim(1, 1_500, 1_510, acquired(2, 2, 2_105));
    assert!(!linearizable(&[first.clone(), takeover.clone()]));
    // Through a server whose clock runs 600 ms ahead, the lease (to 2000) had run out.
    takeover.server = 1;
    takeover.skew = (600, 600);
    assert!(linearizable(&[first, takeover]));
}

#[test]
fn an_unanswered_complete_may_have_applied_and_then_stays_applied() {
    let base = [
        claim(0, 1_000, 1_010, acquired(1, 1, 1_005)),
        complete(0, 1_100, 1_300, Answer::Unknown("UNAVAILABLE".into())),
        claim(
            1,
            1_500,
            1_510,
            Answer::Claimed {
                outcome: ClaimOutcome::Completed,
                record: succeeded(1),
                lease: None,
            },
        ),
    ];
    assert!(linearizable(&base));
    let mut ops = base.to_vec();
    ops.push(lookup(1, 1_600, 1_610, Some(processing(1, 1, 1_005 + TTL))));
    assert!(!linearizable(&ops));
}

#[test]
fn a_renewal_moves_the_lease_end() {
    let first = claim(0, 1_000, 1_010, acquired(1, 1, 1_000));
    let renew = op(
        0,
        1_500,
        1_510,
        Call::Renew {
            token: 1,
            lease_ttl: TTL,
        },
        Answer::Renewed { expires_at: 2_505 },
    );
    let later = claim(1, 2_200, 2_210, in_progress(1, 1, 2_505));
    assert!(linearizable(&[first.clone(), renew, later.clone()]));
    assert!(!linearizable(&[first, later]));
}

#[test]
fn a_grant_its_caller_was_not_told_about_is_reported_apart() {
    // Nobody was told ACQUIRED, yet token 1 is held by "o" with a lease to 2000: the first Claim
    // acquired at 1000 and answered with the state after the second Claim (through a server
    // 1500 ms ahead) found the lease lapsed.
    let mut amo = claim_args();
    amo.semantics = Semantics::AtMostOnce;
    let mut unknown = processing(1, 1, 2_000);
    unknown.status = Status::Unknown;
    let needs = Answer::Claimed {
        outcome: ClaimOutcome::NeedsReconciliation,
        record: unknown,
        lease: None,
    };
    let first = op(0, 1_000, 1_400, Call::Claim(amo.clone()), needs.clone());
    let mut second = op(1, 1_000, 1_300, Call::Claim(amo), needs);
    second.server = 1;
    second.skew = (1_500, 1_500);
    let report = check(&[first, second]);
    assert!(report.violations.is_empty(), "{}", report.summary());
    assert_eq!(report.untold.len(), 1, "{}", report.summary());
    // Two holders of one token stay a violation, relaxation or not.
    let report = check(&[
        claim(0, 1000, 1050, acquired(1, 1, 1020)),
        claim(1, 1000, 1060, acquired(1, 1, 1030)),
    ]);
    assert_eq!(
        (report.violations.len(), report.untold.len()),
        (1, 0),
        "{}",
        report.summary()
    );
}

#[test]
fn a_slow_acquired_answer_may_show_its_own_lease_lapsed() {
    // An at-most-once Claim decided at 1000 (lease to 2000) whose answer left the server at 2100:
    // the record is shown as of the answer, when its lease had lapsed (UNKNOWN).
    let mut amo = claim_args();
    amo.semantics = Semantics::AtMostOnce;
    let mut lapsed = processing(1, 1, 2_000);
    lapsed.status = Status::Unknown;
    let slow = Answer::Claimed {
        outcome: ClaimOutcome::Acquired,
        record: lapsed,
        lease: Some((1, 2_000)),
    };
    let answered_late = op(0, 990, 2_100, Call::Claim(amo.clone()), slow.clone());
    assert!(linearizable(&[answered_late]));
    // Shown lapsed before the lease could have ended: no execution explains it.
    let answered_early = op(0, 990, 1_500, Call::Claim(amo), slow);
    assert!(!linearizable(&[answered_early]));
}
