//! The engine against the reference store (in memory): what its shortcuts must never change.

use super::*;
use oncekey_ledger::{ClaimArgs, ClaimOutcome, Semantics, Status};
use oncekey_store::memory::MemoryStore;
use oncekey_store::{Capabilities, Cas};

fn args() -> ClaimArgs {
    ClaimArgs::for_test([1; 32], Semantics::AtLeastOnce, 60_000, 600_000, "here")
}

fn result() -> OpResult {
    OpResult {
        code: 0,
        body: b"done".to_vec(),
        content_type: String::new(),
        metadata: Default::default(),
    }
}

/// Another server takes the lease over behind this engine's back: the store now holds token 2
/// while this engine still remembers token 1.
async fn taken_over_elsewhere(engine: &Engine<MemoryStore>, id: &RecordId) -> Record {
    let claimed = engine.claim(id, &args(), None).await.unwrap().record;
    let mut theirs = claimed.clone();
    theirs.fencing_token = 2;
    theirs.attempt = 2;
    theirs.lease_owner = "elsewhere".into();
    theirs.version = claimed.version + 1;
    let cas = engine
        .store()
        .replace_if_version(&theirs, claimed.version, true, engine.clock().now())
        .await
        .unwrap();
    assert!(matches!(cas, Cas::Applied));
    theirs
}

#[tokio::test]
async fn a_stale_remembered_record_never_decides_alone() {
    let engine = Engine::new(MemoryStore::new(), Clock::System);

    // The old holder's Complete is decided on the remembered record, and its conditional
    // write finds the newer one: LEASE_LOST, nothing written.
    let old = RecordId::new("t", "ns", "old-holder");
    let theirs = taken_over_elsewhere(&engine, &old).await;
    let refused = engine.complete(&old, 1, &result()).await;
    assert!(matches!(
        refused,
        Err(EngineError::Ledger(LedgerError::LeaseLost))
    ));
    let stored = engine.store().get(&old, engine.clock().now()).await;
    assert_eq!(stored.unwrap().unwrap(), theirs);

    // The new holder's Complete would be refused by the remembered record (token 1): that
    // refusal is checked against the store, where token 2 is the holder.
    let new = RecordId::new("t", "ns", "new-holder");
    taken_over_elsewhere(&engine, &new).await;
    let done = engine.complete(&new, 2, &result()).await.unwrap();
    assert_eq!(done.status, Status::Succeeded);
    assert_eq!(done.fencing_token, 2);

    // The common case: the holder completes what this engine remembers, in one write.
    let mine = RecordId::new("t", "ns", "mine");
    let claimed = engine.claim(&mine, &args(), None).await.unwrap();
    let token = claimed.lease.unwrap().token;
    let done = engine.complete(&mine, token, &result()).await.unwrap();
    assert_eq!(done.version, claimed.record.version + 1);
    assert!(
        engine.core.recent.get(&mine).is_none(),
        "settled records are forgotten"
    );
}

/// A Claim reads the record without its history; whatever it writes back whole must still carry
/// the history (the decision is made again on the whole record), while a replay's answer counts
/// every hit.
#[tokio::test]
async fn a_brief_read_never_writes_a_record_back_without_its_history() {
    let clock = Clock::manual(1_000_000);
    let engine = Engine::new(MemoryStore::new(), clock.clone());
    let id = RecordId::new("t", "ns", "taken-over");
    let first = engine.claim(&id, &args(), None).await.unwrap();
    assert_eq!(first.outcome, ClaimOutcome::Acquired);
    clock.advance(args().lease_ttl + 1);
    let takeover = engine.claim(&id, &args(), None).await.unwrap();
    assert_eq!(takeover.outcome, ClaimOutcome::Acquired);
    let token = takeover.lease.unwrap().token;
    assert_eq!(token, 2);
    engine.complete(&id, token, &result()).await.unwrap();
    for _ in 0..3 {
        let replay = engine.claim(&id, &args(), None).await.unwrap();
        assert_eq!(replay.outcome, ClaimOutcome::Completed);
    }
    let shown = engine.claim(&id, &args(), None).await.unwrap().record;
    assert_eq!(shown.dedup_hits, 4);
    let kinds: Vec<_> = engine
        .lookup(&id)
        .await
        .unwrap()
        .history
        .iter()
        .map(|e| e.kind)
        .collect();
    use oncekey_ledger::EventKind::{Claim, Complete, Takeover};
    assert_eq!(
        kinds,
        [Claim, Takeover, Complete, Claim, Claim, Claim, Claim],
        "the first Claim's receipt survived the takeover; every replay has one"
    );
}

/// How many store operations `op` the engine's metrics counted.
fn store_ops(engine: &Engine<MemoryStore>, op: &str) -> u64 {
    let prefix = format!("oncekey_store_operation_duration_seconds_count{{op=\"{op}\"}} ");
    let text = engine.metrics().encode();
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map_or(0, |n| n.trim().parse().unwrap())
}

fn takeovers(engine: &Engine<MemoryStore>) -> u64 {
    let text = engine.metrics().encode();
    text.lines()
        .find_map(|l| l.strip_prefix("oncekey_lease_takeovers_total "))
        .map_or(0, |n| n.trim().parse().unwrap())
}

/// The takeover counter follows the ledger's receipt: an expired AT_LEAST_ONCE lease taken over
/// counts, an AT_MOST_ONCE operation acquired to reconcile it does not (whether it was still
/// PROCESSING or already UNKNOWN).
#[tokio::test]
async fn only_an_at_least_once_takeover_counts_as_a_takeover() {
    let clock = Clock::manual(1_000_000);
    let engine = Engine::new(MemoryStore::new(), clock.clone());
    let amo = ClaimArgs {
        semantics: Semantics::AtMostOnce,
        ..args()
    };
    let reconcile = ClaimArgs {
        reconcile: true,
        ..amo.clone()
    };
    for (key, needs_reconciliation_first) in [("amo-processing", false), ("amo-unknown", true)] {
        let id = RecordId::new("t", "ns", key);
        engine.claim(&id, &amo, None).await.unwrap();
        clock.advance(amo.lease_ttl + 1);
        if needs_reconciliation_first {
            let late = engine.claim(&id, &amo, None).await.unwrap();
            assert_eq!(late.outcome, ClaimOutcome::NeedsReconciliation);
        }
        let reconciled = engine.claim(&id, &reconcile, None).await.unwrap();
        assert_eq!(reconciled.outcome, ClaimOutcome::Acquired);
        assert_eq!(takeovers(&engine), 0, "{key}: a reconciliation");
    }

    let id = RecordId::new("t", "ns", "alo");
    engine.claim(&id, &args(), None).await.unwrap();
    clock.advance(args().lease_ttl + 1);
    let taken = engine.claim(&id, &args(), None).await.unwrap();
    assert_eq!(taken.outcome, ClaimOutcome::Acquired);
    assert_eq!(takeovers(&engine), 1);
    let history = engine.lookup(&id).await.unwrap().history;
    assert_eq!(
        history.last().unwrap().kind,
        oncekey_ledger::EventKind::Takeover
    );
}

/// The engine runs a Claim the way the store's capabilities say: a store whose failed insert
/// returns the live record is never read before a Claim; another is read first, briefly where
/// it says brief reads cost less, and whole again only when the decision rewrites the record.
#[tokio::test]
async fn claims_follow_the_store_capabilities() {
    let clock = Clock::manual(1_000_000);
    let shared = Engine::new(MemoryStore::shared(), clock.clone());
    let id = RecordId::new("t", "ns", "insert-first");
    assert_eq!(
        shared.claim(&id, &args(), None).await.unwrap().outcome,
        ClaimOutcome::Acquired
    );
    assert_eq!(
        shared.claim(&id, &args(), None).await.unwrap().outcome,
        ClaimOutcome::InProgress
    );
    assert_eq!(
        (store_ops(&shared, "get"), store_ops(&shared, "insert")),
        (0, 2),
        "the failed insert answered the second Claim"
    );

    for brief_reads in [true, false] {
        let store = MemoryStore::with_capabilities(Capabilities {
            single_process: true,
            insert_returns_live: false,
            brief_reads,
        });
        let engine = Engine::new(store, clock.clone());
        let id = RecordId::new("t", "ns", "read-first");
        let token = engine.claim(&id, &args(), None).await.unwrap();
        let token = token.lease.unwrap().token;
        let retry = OpError::default();
        engine
            .fail(&id, token, &retry, Disposition::Retryable)
            .await
            .unwrap();
        assert_eq!(store_ops(&engine, "get"), 1, "brief reads: {brief_reads}");
        // Acquiring the RETRY record rewrites it whole: a brief read is read again whole.
        let again = engine.claim(&id, &args(), None).await.unwrap();
        assert_eq!(again.outcome, ClaimOutcome::Acquired);
        let reads = if brief_reads { 3 } else { 2 };
        assert_eq!(
            store_ops(&engine, "get"),
            reads,
            "brief reads: {brief_reads}"
        );
        assert_eq!(engine.lookup(&id).await.unwrap().history.len(), 3);
    }
}

/// A dedup hit's background write runs through the same loop as every request's write: it is
/// timed like any store operation and, here, lands in the store with the hit's receipt.
#[tokio::test]
async fn a_dedup_hit_write_is_a_store_operation_like_any_other() {
    let engine = Engine::new(MemoryStore::new(), Clock::manual(1_000_000));
    let id = RecordId::new("t", "ns", "replayed");
    let token = engine.claim(&id, &args(), None).await.unwrap();
    engine
        .complete(&id, token.lease.unwrap().token, &result())
        .await
        .unwrap();
    assert_eq!(store_ops(&engine, "replace"), 1);
    let replay = engine.claim(&id, &args(), None).await.unwrap();
    assert_eq!(
        (replay.outcome, replay.record.dedup_hits),
        (ClaimOutcome::Completed, 1)
    );
    engine.begin_shutdown(); // the flush writes at once, without lingering
    engine.flush_parked_hits().await;
    assert_eq!(store_ops(&engine, "replace"), 2, "the hit's write");
    let stored = engine.store().get(&id, engine.clock().now()).await;
    let stored = stored.unwrap().unwrap();
    assert_eq!(stored.dedup_hits, 1);
    assert_eq!(stored.history.last().unwrap().outcome, "COMPLETED");
}

/// A lease granted while the clock ran a day ahead, and a Claim held by `wait` once the clock is
/// back: the held Claim shortens the lease to its length from now (without it, it would sleep
/// until the clock caught up), and takes the operation over once that has passed.
#[tokio::test]
async fn a_held_claim_shortens_a_lease_granted_ahead_of_the_clock_and_takes_it_over() {
    const DAY: Millis = 86_400_000;
    let t0: Millis = 1_000 * DAY;
    let clock = Clock::manual(t0 + DAY);
    let engine = Arc::new(Engine::new(MemoryStore::default(), clock.clone()));
    let id = RecordId::new("t", "ns", "ahead");
    let short = ClaimArgs {
        lease_ttl: 200,
        ..args()
    };
    assert_eq!(
        engine.claim(&id, &short, None).await.unwrap().outcome,
        ClaimOutcome::Acquired
    );
    clock.advance(-DAY);
    let held = {
        let (engine, id, short) = (engine.clone(), id.clone(), short.clone());
        tokio::spawn(async move { engine.claim(&id, &short, Some(60_000)).await })
    };
    // The held Claim writes the shortened lease, and nothing else.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let stored = engine.store().get(&id, clock.now()).await.unwrap().unwrap();
        if stored.lease_expires_at == Some(t0 + 200) {
            assert_eq!((stored.fencing_token, stored.dedup_hits), (1, 0));
            break;
        }
        assert!(Instant::now() < deadline, "the lease was never shortened");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    clock.advance(200);
    let reply = held.await.unwrap().unwrap();
    assert_eq!(
        (reply.outcome, reply.lease.map(|l| l.token)),
        (ClaimOutcome::Acquired, Some(2))
    );
}
