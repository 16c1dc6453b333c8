//! The store suite every backend passes, run again over sealed backends (a ring with a primary
//! key: every write sealed, every read opened), and the proof that a sealed embedded store's
//! files never hold a result in clear — while an unsealed one's do, so the check can fail.

use crate::envelope_tests::k1_primary;
use crate::envelope_tests::{ring, HMAC, K1, K2};
use crate::{sealed_with, KeyRing, Sealed, Sealer};
use oncekey_ledger::{Disposition, ListFilter, OpError, OpResult, Record, RecordId, Semantics};
use oncekey_store::memory::MemoryStore;
use oncekey_store::{Cas, ListQuery, Reseal, Store};
use oncekey_store_cql::migrate::{self, MigrateConfig};
use oncekey_store_cql::{CqlConfig, CqlStore};
use oncekey_store_embedded::EmbeddedStore;
use std::collections::BTreeMap;
use std::path::Path;

fn sealer() -> Sealer {
    Sealer::new(k1_primary(""))
}

fn chacha_sealer() -> Sealer {
    Sealer::new(k1_primary("chacha20-poly1305"))
}

oncekey_engine::store_suite!(sealed_memory, async {
    (Sealed::new(MemoryStore::new(), sealer()), ())
});

oncekey_engine::store_suite!(sealed_memory_shared, async {
    (Sealed::new(MemoryStore::shared(), chacha_sealer()), ())
});

oncekey_engine::store_suite!(sealed_embedded, async {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(dir.path()).unwrap();
    (Sealed::new(store, sealer()), dir)
});

/// A CQL store on a fresh migrated keyspace of the shared test node (as the CQL store's own
/// tests make one: `oncekey_tests` finds or starts the node, and names the keyspace).
async fn fresh_cql_store() -> CqlStore {
    let node = oncekey_tests::cql_node();
    let nodes: Vec<&str> = node.split(',').collect();
    let keyspace = oncekey_tests::cql::keyspace_name();
    let config = CqlConfig::new(&nodes, &keyspace);
    let replication = migrate::parse_replication(&oncekey_tests::cql::test_replication());
    let migration = MigrateConfig {
        cql: config.clone(),
        replication: Some(replication.unwrap()),
    };
    migrate::run(&migration)
        .await
        .unwrap_or_else(|e| panic!("migrate {keyspace}: {e}"));
    CqlStore::connect(&config)
        .await
        .unwrap_or_else(|e| panic!("connect {keyspace}: {e}"))
}

oncekey_engine::store_suite!(
    #[ignore = "needs Cassandra: scripts/test cql runs it"]
    sealed_cql,
    async { (Sealed::new(fresh_cql_store().await, sealer()), ()) }
);

/// Every file under `dir`, read whole.
fn files(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files(&path));
        } else {
            let bytes = std::fs::read(&path).unwrap();
            out.push((path, bytes));
        }
    }
    out
}

/// Writes a completed and a failed record carrying `marker` in every sealable field through
/// `store`, then closes it.
async fn write_markers<S: Store>(store: S, marker: &str) {
    settled_records(&store, marker).await;
    store.close().await.unwrap();
}

/// A completed and a failed record carrying `marker` in every sealable field, written through
/// `store` by the ledger's own transitions, as read back.
async fn settled_records<S: Store>(store: &S, marker: &str) -> Vec<Record> {
    let args = oncekey_ledger::ClaimArgs::for_test(
        [3; 32],
        Semantics::AtLeastOnce,
        30_000,
        3_600_000,
        "w",
    );
    let now = 1_700_000_000_000;
    let result = OpResult {
        code: 200,
        body: format!("{{\"receipt\":\"{marker}-body\"}}").into_bytes(),
        content_type: "application/json".into(),
        metadata: BTreeMap::from([("location".into(), format!("/r/{marker}-meta"))]),
    };
    let error = OpError {
        code: 3,
        message: format!("{marker}-message"),
        details: format!("{marker}-details").into_bytes(),
    };
    let mut records = Vec::new();
    for (key, ok) in [("done", true), ("failed", false)] {
        // The key is not sealed: it must not carry the marker.
        let id = RecordId::new("t", "ns", format!("{key}-{:x}", rand_u64()));
        let claimed = oncekey_ledger::claim(&id, None, &args, now)
            .unwrap()
            .record()
            .clone();
        assert_eq!(
            store.insert_if_absent(&claimed, now).await.unwrap(),
            Cas::Applied
        );
        let token = claimed.fencing_token;
        let settled = match ok {
            true => oncekey_ledger::complete(Some(&claimed), token, &result, now + 1),
            false => {
                oncekey_ledger::fail(Some(&claimed), token, &error, Disposition::Final, now + 1)
            }
        };
        let settled = settled.unwrap().record.unwrap();
        let cas = store.replace(&settled, &claimed, true, now + 1).await;
        assert_eq!(cas.unwrap(), Cas::Applied);
        // Read back in clear.
        let read = store.get(&id, now + 2).await.unwrap().unwrap();
        assert_eq!(read, settled);
        records.push(read);
    }
    records
}

#[tokio::test]
async fn a_sealed_embedded_store_never_writes_a_result_in_clear() {
    for (sealing, ring) in [(false, KeyRing::empty()), (true, k1_primary(""))] {
        let dir = tempfile::tempdir().unwrap();
        let marker = format!("MARKER{:016x}", rand_u64());
        let store = Sealed::new(EmbeddedStore::open(dir.path()).unwrap(), Sealer::new(ring));
        write_markers(store, &marker).await;
        let files = files(dir.path());
        assert!(!files.is_empty());
        let holding: Vec<_> = files
            .iter()
            .filter(|(_, bytes)| bytes.windows(marker.len()).any(|w| w == marker.as_bytes()))
            .map(|(path, _)| path.display().to_string())
            .collect();
        match sealing {
            true => assert!(holding.is_empty(), "clear text in {holding:?}"),
            // The check can fail: without sealing the marker is on disk.
            false => assert!(!holding.is_empty(), "no file holds the marker unsealed"),
        }
    }
}

fn rand_u64() -> u64 {
    let mut bytes = [0u8; 8];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes).unwrap();
    u64::from_le_bytes(bytes)
}

/// Rotation on a real backend: written under k1, k2 made primary (k1 kept), `reseal` moves each
/// record to k2 by a compare-and-set the store accepts (version + 1, same status, same index
/// entries), then k1 is removed and everything still opens and lists.
async fn rotation_and_reseal<S: Store>(inner: S) {
    let now = 1_700_000_000_010;
    let k1 = format!("k1 {K1} primary\nnames {HMAC} hmac\n");
    let store = Sealed::new(inner, Sealer::new(ring(&k1)));
    let marker = format!("MARKER{:016x}", rand_u64());
    let records = settled_records(&store, &marker).await;
    let k2 = format!("k2 {K2} primary chacha20-poly1305\nk1 {K1}\nnames {HMAC} hmac\n");
    store.sealer().replace(ring(&k2)).unwrap();
    for record in &records {
        assert_eq!(
            store.get(&record.id, now).await.unwrap().as_ref(),
            Some(record)
        );
        let raw = store.inner().get(&record.id, now).await.unwrap().unwrap();
        assert!(sealed_with(&raw).iter().all(|k| k.as_deref() == Some("k1")));
        let outcome = store.reseal(&record.id, now).await.unwrap();
        assert_eq!(
            outcome,
            Reseal::Resealed {
                from: vec!["k1".into()]
            }
        );
        let resealed = store.inner().get(&record.id, now).await.unwrap().unwrap();
        assert!(!sealed_with(&resealed).is_empty());
        assert!(sealed_with(&resealed)
            .iter()
            .all(|k| k.as_deref() == Some("k2")));
        assert_eq!(resealed.version, raw.version + 1);
        assert_eq!(
            store.reseal(&record.id, now).await.unwrap(),
            Reseal::Current
        );
    }
    assert_eq!(store.metrics().resealed_count(), 2);
    let without_k1 = format!("k2 {K2} primary chacha20-poly1305\nnames {HMAC} hmac\n");
    store.sealer().replace(ring(&without_k1)).unwrap();
    let filter = ListFilter::default();
    let query = ListQuery {
        tenant: "t",
        filter: &filter,
        after: None,
        limit: 100,
    };
    let listed = store.list(query, now).await.unwrap().records;
    for record in &records {
        let mut expected = record.clone();
        expected.version += 1;
        assert_eq!(
            store.get(&record.id, now).await.unwrap(),
            Some(expected.clone())
        );
        let found: Vec<_> = listed.iter().filter(|r| r.id == record.id).collect();
        assert_eq!(found.len(), 1, "listed once: {:?}", record.id);
        assert_eq!(found[0].version, expected.version);
        // A listing may leave the body and details out, never show them sealed.
        if let Some(result) = &found[0].result {
            assert!(
                result.body.is_empty() || result.body == expected.result.as_ref().unwrap().body
            );
            assert_eq!(result.metadata, expected.result.as_ref().unwrap().metadata);
        }
        if let Some(error) = &found[0].error {
            assert_eq!(error.message, expected.error.as_ref().unwrap().message);
        }
    }
    assert_eq!(
        store
            .metrics()
            .unreadable_count(oncekey_store::Unreadable::MissingKey),
        0
    );
}

#[tokio::test]
async fn rotation_and_reseal_on_memory() {
    rotation_and_reseal(MemoryStore::shared()).await;
}

#[tokio::test]
async fn rotation_and_reseal_on_embedded() {
    let dir = tempfile::tempdir().unwrap();
    rotation_and_reseal(EmbeddedStore::open(dir.path()).unwrap()).await;
}

#[tokio::test]
#[ignore = "needs Cassandra: scripts/test cql runs it"]
async fn rotation_and_reseal_on_cql() {
    rotation_and_reseal(fresh_cql_store().await).await;
}
