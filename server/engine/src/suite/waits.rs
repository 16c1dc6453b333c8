//! Suite cases for Claims that `wait`, run against every store: duplicates of an in-flight
//! operation are held until it settles, whether or not the record existed when they arrived.

use super::gate::Gated;
use super::{args, fresh_id};
use crate::{Clock, Engine};
use oncekey_ledger::{ClaimOutcome, EventKind, OpResult};
use oncekey_store::Store;
use std::sync::Arc;
use std::time::Duration;

/// Eight concurrent Claims with `wait` on a key nobody holds yet: one acquires (and completes a
/// moment later), every other one is held until then and answers COMPLETED with the result; each
/// counts one dedup hit, and no Claim leaves an IN_PROGRESS receipt.
pub async fn engine_waiters_on_a_fresh_key_get_the_result<S: Store>(store: S) {
    const WAITERS: usize = 8;
    let engine = Arc::new(Engine::new(store, Clock::System));
    for round in 0..3 {
        let id = fresh_id("t1");
        let result = OpResult {
            code: 200,
            body: format!("round {round}").into_bytes(),
            ..OpResult::default()
        };
        let start = Arc::new(tokio::sync::Barrier::new(WAITERS));
        let tasks: Vec<_> = (0..WAITERS)
            .map(|_| {
                let (engine, id, start) = (engine.clone(), id.clone(), start.clone());
                let result = result.clone();
                tokio::spawn(async move {
                    start.wait().await;
                    let reply = engine.claim(&id, &args(1), Some(30_000)).await.unwrap();
                    if reply.outcome == ClaimOutcome::Acquired {
                        // Holds the operation a moment, so the others are held too.
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        let token = reply.lease.unwrap().token;
                        engine.complete(&id, token, &result).await.unwrap();
                    }
                    reply
                })
            })
            .collect();
        let mut outcomes = Vec::new();
        for task in tasks {
            let reply = task.await.unwrap();
            if reply.outcome == ClaimOutcome::Completed {
                assert_eq!(reply.record.result.as_ref(), Some(&result));
            }
            outcomes.push(reply.outcome);
        }
        let acquired = outcomes
            .iter()
            .filter(|o| **o == ClaimOutcome::Acquired)
            .count();
        let completed = outcomes
            .iter()
            .filter(|o| **o == ClaimOutcome::Completed)
            .count();
        assert_eq!(
            (acquired, completed),
            (1, WAITERS - 1),
            "round {round}: every waiter is held until the holder completes: {outcomes:?}"
        );
        // Lookup shows the hits parked and not yet written too.
        let stored = engine.lookup(&id).await.unwrap();
        assert_eq!(stored.dedup_hits, WAITERS as u64 - 1, "one hit per waiter");
        let receipts: Vec<_> = stored
            .history
            .iter()
            .filter(|e| e.kind == EventKind::Claim)
            .map(|e| e.outcome.as_str())
            .collect();
        assert_eq!(
            receipts.len(),
            WAITERS,
            "one receipt per Claim: {receipts:?}"
        );
        assert!(
            !receipts.contains(&"IN_PROGRESS"),
            "a held Claim leaves no receipt of its intermediate looks: {receipts:?}"
        );
    }
}

/// A held Claim whose looks at the record fail now and then (a store timing out under load)
/// stays held while its wait lasts: here it takes the key over once the holder's lease ends.
pub async fn engine_a_held_claim_outlives_failed_reads<S: Store>(store: S) {
    let (store, gate) = Gated::new(store);
    let engine = Arc::new(Engine::new(store, Clock::System));
    let id = fresh_id("t1");
    let mut short = args(1);
    short.lease_ttl = 600;
    let holder = engine.claim(&id, &short, None).await.unwrap();
    assert_eq!(holder.outcome, ClaimOutcome::Acquired);
    let waiter = {
        let (engine, id) = (engine.clone(), id.clone());
        tokio::spawn(async move { engine.claim(&id, &args(1), Some(30_000)).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    gate.fail_reads(3);
    let reply = waiter
        .await
        .unwrap()
        .expect("a held Claim outlives failed reads");
    assert_eq!(
        gate.reads_to_fail(),
        0,
        "the held Claim read (and failed) three times"
    );
    assert_eq!(reply.outcome, ClaimOutcome::Acquired);
    let lease = reply.lease.unwrap();
    assert_eq!((lease.token, lease.attempt), (2, 2), "taken over");
}

/// A storm of duplicates of a fresh key: one Claim acquires and every other answers IN_PROGRESS.
/// Where a Claim inserts before it reads (`insert_returns_live`: CQL, where each insert is a
/// contended LWT), the duplicates that arrive while the first Claim's insert is in flight wait
/// for it and read: one insert for the whole storm.
pub async fn engine_duplicates_of_a_fresh_key_send_one_insert<S: Store>(store: S) {
    const DUPLICATES: usize = 16;
    let insert_first = store.capabilities().insert_returns_live;
    let (store, gate) = Gated::new(store);
    let engine = Arc::new(Engine::new(store, Clock::System));
    let id = fresh_id("t1");
    let claim = || {
        let (engine, id) = (engine.clone(), id.clone());
        tokio::spawn(async move { engine.claim(&id, &args(1), None).await.unwrap().outcome })
    };
    let held = gate.arm_insert();
    let first = claim();
    held.entered.await.unwrap();
    let duplicates: Vec<_> = (0..DUPLICATES).map(|_| claim()).collect();
    // Let the duplicates arrive while the first insert is held.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let _ = held.release.send(());
    let mut outcomes = vec![first.await.unwrap()];
    for duplicate in duplicates {
        outcomes.push(duplicate.await.unwrap());
    }
    let count = |o: ClaimOutcome| outcomes.iter().filter(|x| **x == o).count();
    assert_eq!(
        (
            count(ClaimOutcome::Acquired),
            count(ClaimOutcome::InProgress)
        ),
        (1, DUPLICATES),
        "{outcomes:?}"
    );
    if insert_first {
        // The first Claim inserted, so it is the one that acquired.
        assert_eq!(outcomes[0], ClaimOutcome::Acquired);
        assert_eq!(
            gate.inserts(),
            1,
            "the duplicates read instead of inserting"
        );
    }
    let stored = engine.lookup(&id).await.unwrap();
    assert_eq!(stored.dedup_hits, DUPLICATES as u64);
}
