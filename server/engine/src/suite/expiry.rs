//! Expiry by state, through the engine, with the clock run far past the retention a record was
//! claimed with: what must stay (an unsettled at-most-once record, an at-least-once record whose
//! holder kept renewing, the gate of an abandoned gated key) and what must still go (settled
//! records).

use super::{fresh_id, T0};
use crate::{Clock, Decider, Engine, EngineError};
use oncekey_ledger::{
    ClaimArgs, ClaimOutcome, Disposition, LedgerError, Millis, OpError, OpResult, Semantics, Status,
};
use oncekey_store::Store;

/// Shorter than the API allows (a minute), so that the clock runs past it many times.
const RETENTION: Millis = 10_000;
const LEASE: Millis = 4_000;

fn args(semantics: Semantics) -> ClaimArgs {
    ClaimArgs::for_test([5; 32], semantics, LEASE, RETENTION, "suite")
}

fn result() -> OpResult {
    OpResult {
        code: 200,
        body: b"done".to_vec(),
        ..OpResult::default()
    }
}

/// An AT_MOST_ONCE record whose holder vanished is still there, answering NEEDS_RECONCILIATION
/// with its first token, a hundred retentions later (and the sweeper leaves it); once a
/// reconciler settles it, it expires like any settled record.
pub async fn expiry_keeps_an_unsettled_at_most_once_record<S: Store>(store: S) {
    let clock = Clock::manual(T0);
    let engine = Engine::new(store, clock.clone());
    let id = fresh_id("t1");
    let amo = args(Semantics::AtMostOnce);
    let first = engine.claim(&id, &amo, None).await.unwrap();
    assert_eq!(first.outcome, ClaimOutcome::Acquired);
    assert_eq!(first.record.expires_at, None);

    clock.advance(100 * RETENTION);
    engine.sweep(1000).await.unwrap();
    let stored = engine.store().get(&id, clock.now()).await.unwrap();
    assert_eq!(stored.map(|r| r.fencing_token), Some(1), "swept or expired");
    for _ in 0..2 {
        let late = engine.claim(&id, &amo, None).await.unwrap();
        assert_eq!(late.outcome, ClaimOutcome::NeedsReconciliation);
        assert_eq!(
            (late.record.status, late.record.fencing_token),
            (Status::Unknown, 1)
        );
        assert_eq!(late.record.expires_at, None);
        clock.advance(100 * RETENTION);
        engine.sweep(1000).await.unwrap();
    }

    let reconciler = ClaimArgs {
        reconcile: true,
        ..amo.clone()
    };
    let reconciling = engine.claim(&id, &reconciler, None).await.unwrap();
    assert_eq!(
        (reconciling.outcome, reconciling.lease.unwrap().token),
        (ClaimOutcome::Acquired, 2)
    );
    let done = engine.complete(&id, 2, &result()).await.unwrap();
    assert_eq!(done.expires_at, Some(clock.now() + RETENTION));
    clock.advance(RETENTION - 1);
    let replay = engine.claim(&id, &amo, None).await.unwrap();
    assert_eq!(replay.outcome, ClaimOutcome::Completed);
    clock.advance(1);
    engine.sweep(1000).await.unwrap();
    assert!(matches!(
        engine.lookup(&id).await,
        Err(EngineError::NotFound)
    ));
}

/// An AT_LEAST_ONCE holder that renews past the retention keeps its record; once its lease
/// lapses the record stays `retention` longer, so the next Claim takes it over with token 2 —
/// never token 1 again while the old holder may still act — and the old holder is refused.
pub async fn expiry_follows_a_renewing_at_least_once_holder<S: Store>(store: S) {
    let clock = Clock::manual(T0);
    let engine = Engine::new(store, clock.clone());
    let id = fresh_id("t1");
    let alo = args(Semantics::AtLeastOnce);
    engine.claim(&id, &alo, None).await.unwrap();
    let mut lease = None;
    while clock.now() < T0 + 5 * RETENTION {
        clock.advance(LEASE / 2);
        lease = Some(engine.renew(&id, 1, LEASE).await.unwrap());
    }
    let lease_end = lease.unwrap().expires_at;
    let held = engine.lookup(&id).await.unwrap();
    assert_eq!(held.expires_at, Some(lease_end + RETENTION));

    // Lapsed for almost the whole retention: still there, and taken over, not created again.
    clock.advance(lease_end + RETENTION - 1 - clock.now());
    let taken = engine.claim(&id, &alo, None).await.unwrap();
    assert_eq!(taken.outcome, ClaimOutcome::Acquired);
    assert_eq!((taken.lease.unwrap().token, taken.record.attempt), (2, 2));
    let refused = engine.complete(&id, 1, &result()).await;
    assert!(matches!(
        refused,
        Err(EngineError::Ledger(LedgerError::LeaseLost))
    ));
    engine.complete(&id, 2, &result()).await.unwrap();
}

/// Settled records still expire `retention` after they settled, however long their lease ran:
/// the key is then a new operation (the sweeper removes what the store keeps of it).
pub async fn expiry_removes_settled_records<S: Store>(store: S) {
    let clock = Clock::manual(T0);
    let engine = Engine::new(store, clock.clone());
    let error = OpError {
        code: 500,
        message: "down".into(),
        details: vec![],
    };
    for (i, disposition) in [None, Some(Disposition::Final), Some(Disposition::Retryable)]
        .into_iter()
        .enumerate()
    {
        let id = fresh_id("t1");
        let semantics = [Semantics::AtLeastOnce, Semantics::AtMostOnce][i % 2];
        let long_lease = ClaimArgs {
            lease_ttl: 20 * RETENTION,
            ..args(semantics)
        };
        engine.claim(&id, &long_lease, None).await.unwrap();
        clock.advance(1_000);
        let settled = match disposition {
            None => engine.complete(&id, 1, &result()).await.unwrap(),
            Some(d) => engine.fail(&id, 1, &error, d).await.unwrap().unwrap(),
        };
        assert_eq!(settled.expires_at, Some(clock.now() + RETENTION));
        clock.advance(RETENTION - 1);
        assert!(engine.lookup(&id).await.is_ok(), "{disposition:?}");
        clock.advance(1);
        assert!(matches!(
            engine.lookup(&id).await,
            Err(EngineError::NotFound)
        ));
        engine.sweep(1000).await.unwrap();
        let fresh = engine.claim(&id, &args(semantics), None).await.unwrap();
        assert_eq!(
            (fresh.outcome, fresh.lease.unwrap().token),
            (ClaimOutcome::Acquired, 1),
            "{disposition:?}: a new operation"
        );
    }
}

/// The ABANDON tombstone of a gated key outlives retention, however long, and sweeps: a Claim a
/// hundred retentions later that does not ask for approval still awaits it, and so does the
/// key until someone decides (its record awaiting approval does not expire either).
pub async fn expiry_keeps_the_gate_of_an_abandoned_key<S: Store>(store: S) {
    let clock = Clock::manual(T0);
    let engine = Engine::new(store, clock.clone());
    let id = fresh_id("t1");
    let plain = args(Semantics::AtLeastOnce);
    let gated = ClaimArgs {
        require_approval: true,
        ..plain.clone()
    };
    let decider = Decider {
        by: "ops",
        note: "",
        fingerprint: None,
    };
    let first = engine.claim(&id, &gated, None).await.unwrap();
    assert_eq!(first.outcome, ClaimOutcome::AwaitingApproval);
    engine.approve(&id, decider).await.unwrap();
    let acquired = engine.claim(&id, &plain, None).await.unwrap();
    assert_eq!(acquired.outcome, ClaimOutcome::Acquired);
    let error = OpError {
        code: 400,
        message: "invalid".into(),
        details: vec![],
    };
    assert!(engine
        .fail(&id, 1, &error, Disposition::Abandon)
        .await
        .unwrap()
        .is_none());
    for _ in 0..2 {
        clock.advance(100 * RETENTION);
        engine.sweep(1000).await.unwrap();
        let again = engine.claim(&id, &plain, None).await.unwrap();
        assert_eq!(again.outcome, ClaimOutcome::AwaitingApproval);
        assert_eq!(again.record.expires_at, None);
    }
    engine.approve(&id, decider).await.unwrap();
    clock.advance(100 * RETENTION);
    engine.sweep(1000).await.unwrap();
    let acquired = engine.claim(&id, &plain, None).await.unwrap();
    assert_eq!(
        (acquired.outcome, acquired.lease.unwrap().token),
        (ClaimOutcome::Acquired, 2)
    );
}
