//! The attempt cap and a holder that ran nothing (`FailRequest.nothing_ran`).

use super::*;

#[test]
fn attempt_cap_never_counts_an_acquisition_released_with_nothing_ran() {
    // max_attempts 1: the lease ran out before the holder's ACQUIRED answer arrived, so it ran
    // nothing and releases it.
    let (_, rec) = claimed(&capped(1), None, T0);
    let released = after(
        &fail_nothing_ran(
            Some(&rec),
            1,
            &error("the lease ran out before the answer arrived"),
            Disposition::Retryable,
            T0 + 10,
        )
        .unwrap(),
    );
    assert_eq!((released.status, released.attempt), (Status::Retry, 1));
    assert!(!released.attempts_exhausted());
    assert_eq!(
        (
            last(&released).outcome.as_str(),
            last(&released).reason.as_str()
        ),
        ("RETRYABLE", NOTHING_RAN)
    );
    // The same release again (its answer was lost) is OK and refunds nothing more.
    let again = fail_nothing_ran(
        Some(&released),
        1,
        &error("the lease ran out before the answer arrived"),
        Disposition::Retryable,
        T0 + 11,
    )
    .unwrap();
    assert_eq!(again.change, Change::Keep);
    // The next Claim acquires: the one attempt is still there.
    let (outcome, second) = claimed(&capped(1), Some(&released), T0 + 20);
    assert_eq!(outcome, ClaimOutcome::Acquired);
    assert_eq!((second.fencing_token, second.attempt), (2, 2));
    // That attempt, failed (it ran), is the cap's one: the next Claim fails with 429.
    let failed = after(
        &fail(
            Some(&second),
            2,
            &error("timeout"),
            Disposition::Retryable,
            T0 + 30,
        )
        .unwrap(),
    );
    let d = claim(&id(), Some(&failed), &capped(1), T0 + 40).unwrap();
    assert_eq!(d.outcome, ClaimOutcome::Failed);
    assert_eq!(
        d.record().error.as_ref().map(|e| e.code),
        Some(EXHAUSTED_CODE)
    );
}

#[test]
fn without_nothing_ran_a_release_spends_the_attempt() {
    let (_, rec) = claimed(&capped(1), None, T0);
    let released = after(
        &fail(
            Some(&rec),
            1,
            &error("released"),
            Disposition::Retryable,
            T0 + 10,
        )
        .unwrap(),
    );
    assert!(released.attempts_exhausted());
    assert_eq!(
        claim(&id(), Some(&released), &capped(1), T0 + 20)
            .unwrap()
            .outcome,
        ClaimOutcome::Failed
    );
}
