//! Suite cases for the operator features, run against every store: the new record fields
//! persist, the approval gate (with `wait` held until decided), dry runs write nothing, the
//! attempt cap persists, and Purge continues the fencing sequence — never across tenants.

use super::{args, fresh_id, T0};
use crate::{Clock, Decider, Engine, EngineError};
use oncekey_ledger::{
    Approval, ClaimArgs, ClaimOutcome, Decision, Disposition, EventKind, LedgerError, OpError,
    OpResult, RecordId, Semantics, Status, ATTEMPTS_EXHAUSTED,
};
use oncekey_store::{Cas, Store};
use std::sync::Arc;
use std::time::Duration;

fn gated(fp: u8) -> ClaimArgs {
    ClaimArgs {
        require_approval: true,
        ..args(fp)
    }
}

fn decider<'a>(by: &'a str, note: &'a str) -> Decider<'a> {
    Decider {
        by,
        note,
        fingerprint: None,
    }
}

fn error(message: &str) -> OpError {
    OpError {
        code: 503,
        message: message.into(),
        details: vec![],
    }
}

/// Every field the operator features add, and every new status, survives a write and a read.
pub async fn operator_fields_round_trip<S: Store>(store: S) {
    let id = fresh_id("t1");
    let mut rec = oncekey_ledger::claim(&id, None, &gated(1), T0)
        .unwrap()
        .record()
        .clone();
    rec.max_attempts = 7;
    rec.reconciliations = 2;
    rec.approval = Some(Approval {
        decision: Decision::Rejected,
        decided_by: "alice@example.com".into(),
        note: "too much\nsee ticket 12".into(),
        decided_at: T0 + 5,
    });
    rec.history[0].reason = ATTEMPTS_EXHAUSTED.into();
    rec.kept_until = Some(T0 + 99_000);
    assert_eq!(
        store.insert_if_absent(&rec, T0).await.unwrap(),
        Cas::Applied
    );
    assert_eq!(store.get(&id, T0).await.unwrap(), Some(rec.clone()));
    let mut previous = rec.clone();
    for status in [Status::Approved, Status::Purged, Status::AwaitingApproval] {
        let mut next = previous.clone();
        next.version += 1;
        next.status = status;
        next.require_approval = status == Status::AwaitingApproval;
        next.approval = None;
        assert_eq!(
            store
                .replace_if_version(&next, previous.version, true, T0)
                .await
                .unwrap(),
            Cas::Applied
        );
        assert_eq!(store.get(&id, T0).await.unwrap(), Some(next.clone()));
        previous = next;
    }
}

/// A gated operation: answered AWAITING_APPROVAL until approved, then acquired with token 1;
/// a rejected one fails with 403 and the note; the decisions persist.
pub async fn engine_approval_gate<S: Store>(store: S) {
    // Each step a millisecond after the last, so that receipts have an order.
    let clock = Clock::manual(T0);
    let engine = Engine::new(store, clock.clone());
    let id = fresh_id("t1");
    for _ in 0..2 {
        clock.advance(1);
        let reply = engine.claim(&id, &gated(1), None).await.unwrap();
        assert_eq!(reply.outcome, ClaimOutcome::AwaitingApproval);
        assert!(reply.lease.is_none());
        assert_eq!(reply.record.status, Status::AwaitingApproval);
    }
    clock.advance(1);
    let approved = engine.approve(&id, decider("alice", "ok")).await.unwrap();
    assert_eq!(approved.status, Status::Approved);
    assert_eq!(approved.dedup_hits, 1, "the second Claim was a dedup hit");
    let stored = engine.store().get(&id, T0).await.unwrap().unwrap();
    let approval = stored.approval.expect("the decision persists");
    assert_eq!(
        (approval.decided_by.as_str(), approval.note.as_str()),
        ("alice", "ok")
    );
    // The same decision again is OK; the other one is not.
    assert!(engine.approve(&id, decider("bob", "")).await.is_ok());
    assert!(matches!(
        engine.reject(&id, decider("bob", "")).await,
        Err(EngineError::Ledger(LedgerError::NotAwaitingApproval))
    ));
    clock.advance(1);
    let acquired = engine.claim(&id, &args(1), None).await.unwrap();
    assert_eq!(acquired.outcome, ClaimOutcome::Acquired);
    let lease = acquired.lease.unwrap();
    assert_eq!((lease.token, lease.attempt), (1, 1));
    clock.advance(1);
    engine.complete(&id, 1, &OpResult::default()).await.unwrap();
    let kinds: Vec<_> = engine
        .lookup(&id)
        .await
        .unwrap()
        .history
        .iter()
        .map(|e| (e.kind, e.outcome.clone()))
        .collect();
    assert_eq!(
        kinds,
        [
            (EventKind::Claim, "AWAITING_APPROVAL".to_owned()),
            (EventKind::Claim, "AWAITING_APPROVAL".to_owned()),
            (EventKind::Approve, "APPROVED".to_owned()),
            (EventKind::Claim, "ACQUIRED".to_owned()),
            (EventKind::Complete, "SUCCEEDED".to_owned()),
        ]
    );

    let rejected = fresh_id("t1");
    engine.claim(&rejected, &gated(2), None).await.unwrap();
    let record = engine
        .reject(&rejected, decider("alice", "not this one"))
        .await
        .unwrap();
    assert_eq!(record.status, Status::Failed);
    let replay = engine.claim(&rejected, &args(2), None).await.unwrap();
    assert_eq!(replay.outcome, ClaimOutcome::Failed);
    let error = replay.record.error.unwrap();
    assert_eq!((error.code, error.message.as_str()), (403, "not this one"));
    // Nothing to decide on a key without a record.
    assert!(matches!(
        engine.approve(&fresh_id("t1"), decider("a", "")).await,
        Err(EngineError::Ledger(LedgerError::NotFound))
    ));
}

/// Claims with `wait` on a gated key are held until the decision, then one acquires (and
/// completes, so the others replay its result) — or all replay the rejection.
pub async fn engine_wait_is_held_until_decided<S: Store>(store: S) {
    let engine = Arc::new(Engine::new(store, Clock::System));
    let result = OpResult {
        code: 200,
        body: b"refunded".to_vec(),
        ..OpResult::default()
    };
    for approve in [true, false] {
        let id = fresh_id("t1");
        let first = engine.claim(&id, &gated(1), None).await.unwrap();
        assert_eq!(first.outcome, ClaimOutcome::AwaitingApproval);
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let (engine, id, result) = (engine.clone(), id.clone(), result.clone());
                tokio::spawn(async move {
                    let reply = engine.claim(&id, &args(1), Some(30_000)).await.unwrap();
                    if reply.outcome == ClaimOutcome::Acquired {
                        let token = reply.lease.unwrap().token;
                        engine.complete(&id, token, &result).await.unwrap();
                    }
                    reply.outcome
                })
            })
            .collect();
        // Let them be held; nothing depends on it: a Claim that arrives after the decision gets
        // the same answers.
        tokio::time::sleep(Duration::from_millis(100)).await;
        if approve {
            engine.approve(&id, decider("alice", "")).await.unwrap();
        } else {
            engine.reject(&id, decider("alice", "no")).await.unwrap();
        }
        let mut outcomes = Vec::new();
        for waiter in waiters {
            outcomes.push(waiter.await.unwrap());
        }
        let count = |o: ClaimOutcome| outcomes.iter().filter(|x| **x == o).count();
        if approve {
            assert_eq!(
                (
                    count(ClaimOutcome::Acquired),
                    count(ClaimOutcome::Completed)
                ),
                (1, 2),
                "{outcomes:?}"
            );
        } else {
            assert_eq!(count(ClaimOutcome::Failed), 3, "{outcomes:?}");
        }
    }
}

/// A dry run answers what a Claim would get and writes nothing: no record, no dedup hit, no
/// receipt.
pub async fn engine_dry_run_writes_nothing<S: Store>(store: S) {
    let engine = Engine::new(store, Clock::manual(T0));
    let id = fresh_id("t1");
    let dry = engine.dry_run(&id, &args(1)).await.unwrap();
    assert_eq!(
        (dry.outcome, dry.record.is_none()),
        (ClaimOutcome::Acquired, true)
    );
    assert_eq!(
        engine.store().get(&id, T0).await.unwrap(),
        None,
        "no record"
    );
    let dry = engine.dry_run(&id, &gated(1)).await.unwrap();
    assert_eq!(dry.outcome, ClaimOutcome::AwaitingApproval);
    assert_eq!(engine.store().get(&id, T0).await.unwrap(), None);

    engine.claim(&id, &args(1), None).await.unwrap();
    let before = engine.store().get(&id, T0).await.unwrap().unwrap();
    for _ in 0..3 {
        let dry = engine.dry_run(&id, &args(1)).await.unwrap();
        assert_eq!(dry.outcome, ClaimOutcome::InProgress);
        assert!(dry.retry_after.is_some());
        let shown = dry.record.expect("the record as stored");
        assert_eq!((shown.version, shown.dedup_hits), (before.version, 0));
    }
    assert!(matches!(
        engine.dry_run(&id, &args(2)).await,
        Err(EngineError::Ledger(LedgerError::KeyReused))
    ));
    engine.flush_parked_hits().await;
    assert_eq!(
        engine.store().get(&id, T0).await.unwrap().unwrap(),
        before,
        "nothing written"
    );
}

/// The attempt cap is stored with the record: past it, a RETRY record fails with 429.
pub async fn engine_attempt_cap_persists<S: Store>(store: S) {
    let engine = Engine::new(store, Clock::manual(T0));
    let id = fresh_id("t1");
    let capped = ClaimArgs {
        max_attempts: 2,
        ..args(1)
    };
    for token in 1..=2 {
        let reply = engine.claim(&id, &capped, None).await.unwrap();
        assert_eq!(reply.lease.unwrap().token, token);
        engine
            .fail(&id, token, &error("down"), Disposition::Retryable)
            .await
            .unwrap();
    }
    // A later Claim without the cap is still capped: the first Claim set it.
    let reply = engine.claim(&id, &args(1), None).await.unwrap();
    assert_eq!(reply.outcome, ClaimOutcome::Failed);
    let stored = engine.store().get(&id, T0).await.unwrap().unwrap();
    assert_eq!(
        (stored.status, stored.attempt, stored.max_attempts),
        (Status::Failed, 2, 2)
    );
    let error = stored.error.unwrap();
    assert_eq!(
        (error.code, error.message.as_str()),
        (429, "attempts exhausted")
    );
    let receipt = stored.history.last().unwrap();
    assert_eq!(receipt.reason, ATTEMPTS_EXHAUSTED);
}

/// Purge removes any record; the old holder gets LEASE_LOST and the next Claim a higher
/// token; an unsettled at-most-once record needs force; another tenant's key is never touched.
pub async fn engine_purge_continues_the_fencing_sequence<S: Store>(store: S) {
    let engine = Engine::new(store, Clock::manual(T0));
    let id = fresh_id("t1");
    engine.claim(&id, &args(1), None).await.unwrap();
    // Another tenant's purge of the same namespace and key finds nothing.
    let other = RecordId::new("t2", id.namespace.clone(), id.key.clone());
    assert!(matches!(
        engine.purge(&other, true).await,
        Err(EngineError::Ledger(LedgerError::NotFound))
    ));
    assert!(matches!(
        engine.approve(&other, decider("x", "")).await,
        Err(EngineError::Ledger(LedgerError::NotFound))
    ));
    assert_eq!(engine.lookup(&id).await.unwrap().status, Status::Processing);

    engine.purge(&id, false).await.unwrap();
    assert!(matches!(
        engine.lookup(&id).await,
        Err(EngineError::NotFound)
    ));
    assert!(matches!(
        engine.complete(&id, 1, &OpResult::default()).await,
        Err(EngineError::Ledger(LedgerError::LeaseLost))
    ));
    assert!(matches!(
        engine.purge(&id, false).await,
        Err(EngineError::Ledger(LedgerError::NotFound))
    ));
    let again = engine.claim(&id, &args(5), None).await.unwrap();
    assert_eq!(again.outcome, ClaimOutcome::Acquired);
    assert_eq!(again.lease.unwrap().token, 2);
    let history = engine.lookup(&id).await.unwrap().history;
    assert_eq!(history.len(), 1, "the purged history is gone");
    // The purged holder's lease keeps the key's next life (and its tokens) stored until
    // retention after that lease's end, however early the new operation settles.
    engine.complete(&id, 2, &OpResult::default()).await.unwrap();
    let done = engine.lookup(&id).await.unwrap();
    assert!(done.kept_until.is_some());
    assert_eq!(done.expires_at, done.kept_until);

    let amo = ClaimArgs {
        semantics: Semantics::AtMostOnce,
        ..args(1)
    };
    let unsettled = fresh_id("t1");
    engine.claim(&unsettled, &amo, None).await.unwrap();
    assert!(matches!(
        engine.purge(&unsettled, false).await,
        Err(EngineError::Ledger(LedgerError::UnsettledAtMostOnce))
    ));
    assert_eq!(
        engine.lookup(&unsettled).await.unwrap().status,
        Status::Processing
    );
    engine.purge(&unsettled, true).await.unwrap();
    let next = engine.claim(&unsettled, &amo, None).await.unwrap();
    assert_eq!(next.lease.unwrap().token, 2);
}
