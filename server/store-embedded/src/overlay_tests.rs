//! The overlay (`overlay`) seen from outside: records wait in memory, every read sees them, and
//! they reach the records table once settled or at a checkpoint.

use super::*;
use crate::tests::claim_args;
use oncekey_ledger::{ListFilter, RecordId};
use redb::ReadableDatabase;

/// The record row the records table itself holds under `id`.
fn in_table(store: &EmbeddedStore, id: &RecordId) -> Option<codec::Head> {
    let txn = store.db.begin_read().unwrap();
    let table = txn.open_table(RECORDS).unwrap();
    let row = table.get(codec::encode_id(id).as_slice()).unwrap();
    row.map(|row| codec::head(row.value()).unwrap())
}

fn in_overlay(store: &EmbeddedStore, id: &RecordId) -> bool {
    store.overlay.read().contains_key(&codec::encode_id(id))
}

async fn listed_keys(store: &EmbeddedStore, now: Millis) -> Vec<String> {
    let filter = ListFilter::default();
    let query = ListQuery {
        tenant: "t",
        filter: &filter,
        after: None,
        limit: 100,
    };
    let page = store.list(query, now).await.unwrap();
    page.records.into_iter().map(|r| r.id.key).collect()
}

async fn scanned_keys(store: &EmbeddedStore, now: Millis) -> Vec<String> {
    let page = store.scan(None, 100, now).await.unwrap();
    let ours = page.ids.into_iter().filter(|id| id.tenant == "t");
    ours.map(|id| id.key).collect()
}

#[tokio::test]
async fn records_wait_in_memory_and_reach_the_table_once_settled() {
    let dir = tempfile::tempdir().unwrap();
    let options = OpenOptions {
        checkpoint_every: std::time::Duration::from_secs(3600),
        ..OpenOptions::default()
    };
    let store = EmbeddedStore::open_with_options(dir.path(), options).unwrap();
    let now = oncekey_engine::Clock::System.now();
    let id = |k: &str| RecordId::new("t", "ns", k);
    let claim = |k: &str| {
        oncekey_ledger::claim(&id(k), None, &claim_args(), now)
            .unwrap()
            .record()
            .clone()
    };
    let (a, b) = (claim("a"), claim("b"));
    for record in [&a, &b] {
        let cas = store.insert_if_absent(record, now).await.unwrap();
        assert!(matches!(cas, Cas::Applied));
    }
    // Acknowledged, in memory only, and seen by every read.
    assert!(in_table(&store, &a.id).is_none() && in_overlay(&store, &a.id));
    assert_eq!(store.get(&a.id, now).await.unwrap().as_ref(), Some(&a));
    assert_eq!(listed_keys(&store, now).await, ["a", "b"]);
    assert_eq!(scanned_keys(&store, now).await, ["a", "b"]);
    let mut a2 = a.clone();
    a2.version += 1;
    a2.dedup_hits = 3;
    let cas = store.replace_if_version(&a2, a.version, true, now).await;
    assert!(matches!(cas.unwrap(), Cas::Applied));
    // A refused write is answered from the overlay's record.
    let stale = store.replace_if_version(&a2, a.version, true, now).await;
    assert!(matches!(stale.unwrap(), Cas::Conflict(Some(r)) if r == a2));

    // Unchanged for a whole tick, they go into the table with a later batch (another tenant's
    // writes move the ticks on).
    for i in 0.. {
        assert!(i < 20, "the records never settled");
        std::thread::sleep(pending::TICK * 2);
        let other = RecordId::new("u", "ns", format!("x{i}"));
        let filler = oncekey_ledger::claim(&other, None, &claim_args(), now).unwrap();
        store.insert_if_absent(filler.record(), now).await.unwrap();
        if !in_overlay(&store, &a.id) {
            break;
        }
    }
    let c = claim("c");
    assert!(matches!(
        store.insert_if_absent(&c, now).await.unwrap(),
        Cas::Applied
    ));
    assert_eq!(in_table(&store, &a.id).map(|h| h.version), Some(a2.version));
    assert!(!in_overlay(&store, &a.id) && !in_overlay(&store, &b.id));
    assert!(in_table(&store, &c.id).is_none() && in_overlay(&store, &c.id));
    assert_eq!(store.get(&a.id, now).await.unwrap(), Some(a2.clone()));

    // A removal hides the table's row until it reaches the table too.
    let gone = store.delete_if_version(&b.id, b.version, now).await;
    assert!(matches!(gone.unwrap(), Cas::Applied));
    assert!(in_table(&store, &b.id).is_some());
    assert!(store.get(&b.id, now).await.unwrap().is_none());
    assert_eq!(listed_keys(&store, now).await, ["a", "c"]);
    assert_eq!(scanned_keys(&store, now).await, ["a", "c"]);

    // A checkpoint writes the rest and empties the overlay.
    store.flush().await.unwrap();
    assert!(store.overlay.read().is_empty());
    assert!(in_table(&store, &b.id).is_none());
    assert_eq!(in_table(&store, &c.id).map(|h| h.version), Some(c.version));
    assert_eq!(listed_keys(&store, now).await, ["a", "c"]);
}
