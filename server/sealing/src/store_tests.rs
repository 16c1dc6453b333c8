//! Tests of `Sealed` over the reference store: what the inner store holds, rotation and
//! `reseal`, unreadable records (refused on reads, shown without their fields in listings,
//! counted), and reloading the ring.

use crate::envelope_tests::{full_record, k1_primary, ring, HMAC, K1, K2};
use crate::{sealed_with, KeyRing, Sealed, Sealer};
use oncekey_ledger::{ListFilter, Record, RecordId};
use oncekey_store::memory::MemoryStore;
use oncekey_store::{Cas, ListQuery, Reseal, Store, StoreError, Unreadable};

const NOW: i64 = 2_000;

fn store(ring: KeyRing) -> Sealed<MemoryStore> {
    Sealed::new(MemoryStore::new(), Sealer::new(ring))
}

fn id(key: &str) -> RecordId {
    RecordId::new("t", "ns", key)
}

async fn inserted(store: &Sealed<MemoryStore>, key: &str) -> Record {
    let record = full_record(&id(key));
    assert_eq!(
        store.insert_if_absent(&record, NOW).await.unwrap(),
        Cas::Applied
    );
    record
}

/// What the inner store holds.
async fn raw(store: &Sealed<MemoryStore>, key: &str) -> Record {
    store.inner().get(&id(key), NOW).await.unwrap().unwrap()
}

fn cause(e: StoreError) -> (String, Unreadable) {
    match e {
        StoreError::Unreadable { key_id, cause } => (key_id, cause),
        other => panic!("not unreadable: {other:?}"),
    }
}

#[tokio::test]
async fn the_store_holds_only_sealed_fields_and_readers_only_clear_ones() {
    let store = store(k1_primary(""));
    let record = inserted(&store, "a").await;
    let stored = raw(&store, "a").await;
    assert!(!format!("{stored:?}").contains("MARKER"));
    assert_eq!(sealed_with(&stored), vec![Some("k1".to_owned()); 4]);
    assert_eq!(store.get(&id("a"), NOW).await.unwrap().unwrap(), record);
    assert_eq!(
        store
            .get_brief(&id("a"), NOW)
            .await
            .unwrap()
            .unwrap()
            .result,
        record.result
    );

    // A conflicting write answers with the live record, opened.
    let cas = store.insert_if_absent(&record, NOW).await.unwrap();
    assert_eq!(cas, Cas::Conflict(Some(record.clone())));
    let cas = store
        .replace_if_version(&record, 9, true, NOW)
        .await
        .unwrap();
    assert_eq!(cas, Cas::Conflict(Some(record.clone())));
    let cas = store.delete_if_version(&id("a"), 9, NOW).await.unwrap();
    assert_eq!(cas, Cas::Conflict(Some(record.clone())));

    // `replace` seals as well.
    let mut next = record.clone();
    next.version += 1;
    next.error.as_mut().unwrap().message = "MARKER-again".into();
    assert_eq!(
        store.replace(&next, &record, true, NOW).await.unwrap(),
        Cas::Applied
    );
    assert!(!format!("{:?}", raw(&store, "a").await).contains("MARKER"));
    assert_eq!(store.get(&id("a"), NOW).await.unwrap().unwrap(), next);
}

#[tokio::test]
async fn clear_records_stay_readable_once_a_primary_key_is_configured() {
    let store = store(KeyRing::empty());
    let record = inserted(&store, "clear").await;
    assert_eq!(sealed_with(&raw(&store, "clear").await), vec![None; 4]);
    // Adding an hmac key where there was none is allowed (key privacy cannot be on without one);
    // changing or dropping it then is refused.
    let other = crate::Sealer::new(KeyRing::empty());
    other.replace(k1_primary("")).unwrap();
    other
        .replace(ring(&format!("k1 {K1} primary\n")))
        .unwrap_err();
    store
        .sealer()
        .replace(ring(&format!("k1 {K1} primary\n")))
        .unwrap();
    assert_eq!(store.get(&id("clear"), NOW).await.unwrap().unwrap(), record);
    // Rekey seals it.
    let resealed = store.reseal(&id("clear"), NOW).await.unwrap();
    assert_eq!(resealed, Reseal::Resealed { from: vec![] });
    assert_eq!(
        sealed_with(&raw(&store, "clear").await),
        vec![Some("k1".into()); 4]
    );
    assert_eq!(
        store.reseal(&id("clear"), NOW).await.unwrap(),
        Reseal::Current
    );
}

#[tokio::test]
async fn rotation_keeps_old_records_readable_and_reseal_moves_them() {
    let store = store(ring(&format!("k1 {K1} primary\nnames {HMAC} hmac\n")));
    let record = inserted(&store, "old").await;
    // k2 becomes primary; k1 stays to open what it sealed.
    let rotated = format!("k2 {K2} primary chacha20-poly1305\nk1 {K1}\nnames {HMAC} hmac\n");
    store.sealer().replace(ring(&rotated)).unwrap();
    assert_eq!(store.get(&id("old"), NOW).await.unwrap().unwrap(), record);
    let new = inserted(&store, "new").await;
    assert_eq!(
        sealed_with(&raw(&store, "new").await),
        vec![Some("k2".into()); 4]
    );

    let before = raw(&store, "old").await;
    let outcome = store.reseal(&id("old"), NOW).await.unwrap();
    assert_eq!(
        outcome,
        Reseal::Resealed {
            from: vec!["k1".into()]
        }
    );
    assert_eq!(store.metrics().resealed_count(), 1);
    let after = raw(&store, "old").await;
    assert_eq!(sealed_with(&after), vec![Some("k2".into()); 4]);
    // Only the version and the sealed fields changed.
    assert_eq!(after.version, before.version + 1);
    assert_eq!(after.updated_at, before.updated_at);
    assert_eq!(after.history, before.history);
    assert_eq!(after.status, before.status);
    assert_eq!(
        store.reseal(&id("new"), NOW).await.unwrap(),
        Reseal::Current
    );
    assert_eq!(store.reseal(&id("gone"), NOW).await.unwrap(), Reseal::Gone);

    // k1 removed: everything still opens.
    let without_k1 = format!("k2 {K2} primary chacha20-poly1305\nnames {HMAC} hmac\n");
    store.sealer().replace(ring(&without_k1)).unwrap();
    let mut expected = record.clone();
    expected.version += 1;
    assert_eq!(store.get(&id("old"), NOW).await.unwrap().unwrap(), expected);
    assert_eq!(store.get(&id("new"), NOW).await.unwrap().unwrap(), new);
    assert_eq!(store.metrics().unreadable_count(Unreadable::MissingKey), 0);
}

#[tokio::test]
async fn reseal_without_a_primary_changes_nothing_and_a_mixed_record_is_resealed() {
    let store = store(ring(&format!("k1 {K1}\nk2 {K2} primary\n")));
    inserted(&store, "a").await;
    // One field under k2 (current), one in clear, one under k1.
    let mut mixed = raw(&store, "a").await;
    let k1 = ring(&format!("k1 {K1} primary\n"));
    let mut under_k1 = full_record(&id("a"));
    crate::seal_record(&k1, &mut under_k1);
    mixed.error = under_k1.error.clone();
    mixed.error.as_mut().unwrap().message = "clear message".into();
    let cas = store
        .inner()
        .replace_if_version(&mixed, mixed.version, true, NOW)
        .await;
    assert_eq!(cas.unwrap(), Cas::Applied);
    let used = sealed_with(&raw(&store, "a").await);
    assert_eq!(
        used,
        [
            Some("k2".into()),
            Some("k2".into()),
            None,
            Some("k1".into())
        ]
    );
    let outcome = store.reseal(&id("a"), NOW).await.unwrap();
    assert_eq!(
        outcome,
        Reseal::Resealed {
            from: vec!["k2".into(), "k1".into()]
        }
    );
    let read = store.get(&id("a"), NOW).await.unwrap().unwrap();
    assert_eq!(read.error.unwrap().message, "clear message");

    store
        .sealer()
        .replace(ring(&format!("k1 {K1}\nk2 {K2}\n")))
        .unwrap();
    let before = raw(&store, "a").await;
    assert_eq!(store.reseal(&id("a"), NOW).await.unwrap(), Reseal::Current);
    assert_eq!(raw(&store, "a").await, before);
}

#[tokio::test]
async fn reads_of_an_unreadable_record_fail_and_are_counted() {
    let store = store(k1_primary(""));
    let record = inserted(&store, "a").await;
    inserted(&store, "b").await;
    // "b" altered in place.
    let mut altered = raw(&store, "b").await;
    altered.error.as_mut().unwrap().details[30] ^= 1;
    let cas = store
        .inner()
        .replace_if_version(&altered, altered.version, true, NOW)
        .await;
    assert_eq!(cas.unwrap(), Cas::Applied);
    // k1 gone: "a" cannot be opened.
    store
        .sealer()
        .replace(ring(&format!("k2 {K2} primary\nnames {HMAC} hmac\n")))
        .unwrap();

    let missing = ("k1".to_owned(), Unreadable::MissingKey);
    assert_eq!(cause(store.get(&id("a"), NOW).await.unwrap_err()), missing);
    assert_eq!(
        cause(store.get_brief(&id("a"), NOW).await.unwrap_err()),
        missing
    );
    let e = store.insert_if_absent(&record, NOW).await.unwrap_err();
    assert_eq!(cause(e), missing);
    let e = store
        .replace_if_version(&record, 99, true, NOW)
        .await
        .unwrap_err();
    assert_eq!(cause(e), missing);
    let e = store
        .delete_if_version(&id("a"), 99, NOW)
        .await
        .unwrap_err();
    assert_eq!(cause(e), missing);
    assert_eq!(
        cause(store.reseal(&id("a"), NOW).await.unwrap_err()),
        missing
    );
    assert_eq!(store.metrics().unreadable_count(Unreadable::MissingKey), 6);

    // The listing shows both, without what it cannot open, and never fails.
    let filter = ListFilter::default();
    let query = ListQuery {
        tenant: "t",
        filter: &filter,
        after: None,
        limit: 10,
    };
    let page = store.list(query, NOW).await.unwrap();
    assert_eq!(page.records.len(), 2);
    let a = &page.records[0];
    assert_eq!(a.id, id("a"));
    let result = a.result.as_ref().unwrap();
    assert!(result.body.is_empty() && result.metadata.is_empty());
    assert_eq!(
        (result.code, result.content_type.as_str()),
        (201, "application/json")
    );
    let error = a.error.as_ref().unwrap();
    assert!(error.message.is_empty() && error.details.is_empty());
    assert_eq!(error.code, 7);
    // "b" is under k1 too, so nothing of it opens either; put k1 back and only its details fail.
    store
        .sealer()
        .replace(ring(&format!("k1 {K1} primary\nnames {HMAC} hmac\n")))
        .unwrap();
    let page = store.list(query, NOW).await.unwrap();
    let b = &page.records[1];
    assert_eq!(b.result, record_b_result());
    assert_eq!(
        b.error.as_ref().unwrap().message,
        "card MARKER-message declined"
    );
    assert!(b.error.as_ref().unwrap().details.is_empty());
    assert_eq!(store.metrics().unreadable_count(Unreadable::Tampered), 1);
    assert_eq!(store.metrics().unreadable_count(Unreadable::MissingKey), 8);
    let e = store.get(&id("b"), NOW).await.unwrap_err();
    assert_eq!(cause(e), ("k1".to_owned(), Unreadable::Tampered));

    // The counters as `/metrics` shows them.
    let mut registry = prometheus_client::registry::Registry::with_prefix("oncekey");
    registry.register_collector(store.metrics().collector());
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    assert!(
        text.contains("oncekey_unreadable_records_total{cause=\"missing_key\"} 8"),
        "{text}"
    );
    assert!(
        text.contains("oncekey_unreadable_records_total{cause=\"tampered\"} 2"),
        "{text}"
    );
    assert!(text.contains("oncekey_records_resealed_total 0"), "{text}");
}

fn record_b_result() -> Option<oncekey_ledger::OpResult> {
    full_record(&id("b")).result
}

#[test]
fn a_ring_with_another_hmac_key_is_refused_and_the_old_one_kept() {
    let sealer = Sealer::new(k1_primary(""));
    let hashed = sealer.hash_key("t", "ns", "k").unwrap();
    for refused in [
        format!("k1 {K1} primary\nnames {K1} hmac\n"),
        format!("k1 {K1} primary\nother {HMAC} hmac\n"),
        format!("k1 {K1} primary\nnames {HMAC}\n"),
    ] {
        let e = sealer.replace(ring(&refused)).unwrap_err();
        assert!(e.contains("hmac key") && e.contains("unreachable"), "{e}");
        assert!(!e.contains(HMAC) && !e.contains(K1), "{e}");
        assert_eq!(sealer.ring().primary_id(), Some("k1"));
        assert_eq!(sealer.hash_key("t", "ns", "k").unwrap(), hashed);
    }
    // Another primary with the same hmac key is taken, by every clone of the handle.
    let clone = sealer.clone();
    sealer
        .replace(ring(&format!("k9 {K2} primary\nnames {HMAC} hmac\n")))
        .unwrap();
    assert_eq!(clone.ring().primary_id(), Some("k9"));
    assert_eq!(clone.hash_key("t", "ns", "k").unwrap(), hashed);
}
