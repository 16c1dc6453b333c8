//! The listing indexes of the embedded store stay exact across what the store survives: a crash
//! (the index is rebuilt from the write-ahead log with the records), and a database written by a
//! version without them (built when it is first opened).

use super::*;
use oncekey_engine::{Clock, Engine};
use oncekey_ledger::{ClaimArgs, Disposition, ListFilter, OpError, OpResult, Semantics, Status};
use std::collections::BTreeMap;

const TENANT: &str = "acme";

fn args(semantics: Semantics) -> ClaimArgs {
    ClaimArgs {
        parent: Some(oncekey_ledger::ParentRef {
            namespace: "flows".into(),
            key: "f".into(),
        }),
        ..ClaimArgs::for_test([1; 32], semantics, 60_000, 3_600_000, "t")
    }
}

/// Records in every state: PROCESSING (both semantics), SUCCEEDED (some with a result stored
/// apart), RETRY, FAILED, and abandoned ones (tombstones, never listed).
async fn fill<S: Store>(engine: &Engine<S>, keys: std::ops::Range<usize>) {
    let error = OpError {
        code: 1,
        message: "m".into(),
        details: vec![],
    };
    for i in keys {
        let id = RecordId::new(TENANT, format!("ns{}", i % 3), format!("k{i:04}"));
        let semantics = match i % 2 {
            0 => Semantics::AtLeastOnce,
            _ => Semantics::AtMostOnce,
        };
        let token = engine.claim(&id, &args(semantics), None).await.unwrap();
        let token = token.lease.unwrap().token;
        match i % 6 {
            0 => {}
            1 => {
                let body = vec![b'x'; 8 << 10];
                let result = OpResult {
                    code: 200,
                    body,
                    ..OpResult::default()
                };
                engine.complete(&id, token, &result).await.unwrap();
            }
            2 => {
                let result = OpResult::default();
                engine.complete(&id, token, &result).await.unwrap();
            }
            3 => {
                engine
                    .fail(&id, token, &error, Disposition::Retryable)
                    .await
                    .unwrap();
            }
            4 => {
                engine
                    .fail(&id, token, &error, Disposition::Final)
                    .await
                    .unwrap();
            }
            _ => {
                engine
                    .fail(&id, token, &error, Disposition::Abandon)
                    .await
                    .unwrap();
            }
        }
    }
}

/// Every listed record's (namespace, key) → status, for each of several filters.
async fn listing<S: Store>(store: &S) -> Vec<BTreeMap<(String, String), Status>> {
    let now = Clock::System.now();
    let filters = [
        ListFilter::default(),
        ListFilter::new(None, vec![Status::Processing], None),
        ListFilter::new(
            Some("ns1".into()),
            vec![Status::Succeeded, Status::Retry],
            None,
        ),
        ListFilter::new(None, vec![Status::Failed], None),
        ListFilter::new(
            None,
            vec![],
            Some(oncekey_ledger::ParentRef {
                namespace: "flows".into(),
                key: "f".into(),
            }),
        ),
    ];
    let mut out = Vec::new();
    for filter in &filters {
        let mut seen = BTreeMap::new();
        let mut after: Option<Vec<u8>> = None;
        loop {
            let query = oncekey_store::ListQuery {
                tenant: TENANT,
                filter,
                after: after.as_deref(),
                limit: 64,
            };
            let page = store.list(query, now).await.unwrap();
            for r in page.records {
                let key = (r.id.namespace.clone(), r.id.key.clone());
                assert!(seen.insert(key, r.status).is_none(), "listed twice");
            }
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        out.push(seen);
    }
    out
}

/// What the records table itself says: every live record of `keys` but tombstones, by
/// (namespace, key) → status, read one by one without any index.
async fn truth<S: Store>(
    store: &S,
    keys: std::ops::Range<usize>,
) -> BTreeMap<(String, String), Status> {
    let now = Clock::System.now();
    let mut out = BTreeMap::new();
    for i in keys {
        let id = RecordId::new(TENANT, format!("ns{}", i % 3), format!("k{i:04}"));
        if let Some(r) = store.get(&id, now).await.unwrap() {
            if r.status != Status::Abandoned {
                out.insert((id.namespace, id.key), r.reported_status(now));
            }
        }
    }
    out
}

/// Opens the store in `dir`, waiting for a dropped store's writer to let go of the files.
async fn reopen(dir: &std::path::Path) -> EmbeddedStore {
    for _ in 0..100 {
        if let Ok(store) = EmbeddedStore::open(dir) {
            return store;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    EmbeddedStore::open(dir).unwrap()
}

#[tokio::test]
async fn the_listing_indexes_are_replayed_from_the_log_after_a_crash() {
    let (live, image) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let options = OpenOptions {
        checkpoint_every: std::time::Duration::from_secs(3600),
        ..OpenOptions::default()
    };
    let store = EmbeddedStore::open_with_options(live.path(), options).unwrap();
    let engine = Engine::new(store, Clock::System);
    // Some records are durable in redb before the crash image is taken…
    fill(&engine, 0..60).await;
    engine.store().flush().await.unwrap();
    std::fs::copy(live.path().join(DB_FILE), image.path().join(DB_FILE)).unwrap();
    // …the rest, and changes to the first ones, are in the log only.
    fill(&engine, 60..600).await;
    for i in (0..60).step_by(6) {
        let id = RecordId::new(TENANT, format!("ns{}", i % 3), format!("k{i:04}"));
        engine.complete(&id, 1, &OpResult::default()).await.unwrap();
    }
    engine.flush_parked_hits().await;
    let expected = listing(engine.store()).await;
    assert_eq!(expected[0], truth(engine.store(), 0..600).await);
    assert_eq!(expected[0].len(), 600 - 100, "tombstones are never listed");
    assert!(expected.iter().all(|m| !m.is_empty()));
    std::fs::copy(
        live.path().join(wal::WAL_FILE),
        image.path().join(wal::WAL_FILE),
    )
    .unwrap();

    let reopened = EmbeddedStore::open(image.path()).unwrap();
    assert!(
        reopened
            .stats()
            .replayed
            .load(std::sync::atomic::Ordering::Relaxed)
            > 0
    );
    let listed = listing(&reopened).await;
    assert_eq!(listed[0], truth(&reopened, 0..600).await);
    assert_eq!(listed, expected);
    assert_eq!(listing_rows(&reopened), expected_rows(&reopened));
    assert_eq!(expiry_rows(&reopened), expected_expiry(&reopened));
}

#[tokio::test]
async fn a_database_without_listing_indexes_gets_them_when_opened() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::new(EmbeddedStore::open(dir.path()).unwrap(), Clock::System);
    fill(&engine, 0..120).await;
    engine.flush_parked_hits().await;
    let expected = listing(engine.store()).await;
    let key = engine.store().page_token_key();
    engine.store().close().await.unwrap();
    drop(engine);
    // What an earlier version left: the same records, no listing tables.
    {
        let db = loop {
            match redb::Database::open(dir.path().join(DB_FILE)) {
                Ok(db) => break db,
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
            }
        };
        let txn = db.begin_write().unwrap();
        for table in ["listing", "children", "listing_meta"] {
            txn.delete_table(redb::TableDefinition::<&str, ()>::new(table))
                .unwrap();
        }
        txn.commit().unwrap();
    }
    let reopened = reopen(dir.path()).await;
    assert_eq!(expected[0], truth(&reopened, 0..120).await);
    assert_eq!(listing(&reopened).await, expected);
    assert_ne!(
        reopened.page_token_key(),
        key,
        "a new key for the new tables"
    );
    // Built once: the next open keeps the tables and the key.
    let key = reopened.page_token_key();
    reopened.close().await.unwrap();
    drop(reopened);
    let again = reopen(dir.path()).await;
    assert_eq!(again.page_token_key(), key);
    assert_eq!(listing(&again).await, expected);
}

/// The listing table's rows as stored: (bucket code, id bytes).
fn listing_rows(store: &EmbeddedStore) -> Vec<(u8, Vec<u8>)> {
    let txn = store.db.begin_read().unwrap();
    let table = txn.open_table(super::LISTING).unwrap();
    redb::ReadableTable::iter(&table)
        .unwrap()
        .map(|row| {
            let (k, _) = row.unwrap();
            let (code, key) = k.value();
            (code, key.to_vec())
        })
        .collect()
}

/// The expiry table's rows as stored: (expires_at, id bytes).
fn expiry_rows(store: &EmbeddedStore) -> Vec<(i64, Vec<u8>)> {
    let txn = store.db.begin_read().unwrap();
    let table = txn.open_table(EXPIRY).unwrap();
    redb::ReadableTable::iter(&table)
        .unwrap()
        .map(|row| {
            let (k, _) = row.unwrap();
            let (at, key) = k.value();
            (at, key.to_vec())
        })
        .collect()
}

/// What the listing table must hold for the records stored: each record's bucket.
fn expected_rows(store: &EmbeddedStore) -> Vec<(u8, Vec<u8>)> {
    let mut rows: Vec<_> = heads(store)
        .into_iter()
        .filter_map(|(key, head)| head.bucket.map(|code| (code, key)))
        .collect();
    rows.sort();
    rows
}

/// What the expiry table must hold for the records stored: each record's expires_at.
fn expected_expiry(store: &EmbeddedStore) -> Vec<(i64, Vec<u8>)> {
    let mut rows: Vec<_> = heads(store)
        .into_iter()
        .filter_map(|(key, head)| head.expires_at.map(|at| (at, key)))
        .collect();
    rows.sort();
    rows
}

/// Every stored record's id bytes and head: the records table's, with the overlay's (the
/// records not written to it yet) over them.
fn heads(store: &EmbeddedStore) -> Vec<(Vec<u8>, codec::Head)> {
    let overlay = store.overlay.read();
    let txn = store.db.begin_read().unwrap();
    let table = txn.open_table(RECORDS).unwrap();
    let mut rows: std::collections::BTreeMap<Vec<u8>, Vec<u8>> = redb::ReadableTable::iter(&table)
        .unwrap()
        .map(|row| {
            let (k, v) = row.unwrap();
            (k.value().to_vec(), v.value().to_vec())
        })
        .collect();
    for (key, slot) in overlay.iter() {
        match &slot.state {
            Some(row) => rows.insert(key.clone(), row.row.clone()),
            None => rows.remove(key),
        };
    }
    rows.into_iter()
        .map(|(k, v)| (k, codec::head(&v).unwrap()))
        .collect()
}

#[tokio::test]
async fn listing_moves_wait_in_memory_and_a_checkpoint_writes_their_net_effect() {
    let dir = tempfile::tempdir().unwrap();
    let options = OpenOptions {
        checkpoint_every: std::time::Duration::from_secs(3600),
        ..OpenOptions::default()
    };
    let engine = Engine::new(
        EmbeddedStore::open_with_options(dir.path(), options).unwrap(),
        Clock::System,
    );
    fill(&engine, 0..300).await;
    engine.flush_parked_hits().await;
    let store = engine.store();
    // The last write's moves are in memory only (a batch writes only moves a tick old), and
    // listings see them all the same; the moves of the writes before may be in the table.
    fill(&engine, 300..301).await;
    let last = |rows: Vec<(u8, Vec<u8>)>| rows.into_iter().any(|(_, k)| k.ends_with(b"k0300"));
    assert!(
        !last(listing_rows(store)),
        "the last listing move is not written yet"
    );
    assert!(last(expected_rows(store)));
    let expiry_of_last =
        |rows: Vec<(i64, Vec<u8>)>| rows.iter().any(|(_, k)| k.ends_with(b"k0300"));
    assert!(!expiry_of_last(expiry_rows(store)), "nor its expiry move");
    assert!(expiry_of_last(expected_expiry(store)));
    let listed = listing(store).await;
    assert_eq!(listed[0], truth(store, 0..301).await);
    assert!(listed[1].contains_key(&("ns0".into(), "k0300".into())));
    assert!(listed[1..].iter().all(|m| !m.is_empty()));
    store.flush().await.unwrap();
    assert_eq!(listing_rows(store), expected_rows(store));
    assert_eq!(expiry_rows(store), expected_expiry(store));
    assert_eq!(listing(store).await, listed);
    // Moves of records the table holds: settle some, abandon others, claim new ones.
    for i in (0..300).step_by(6) {
        let id = RecordId::new(TENANT, format!("ns{}", i % 3), format!("k{i:04}"));
        match i % 12 {
            0 => engine
                .complete(&id, 1, &OpResult::default())
                .await
                .map(|_| ()),
            _ => {
                let error = OpError {
                    code: 1,
                    message: "m".into(),
                    details: vec![],
                };
                let failed = engine.fail(&id, 1, &error, Disposition::Abandon).await;
                failed.map(|_| ())
            }
        }
        .unwrap();
    }
    fill(&engine, 301..360).await;
    let listed = listing(store).await;
    assert_eq!(listed[0], truth(store, 0..360).await);
    store.flush().await.unwrap();
    assert_eq!(listing_rows(store), expected_rows(store));
    assert_eq!(expiry_rows(store), expected_expiry(store));
    assert_eq!(listing(store).await, listed);
}

#[tokio::test]
async fn the_durable_first_write_after_a_clean_close_keeps_its_listing_moves() {
    let (live, image) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let options = OpenOptions {
        checkpoint_every: std::time::Duration::from_secs(3600),
        ..OpenOptions::default()
    };
    let store = EmbeddedStore::open_with_options(live.path(), options).unwrap();
    let engine = Engine::new(store, Clock::System);
    fill(&engine, 0..60).await;
    engine.store().close().await.unwrap();
    // The next write's commit is durable (a crash now is no clean shutdown), and the database
    // then holds its log frame: replay will not bring its listing move back.
    fill(&engine, 60..61).await;
    std::fs::copy(live.path().join(DB_FILE), image.path().join(DB_FILE)).unwrap();
    fill(&engine, 61..120).await;
    engine.flush_parked_hits().await;
    let expected = listing(engine.store()).await;
    assert!(expected[1].contains_key(&("ns0".into(), "k0060".into())));
    std::fs::copy(
        live.path().join(wal::WAL_FILE),
        image.path().join(wal::WAL_FILE),
    )
    .unwrap();
    let reopened = EmbeddedStore::open(image.path()).unwrap();
    let listed = listing(&reopened).await;
    assert_eq!(listed[0], truth(&reopened, 0..120).await);
    assert_eq!(listed, expected);
    assert_eq!(listing_rows(&reopened), expected_rows(&reopened));
    assert_eq!(expiry_rows(&reopened), expected_expiry(&reopened));
}
