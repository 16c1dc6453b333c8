//! The engine against a real (embedded) store: what its shortcuts must never change.

use super::*;
use crate::ledger::{ClaimArgs, ClaimOutcome, Semantics};
use crate::store::embedded::EmbeddedStore;

fn args() -> ClaimArgs {
    ClaimArgs {
        fingerprint: [1; 32],
        lease_ttl: 60_000,
        retention: 600_000,
        semantics: Semantics::AtLeastOnce,
        owner: "here".into(),
        parent: None,
        reconcile: false,
        require_approval: false,
        max_attempts: 0,
    }
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
async fn taken_over_elsewhere(engine: &Engine<EmbeddedStore>, id: &RecordId) -> Record {
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
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::new(EmbeddedStore::open(dir.path()).unwrap(), Clock::System);

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
        engine.recent.get(&mine).is_none(),
        "settled records are forgotten"
    );
}

/// A Claim reads the record without its history; whatever it writes back whole must still carry
/// the history (the decision is made again on the whole record), while a replay's answer counts
/// every hit.
#[tokio::test]
async fn a_brief_read_never_writes_a_record_back_without_its_history() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::manual(1_000_000);
    let engine = Engine::new(EmbeddedStore::open(dir.path()).unwrap(), clock.clone());
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
    use crate::ledger::EventKind::{Claim, Complete, Takeover};
    assert_eq!(
        kinds,
        [Claim, Takeover, Complete, Claim, Claim, Claim, Claim],
        "the first Claim's receipt survived the takeover; every replay has one"
    );
}
