//! Unit tests of the embedded store (the parent module).

use super::*;
use oncekey_engine::{Clock, Engine};
use oncekey_ledger::{ClaimArgs, RecordId, Semantics};
use std::sync::atomic::Ordering;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_claims_share_fsyncs() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Arc::new(Engine::new(
        EmbeddedStore::open(dir.path()).unwrap(),
        Clock::System,
    ));
    let before = engine.store().stats().fsyncs.load(Ordering::Relaxed);
    let args = claim_args();
    let claims: Vec<_> = (0..256)
        .map(|i| {
            let (engine, args) = (engine.clone(), args.clone());
            tokio::spawn(async move {
                let id = RecordId::new("t", "ns", format!("k{i}"));
                engine.claim(&id, &args, None).await.unwrap()
            })
        })
        .collect();
    for claim in claims {
        claim.await.unwrap();
    }
    let fsyncs = engine.store().stats().fsyncs.load(Ordering::Relaxed) - before;
    let writes = engine.store().stats().writes.load(Ordering::Relaxed);
    assert!(writes >= 256, "{writes}");
    assert!(
        fsyncs < 256,
        "256 new records took {fsyncs} fsyncs: no group commit"
    );
    // `/metrics` shows the same counts.
    let text = engine.metrics().encode();
    let value = |name: &str| -> u64 {
        let line = text.lines().find(|l| l.starts_with(name));
        let line = line.unwrap_or_else(|| panic!("no {name} in\n{text}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert!(value("oncekey_embedded_writes_total ") >= writes);
    assert!(value("oncekey_embedded_syncs_total ") >= fsyncs);
    assert_eq!(value("oncekey_embedded_write_failed "), 0);
}

pub(super) fn claim_args() -> ClaimArgs {
    ClaimArgs::for_test([1; 32], Semantics::AtLeastOnce, 30_000, 60_000, "t")
}

/// A crash image: redb's file as of its last durable commit, and the log as it is now. Opening
/// it must replay every acknowledged write the log holds.
#[tokio::test]
async fn acknowledged_writes_survive_in_the_log_alone() {
    let (live, image) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // No timed checkpoint: one would start the log over, and the image must need it all.
    let hour = std::time::Duration::from_secs(3600);
    let options = OpenOptions {
        checkpoint_every: hour,
        ..OpenOptions::default()
    };
    let store = EmbeddedStore::open_with_options(live.path(), options).unwrap();
    store.flush().await.unwrap();
    std::fs::copy(live.path().join(DB_FILE), image.path().join(DB_FILE)).unwrap();
    let engine = Engine::new(store, Clock::System);
    let ids: Vec<_> = (0..20)
        .map(|i| RecordId::new("t", "ns", format!("k{i}")))
        .collect();
    // Every other result is large enough to be stored apart from its record.
    let body = |i: usize| match i % 2 {
        0 => ids[i].key.clone().into_bytes(),
        _ => ids[i].key.repeat(10_000).into_bytes(),
    };
    for (i, id) in ids.iter().enumerate() {
        let claim = engine.claim(id, &claim_args(), None).await.unwrap();
        let token = claim.lease.unwrap().token;
        let result = oncekey_ledger::OpResult {
            code: 0,
            body: body(i),
            content_type: String::new(),
            metadata: Default::default(),
        };
        engine.complete(id, token, &result).await.unwrap();
        // A replay: its dedup hit rewrites the record and keeps the outcome.
        engine.claim(id, &claim_args(), None).await.unwrap();
    }
    engine.flush_parked_hits().await;
    let version = engine.lookup(&ids[0]).await.unwrap().version;
    let now = Clock::System.now();
    let deleted = engine.store().delete_if_version(&ids[0], version, now);
    assert!(matches!(deleted.await.unwrap(), Cas::Applied));
    std::fs::copy(
        live.path().join(wal::WAL_FILE),
        image.path().join(wal::WAL_FILE),
    )
    .unwrap();

    let reopened = EmbeddedStore::open(image.path()).unwrap();
    assert!(reopened.stats().replayed.load(Ordering::Relaxed) > 0);
    let now = Clock::System.now();
    assert!(reopened.get(&ids[0], now).await.unwrap().is_none());
    for (i, id) in ids.iter().enumerate().skip(1) {
        let record = reopened.get(id, now).await.unwrap().expect("replayed");
        assert_eq!(record.status, oncekey_ledger::Status::Succeeded);
        assert_eq!(record.dedup_hits, 1);
        assert_eq!(record.result.unwrap().body, body(i));
    }
    // The expiry index was replayed too: sweeping far in the future removes every record.
    let swept = reopened.sweep_expired(i64::MAX, 1000).await.unwrap();
    assert_eq!(swept, ids.len() - 1);
    // Replay is done once: the next open starts from redb's durable state.
    reopened.close().await.unwrap();
    drop(reopened);
    // The writer thread lets go of the file shortly after the store is dropped.
    let mut again = EmbeddedStore::open(image.path());
    for _ in 0..100 {
        if again.is_ok() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        again = EmbeddedStore::open(image.path());
    }
    let again = again.unwrap();
    assert_eq!(again.stats().replayed.load(Ordering::Relaxed), 0);
    assert!(again.get(&ids[1], now).await.unwrap().is_none());
}

/// A freshly claimed record of `id`, stored.
async fn inserted(store: &EmbeddedStore, id: &RecordId, now: Millis) -> Record {
    let record = oncekey_ledger::claim(id, None, &claim_args(), now)
        .unwrap()
        .record()
        .clone();
    let cas = store.insert_if_absent(&record, now).await.unwrap();
    assert!(matches!(cas, Cas::Applied));
    record
}

/// Reads go through the record cache: each must still see the last acknowledged write.
#[tokio::test]
async fn cached_reads_see_every_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(dir.path()).unwrap();
    let now = Clock::System.now();
    let id = RecordId::new("t", "ns", "cached");
    let mut record = inserted(&store, &id, now).await;
    for round in 0..5u64 {
        // Twice: the first read fills the cache, the second is served from it.
        for _ in 0..2 {
            let read = store.get(&id, now).await.unwrap().unwrap();
            assert_eq!(read, record, "round {round}");
            let brief = store.get_brief(&id, now).await.unwrap().unwrap();
            assert_eq!(brief.version, record.version);
            assert!(brief.history.is_empty());
        }
        let mut next = record.clone();
        next.version += 1;
        next.dedup_hits += 1;
        let cas = store.replace_if_version(&next, record.version, true, now);
        assert!(matches!(cas.await.unwrap(), Cas::Applied));
        record = next;
    }
    assert_eq!(store.get(&id, now).await.unwrap().unwrap(), record);
    let gone = store.delete_if_version(&id, record.version, now).await;
    assert!(matches!(gone.unwrap(), Cas::Applied));
    assert!(store.get(&id, now).await.unwrap().is_none());

    // Swept records leave the cache too.
    let other = RecordId::new("t", "ns", "swept");
    inserted(&store, &other, now).await;
    assert!(store.get(&other, now).await.unwrap().is_some());
    assert_eq!(store.sweep_expired(i64::MAX, 10).await.unwrap(), 1);
    assert!(store.get(&other, 0).await.unwrap().is_none());
}

oncekey_engine::store_suite!(embedded, async {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(dir.path()).unwrap();
    (store, dir)
});

/// A record stored with `expires_at`, version `version`.
fn expiring(key: &str, version: u64, expires_at: Millis) -> Record {
    let id = RecordId::new("t", "ns", key);
    let mut record = oncekey_ledger::claim(&id, None, &claim_args(), 1)
        .unwrap()
        .record()
        .clone();
    record.version = version;
    record.expires_at = Some(expires_at);
    record
}

#[tokio::test]
async fn a_sweep_goes_by_the_latest_expiry_whether_or_not_a_checkpoint_wrote_it() {
    let dir = tempfile::tempdir().unwrap();
    let options = OpenOptions {
        checkpoint_every: Duration::from_secs(3600),
        ..OpenOptions::default()
    };
    let store = EmbeddedStore::open_with_options(dir.path(), options).unwrap();
    let (early, late) = (10_000, 20_000);
    let put = |key: &'static str, version: u64, at: Millis| {
        let store = &store;
        async move {
            let record = expiring(key, version, at);
            let cas = match version {
                1 => store.insert_if_absent(&record, 1).await,
                _ => {
                    store
                        .replace_if_version(&record, version - 1, true, 1)
                        .await
                }
            };
            assert!(matches!(cas.unwrap(), Cas::Applied));
        }
    };
    // "c": its move to the late expiry written by a checkpoint.
    put("c", 1, early).await;
    put("c", 2, late).await;
    store.flush().await.unwrap();
    // "a": the table holds the early expiry, the move to the late one is in memory only.
    put("a", 1, early).await;
    store.flush().await.unwrap();
    put("a", 2, late).await;
    // "b": both moves in memory; "d": expires early, in memory.
    put("b", 1, early).await;
    put("b", 2, late).await;
    put("d", 1, early).await;
    // Between the two: only "d" is due; the early entries of the others are stale.
    assert_eq!(store.sweep_expired(early + 1, 100).await.unwrap(), 1);
    for key in ["a", "b", "c"] {
        let id = RecordId::new("t", "ns", key);
        assert!(store.get(&id, early + 1).await.unwrap().is_some(), "{key}");
    }
    assert_eq!(
        store.sweep_expired(late, 2).await.unwrap(),
        2,
        "oldest first, at most 2"
    );
    assert_eq!(store.sweep_expired(late, 100).await.unwrap(), 1);
    assert_eq!(store.sweep_expired(late, 100).await.unwrap(), 0);
    store.flush().await.unwrap();
    let txn = store.db.begin_read().unwrap();
    let expiry = txn.open_table(EXPIRY).unwrap();
    assert_eq!(redb::ReadableTableMetadata::len(&expiry).unwrap(), 0);
}

#[tokio::test]
async fn a_scan_leaves_expired_records_out_and_resumes_after_the_encoded_key() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(dir.path()).unwrap();
    let (early, late) = (10_000, 20_000);
    for (key, at) in [("a", late), ("b", early), ("c", late), ("d", early)] {
        let cas = store.insert_if_absent(&expiring(key, 1, at), 1).await;
        assert!(matches!(cas.unwrap(), Cas::Applied));
    }
    let key = |k: &str| RecordId::new("t", "ns", k);
    let all = store.scan(None, 10, early - 1).await.unwrap();
    assert_eq!(all.ids, ["a", "b", "c", "d"].map(key));
    assert_eq!(all.next, None);
    // At `early`, b and d are expired: pages of one, each cursor the last key read.
    let first = store.scan(None, 1, early).await.unwrap();
    assert_eq!(first.ids, [key("a")]);
    assert_eq!(
        first.next.as_deref(),
        Some(&codec::encode_id(&key("a"))[..])
    );
    let second = store.scan(first.next.as_deref(), 1, early).await.unwrap();
    assert_eq!(second.ids, [key("c")]);
    // A full page with a row after it has a next page, though only an expired record is left.
    let third = store.scan(second.next.as_deref(), 1, early).await.unwrap();
    assert_eq!((third.ids, third.next), (vec![], None));
    // A cursor this store did not make is refused.
    assert!(store.scan(Some(b"\x00"), 1, early).await.is_err());
}
