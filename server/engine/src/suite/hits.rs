//! Suite cases for dedup hits, which the engine parks and writes in the background: every answer
//! counts every hit answered before it, and every hit's receipt reaches the record, also while a
//! hit is being written and when the key is abandoned and claimed again before its hits are.

use super::gate::Gated;
use super::{args, fresh_id, T0};
use crate::{Clock, Engine};
use oncekey_ledger::{ClaimOutcome, Disposition, EventKind, OpError, OpResult};
use oncekey_store::Store;
use std::sync::Arc;
use std::time::Duration;

fn result() -> OpResult {
    OpResult {
        code: 200,
        body: b"done".to_vec(),
        ..OpResult::default()
    }
}

/// Claim, claim, complete, claim: the last answer counts both replays. Repeated on fresh keys,
/// with a varying pause before the Complete so that it lands at every point of the first hit's
/// background write.
pub async fn engine_answers_count_every_hit<S: Store>(store: S) {
    let engine = Engine::new(store, Clock::System);
    for round in 0..120u64 {
        let id = fresh_id("t1");
        let first = engine.claim(&id, &args(1), None).await.unwrap();
        assert_eq!(first.outcome, ClaimOutcome::Acquired);
        let second = engine.claim(&id, &args(1), None).await.unwrap();
        assert_eq!(
            (second.outcome, second.record.dedup_hits),
            (ClaimOutcome::InProgress, 1)
        );
        tokio::time::sleep(Duration::from_micros(round % 6 * 700)).await;
        engine.complete(&id, 1, &result()).await.unwrap();
        let third = engine.claim(&id, &args(1), None).await.unwrap();
        assert_eq!(
            (third.outcome, third.record.dedup_hits),
            (ClaimOutcome::Completed, 2),
            "round {round}: the answer counts every hit answered before it"
        );
    }
    engine.begin_shutdown(); // the flushes write at once, without lingering
    engine.flush_parked_hits().await;
}

/// The same sequence, made deterministic: the first hit's write is held after its read while the
/// Complete writes a new version; the last Claim sees that version, and must still count the hit
/// whose write has not landed (and will not, as it conflicts).
pub async fn engine_a_hit_being_written_is_counted<S: Store>(store: S) {
    let (store, gate) = Gated::new(store);
    let engine = Arc::new(Engine::new(store, Clock::manual(T0)));
    let id = fresh_id("t1");
    engine.claim(&id, &args(1), None).await.unwrap();
    let held = gate.arm();
    let second = engine.claim(&id, &args(1), None).await.unwrap();
    assert_eq!(second.record.dedup_hits, 1);
    held.entered.await.unwrap();
    engine.complete(&id, 1, &result()).await.unwrap();
    let third = {
        let (engine, id) = (engine.clone(), id.clone());
        tokio::spawn(async move { engine.claim(&id, &args(1), None).await.unwrap() })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let _ = held.release.send(());
    let third = third.await.unwrap();
    assert_eq!(
        (third.outcome, third.record.dedup_hits),
        (ClaimOutcome::Completed, 2)
    );
    // The third hit waits for the first, not for a linger.
    engine.flush_parked_hits().await;
    let stored = engine.store().get(&id, T0).await.unwrap().unwrap();
    assert_eq!(stored.dedup_hits, 2);
    let replays = stored.history.iter().filter(|e| e.kind == EventKind::Claim);
    assert_eq!(
        replays.count(),
        3,
        "every Claim's receipt: {:?}",
        stored.history
    );
}

/// A replay's hit is parked; before it is written the holder abandons the key and another Claim
/// creates it again (later, or within the same millisecond). The recreated record carries the
/// abandoned one's history forward, so the replay's receipt must land in it; its dedup counter
/// is the new record's own (zero).
pub async fn engine_receipts_survive_abandon_and_reclaim<S: Store>(store: S) {
    let (store, gate) = Gated::new(store);
    let clock = Clock::manual(T0);
    let engine = Engine::new(store, clock.clone());
    for same_millisecond in [false, true] {
        let id = fresh_id("t1");
        let holder = engine.claim(&id, &args(1), None).await.unwrap();
        let held = gate.arm();
        let replay = oncekey_ledger::ClaimArgs {
            owner: "replayed".into(),
            ..args(1)
        };
        let second = engine.claim(&id, &replay, None).await.unwrap();
        assert_eq!(second.outcome, ClaimOutcome::InProgress);
        held.entered.await.unwrap();
        if !same_millisecond {
            clock.advance(1);
        }
        let token = holder.lease.unwrap().token;
        let abandon = OpError::default();
        engine
            .fail(&id, token, &abandon, Disposition::Abandon)
            .await
            .unwrap();
        let again = engine.claim(&id, &args(2), None).await.unwrap();
        assert_eq!(again.outcome, ClaimOutcome::Acquired);
        assert_eq!(
            again.record.dedup_hits, 0,
            "a new record counts its own hits"
        );
        let _ = held.release.send(());
        let shown = engine.lookup(&id).await.unwrap();
        // One hit: its write does not linger behind an earlier one.
        engine.flush_parked_hits().await;
        let stored = engine.store().get(&id, clock.now()).await.unwrap().unwrap();
        for record in [&shown, &stored] {
            let receipts: Vec<_> = record
                .history
                .iter()
                .map(|e| (e.kind, e.outcome.as_str(), e.owner.as_str()))
                .collect();
            assert!(
                receipts.contains(&(EventKind::Claim, "IN_PROGRESS", "replayed")),
                "same millisecond: {same_millisecond}: the replay's receipt: {receipts:?}"
            );
            assert_eq!(receipts.len(), 4, "{receipts:?}");
            assert_eq!(record.dedup_hits, 0, "same millisecond: {same_millisecond}");
        }
    }
}
