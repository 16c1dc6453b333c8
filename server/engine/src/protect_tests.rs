//! Rekey and tenant erasure on the reference store (in memory), and on a wrapper of it that
//! answers `reseal` the way a sealing store may: re-sealed, conflicting, or unreadable.

use super::*;
use crate::{Clock, Guarded};
use oncekey_ledger::{
    AttentionCounts, ClaimArgs, ClaimOutcome, Disposition, GuardMode, IntentRule, OpError,
    OpResult, Semantics, Status, INTENT_NAMESPACE,
};
use oncekey_store::memory::MemoryStore;
use oncekey_store::{Capabilities, Cas, ListQuery, Unreadable};
use std::sync::atomic::{AtomicBool, Ordering};

const T0: Millis = 1_000_000;

fn args(fp: u8) -> ClaimArgs {
    ClaimArgs::for_test([fp; 32], Semantics::AtLeastOnce, 60_000, 600_000, "here")
}

fn id(tenant: &str, ns: &str, key: &str) -> RecordId {
    RecordId::new(tenant, ns, key)
}

/// Tenant `t`'s records in several namespaces and every kind of state: SUCCEEDED, PROCESSING
/// (its holder's token returned), unsettled AT_MOST_ONCE, AWAITING_APPROVAL, RETRY, and an
/// intent guard entry. Returns the PROCESSING record's id and token.
async fn populate<S: Store>(engine: &Engine<S>, t: &str) -> (RecordId, u64) {
    let done = id(t, "payments.charge", "p-1");
    let token = engine.claim(&done, &args(1), None).await.unwrap().lease;
    let result = OpResult {
        body: b"charged".to_vec(),
        ..OpResult::default()
    };
    engine
        .complete(&done, token.unwrap().token, &result)
        .await
        .unwrap();
    let held = id(t, "emails.send", "e-1");
    let lease = engine.claim(&held, &args(2), None).await.unwrap().lease;
    let amo = ClaimArgs {
        semantics: Semantics::AtMostOnce,
        ..args(3)
    };
    engine
        .claim(&id(t, "refunds.issue", "r-1"), &amo, None)
        .await
        .unwrap();
    let gated = ClaimArgs {
        require_approval: true,
        ..args(4)
    };
    let awaiting = engine
        .claim(&id(t, "refunds.issue", "r-2"), &gated, None)
        .await
        .unwrap();
    assert_eq!(awaiting.outcome, ClaimOutcome::AwaitingApproval);
    let retry = id(t, "emails.send", "e-2");
    let l = engine.claim(&retry, &args(5), None).await.unwrap().lease;
    let error = OpError {
        code: 503,
        message: "smtp down".into(),
        details: vec![],
    };
    engine
        .fail(&retry, l.unwrap().token, &error, Disposition::Retryable)
        .await
        .unwrap();
    let warn = IntentRule {
        mode: GuardMode::Warn,
        window: 600_000,
        repeat: false,
    };
    let guarded = engine
        .claim_guarded(&id(t, "orders.place", "o-1"), &args(6), None, 0, Some(warn))
        .await
        .unwrap();
    assert!(matches!(guarded, Guarded::Claimed { .. }));
    (held, lease.unwrap().token)
}

/// Every live record of `tenant`, the intent entries included, by id.
async fn live<S: Store>(engine: &Engine<S>, tenant: &str) -> Vec<Record> {
    let mut all = Vec::new();
    let mut after: Option<Vec<u8>> = None;
    loop {
        let page = engine.every_record(tenant, after.as_deref(), 1000).await;
        let page = page.unwrap();
        all.extend(page.records);
        match page.next {
            Some(next) => after = Some(next),
            None => return all,
        }
    }
}

fn counter(engine: &Engine<impl Store>, name: &str) -> u64 {
    let text = engine.metrics().encode();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .map_or(0, |n| n.trim().parse().unwrap())
}

#[tokio::test]
async fn erasure_purges_every_record_of_the_tenant_and_no_other() {
    let engine = Engine::new(MemoryStore::new(), Clock::manual(T0));
    let (held, token) = populate(&engine, "a").await;
    populate(&engine, "b").await;
    let theirs = live(&engine, "b").await;
    let ours = live(&engine, "a").await;
    assert_eq!(ours.len(), 7, "six records and an intent entry: {ours:?}");
    assert!(ours.iter().any(|r| r.id.namespace == INTENT_NAMESPACE));

    // A page with a cursor, then the rest without one: erased records are not listed again.
    let first = engine.erase_page("a", None, 2).await.unwrap();
    assert_eq!((first.erased, first.completed_at), (2, None));
    assert!(first.next.is_some());
    let mut erased = first.erased;
    let mut calls = 0;
    let receipt = loop {
        calls += 1;
        assert!(calls < 10, "erasure does not end");
        let page = engine.erase_page("a", None, 2).await.unwrap();
        erased += page.erased;
        if let Some(at) = page.completed_at {
            assert_eq!((page.erased, page.next), (0, None));
            break at;
        }
    };
    assert_eq!(receipt, T0);
    assert_eq!(erased, 7);
    assert!(live(&engine, "a").await.is_empty());
    for record in &ours {
        let stored = engine.store().get(&record.id, T0).await.unwrap().unwrap();
        assert_eq!(stored.status, Status::Purged, "{:?}", record.id);
        assert!(stored.result.is_none() && stored.error.is_none() && stored.history.is_empty());
        assert!(matches!(
            engine.lookup(&record.id).await,
            Err(EngineError::NotFound)
        ));
    }
    assert_eq!(live(&engine, "b").await, theirs, "tenant b is untouched");
    assert_eq!(counter(&engine, "oncekey_records_erased_total"), 7);
    assert_eq!(counter(&engine, "oncekey_tenant_erasures_total"), 1);

    // The holder still running is fenced off; the next Claim gets a higher token.
    assert!(matches!(
        engine.complete(&held, token, &OpResult::default()).await,
        Err(EngineError::Ledger(LedgerError::LeaseLost))
    ));
    let again = engine.claim(&held, &args(9), None).await.unwrap();
    assert_eq!(again.outcome, ClaimOutcome::Acquired);
    assert!(again.lease.unwrap().token > token);

    // A cursor from before finds nothing after it, and the listing is read again from the
    // start: the new record is erased before the erasure counts as complete.
    let stale = first.next.as_deref();
    let page = engine.erase_page("a", stale, 100).await.unwrap();
    assert_eq!((page.erased, page.completed_at), (1, None));
    let done = engine.erase_page("a", stale, 100).await.unwrap();
    assert_eq!((done.erased, done.completed_at), (0, Some(T0)));
    assert_eq!(counter(&engine, "oncekey_tenant_erasures_total"), 2);
}

#[tokio::test]
async fn rekey_on_a_store_that_does_not_seal_finds_every_record_current() {
    let engine = Engine::new(MemoryStore::new(), Clock::manual(T0));
    populate(&engine, "a").await;
    populate(&engine, "b").await;
    let before = live(&engine, "a").await;
    let (mut total, mut after, mut pages) = (RekeyPage::default(), None::<Vec<u8>>, 0);
    loop {
        let page = engine.rekey_page("a", after.as_deref(), 3).await.unwrap();
        pages += 1;
        assert!(page.examined <= 3);
        total.examined += page.examined;
        total.current += page.current;
        total.resealed += page.resealed;
        total.unreadable += page.unreadable;
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!((total.examined, total.current), (7, 7));
    assert_eq!((total.resealed, total.unreadable), (0, 0));
    assert_eq!(live(&engine, "a").await, before, "nothing was written");
}

/// The reference store, answering `reseal` by the key's name as a sealing store may, and once
/// `sealed_off`, failing every read of an `unreadable-*` key as unreadable.
struct Sealing {
    inner: MemoryStore,
    sealed_off: AtomicBool,
}

impl Sealing {
    fn check(&self, id: &RecordId) -> Result<(), StoreError> {
        match self.sealed_off.load(Ordering::SeqCst) && id.key.starts_with("unreadable-") {
            true => Err(StoreError::Unreadable {
                key_id: format!("k-{}", id.namespace),
                cause: Unreadable::MissingKey,
            }),
            false => Ok(()),
        }
    }
}

impl Store for Sealing {
    async fn get(&self, id: &RecordId, now: Millis) -> Result<Option<Record>, StoreError> {
        self.check(id)?;
        self.inner.get(id, now).await
    }
    async fn get_brief(&self, id: &RecordId, now: Millis) -> Result<Option<Record>, StoreError> {
        self.check(id)?;
        self.inner.get_brief(id, now).await
    }
    async fn insert_if_absent(&self, record: &Record, now: Millis) -> Result<Cas, StoreError> {
        self.inner.insert_if_absent(record, now).await
    }
    async fn replace_if_version(
        &self,
        record: &Record,
        expected: u64,
        durable: bool,
        now: Millis,
    ) -> Result<Cas, StoreError> {
        let inner = &self.inner;
        inner
            .replace_if_version(record, expected, durable, now)
            .await
    }
    async fn delete_if_version(
        &self,
        id: &RecordId,
        v: u64,
        now: Millis,
    ) -> Result<Cas, StoreError> {
        self.inner.delete_if_version(id, v, now).await
    }
    async fn list(&self, query: ListQuery<'_>, now: Millis) -> Result<ListPage, StoreError> {
        self.inner.list(query, now).await
    }
    async fn attention(&self, now: Millis) -> Result<AttentionCounts, StoreError> {
        self.inner.attention(now).await
    }
    async fn scan(
        &self,
        after: Option<&[u8]>,
        limit: usize,
        now: Millis,
    ) -> Result<ScanPage, StoreError> {
        self.inner.scan(after, limit, now).await
    }
    fn page_token_key(&self) -> [u8; 32] {
        self.inner.page_token_key()
    }
    async fn sweep_expired(&self, now: Millis, limit: usize) -> Result<usize, StoreError> {
        self.inner.sweep_expired(now, limit).await
    }
    async fn reseal(&self, id: &RecordId, now: Millis) -> Result<Reseal, StoreError> {
        self.check(id)?;
        if self.inner.get(id, now).await?.is_none() {
            return Ok(Reseal::Gone);
        }
        Ok(match id.key.split('-').next() {
            Some("old") => Reseal::Resealed {
                from: vec!["k-old".into()],
            },
            Some("busy") => Reseal::Conflict,
            _ => Reseal::Current,
        })
    }
    async fn check_ready(&self) -> Result<(), StoreError> {
        Ok(())
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
}

#[tokio::test]
async fn rekey_counts_what_the_store_resealed_and_names_the_keys_it_cannot_open() {
    let store = Sealing {
        inner: MemoryStore::new(),
        sealed_off: AtomicBool::new(false),
    };
    let engine = Engine::new(store, Clock::manual(T0));
    for (ns, key) in [
        ("a.one", "old-1"),
        ("a.one", "old-2"),
        ("a.one", "new-1"),
        ("a.two", "busy-1"),
        ("a.two", "unreadable-1"),
        ("a.two", "unreadable-2"),
        ("a.three", "unreadable-1"),
    ] {
        // Settled, so that the engine does not remember them: erasing reads each.
        let key = id("t", ns, key);
        let lease = engine.claim(&key, &args(1), None).await.unwrap().lease;
        let token = lease.unwrap().token;
        engine
            .complete(&key, token, &OpResult::default())
            .await
            .unwrap();
    }
    engine.store().sealed_off.store(true, Ordering::SeqCst);
    let page = engine.rekey_page("t", None, 100).await.unwrap();
    let want = RekeyPage {
        examined: 7,
        resealed: 2,
        current: 2,
        unreadable: 3,
        unreadable_key_ids: vec!["k-a.three".into(), "k-a.two".into()],
        next: None,
    };
    assert_eq!(page, want);
    // A conflict is tried again a few times, then left to the writers that sealed it.
    let prefix = "oncekey_store_cas_conflicts_total{op=\"reseal\"}";
    assert_eq!(counter(&engine, prefix), RESEAL_TRIES as u64);

    // Erasure does not need to open a record: unreadable ones are erased too.
    let erased = engine.erase_page("t", None, 100).await.unwrap();
    assert_eq!(erased.erased, 7);
    let done = engine.erase_page("t", None, 100).await.unwrap();
    assert_eq!(done.completed_at, Some(T0));
    let inner = &engine.store().inner;
    let stored = inner.get(&id("t", "a.two", "unreadable-1"), T0).await;
    assert_eq!(stored.unwrap().unwrap().status, Status::Purged);
}

#[tokio::test]
async fn rekey_all_covers_every_tenant_page_after_page() {
    let store = Sealing {
        inner: MemoryStore::new(),
        sealed_off: AtomicBool::new(false),
    };
    let engine = Engine::new(store, Clock::manual(T0));
    for (tenant, key) in [
        ("a", "old-1"),
        ("a", "new-1"),
        ("b", "old-2"),
        ("b", "unreadable-1"),
        ("c", "old-3"),
    ] {
        let key = id(tenant, "ns", key);
        let lease = engine.claim(&key, &args(1), None).await.unwrap().lease;
        let token = lease.unwrap().token;
        engine
            .complete(&key, token, &OpResult::default())
            .await
            .unwrap();
    }
    engine.store().sealed_off.store(true, Ordering::SeqCst);
    let (mut after, mut pages, mut total) = (None, Vec::new(), RekeyPage::default());
    loop {
        let page = engine.rekey_all_page(after.as_deref(), 2).await.unwrap();
        pages.push(page.examined);
        total.examined += page.examined;
        total.resealed += page.resealed;
        total.current += page.current;
        total.unreadable += page.unreadable;
        total.unreadable_key_ids.extend(page.unreadable_key_ids);
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert_eq!(pages, [2, 2, 1]);
    let want = RekeyPage {
        examined: 5,
        resealed: 3,
        current: 1,
        unreadable: 1,
        unreadable_key_ids: vec!["k-ns".into()],
        next: None,
    };
    assert_eq!(total, want);
    // The page that holds the last record ends the run, also when it is exactly full.
    let first = engine.rekey_all_page(None, 4).await.unwrap();
    let last = engine
        .rekey_all_page(first.next.as_deref(), 1)
        .await
        .unwrap();
    assert_eq!((last.examined, last.next), (1, None));
    assert_eq!(engine.rekey_all_page(None, 5).await.unwrap().next, None);
}
