//! Tests of the CQL store's listing index against a real node (see `tests` for the node): a
//! server that dies between a new record's lightweight transaction and its index rows loses no
//! record from the listings or the needs-attention counts (`pending`).

use super::cql_tests::*;
use super::*;
use oncekey_engine::{Clock, Engine, EngineError};
use oncekey_ledger::{ClaimArgs, ClaimOutcome, ListFilter, Semantics, Status};
use oncekey_store::ListQuery;

/// Where a `Dying` store's server dies in `insert_if_absent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DiesAt {
    /// After the record's LWT applied, before its index rows: the window the intent covers.
    AfterInsert,
    /// Before the LWT (its intent written): no record, an intent to give up.
    BeforeInsert,
}

/// A test-only wrapper: the CQL store of a server that dies inside `insert_if_absent`, at `at`.
/// What it wrote until then stays written; its caller hears an error (a dead server answers
/// nothing). Every other call goes to the store unchanged.
struct Dying {
    inner: CqlStore,
    at: DiesAt,
}

impl Store for Dying {
    async fn get(&self, id: &RecordId, now: Millis) -> Result<Option<Record>, StoreError> {
        self.inner.get(id, now).await
    }

    async fn get_brief(&self, id: &RecordId, now: Millis) -> Result<Option<Record>, StoreError> {
        self.inner.get_brief(id, now).await
    }

    async fn insert_if_absent(&self, record: &Record, now: Millis) -> Result<Cas, StoreError> {
        // The steps of `CqlStore::insert_if_absent`, up to the fault.
        self.inner.put_intent(record, now).await?;
        if self.at == DiesAt::AfterInsert {
            let cas = self.inner.insert_record(record, now).await?;
            assert_eq!(cas, Cas::Applied, "a fresh key");
        }
        Err(StoreError::Unavailable("the server died here".into()))
    }

    async fn replace_if_version(
        &self,
        record: &Record,
        expected_version: u64,
        durable: bool,
        now: Millis,
    ) -> Result<Cas, StoreError> {
        self.inner
            .replace_if_version(record, expected_version, durable, now)
            .await
    }

    async fn delete_if_version(
        &self,
        id: &RecordId,
        expected_version: u64,
        now: Millis,
    ) -> Result<Cas, StoreError> {
        self.inner
            .delete_if_version(id, expected_version, now)
            .await
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

    async fn check_ready(&self) -> Result<(), StoreError> {
        self.inner.check_ready().await
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
}

const LEASE: Millis = 1_000;

fn at_most_once() -> ClaimArgs {
    ClaimArgs::for_test([3; 32], Semantics::AtMostOnce, LEASE, 3_600_000, "worker-1")
}

/// The ids `engine` lists for `tenant` under `status` (every page).
async fn listed<S: Store>(engine: &Engine<S>, tenant: &str, status: Status) -> Vec<RecordId> {
    let filter = ListFilter::new(None, vec![status], None);
    let mut ids = Vec::new();
    let mut after: Option<Vec<u8>> = None;
    loop {
        let page = engine
            .list(tenant, &filter, after.as_deref(), 100)
            .await
            .unwrap();
        ids.extend(page.records.into_iter().map(|r| r.id));
        match page.next {
            Some(next) => after = Some(next),
            None => return ids,
        }
    }
}

/// Intent rows left in the keyspace (every shard).
async fn intents_left(store: &CqlStore, keyspace: &str) -> usize {
    let mut left = 0;
    for shard in 0..index::SHARDS {
        let result = store
            .session()
            .query_unpaged(
                format!(
                    "SELECT key FROM {keyspace}.records_by_status \
                     WHERE scope = ? AND bucket = ? AND shard = ?"
                ),
                (index::SHARED_SCOPE, pending::PENDING_BUCKET, shard),
            )
            .await
            .unwrap();
        left += result.into_rows_result().unwrap().rows_num();
    }
    left
}

#[tokio::test]
#[ignore = "needs Cassandra: scripts/test cql runs it"]
async fn a_record_whose_server_died_before_its_index_rows_is_listed_unknown_and_counted() {
    let (store, keyspace) = fresh_store().await;
    let clock = Clock::manual(now_ms());
    let tenant = format!("t-{}", rand::random::<u32>());
    let id = RecordId::new(tenant.clone(), "cql.index", "charge-1");
    let dying = Engine::new(
        Dying {
            inner: store.clone(),
            at: DiesAt::AfterInsert,
        },
        clock.clone(),
    );
    let died = dying.claim(&id, &at_most_once(), None).await;
    assert!(
        matches!(died, Err(EngineError::Store(StoreError::Unavailable(_)))),
        "{died:?}"
    );
    // The LWT applied: the at-most-once record is there, its holder gone.
    let stored = store.get(&id, clock.now()).await.unwrap().expect("stored");
    assert_eq!(stored.status, Status::Processing);

    // Another server, once the lease lapsed: its needs-attention pass (every 5 s in `serve`)
    // counts the record, and the reconciliation queue lists it.
    let server = Engine::new(store.clone(), clock.clone());
    clock.advance(LEASE + pending::PENDING_GRACE_MS);
    let counts = server.attention().await.unwrap();
    assert_eq!(counts.unknown, 1, "{counts:?}");
    assert_eq!(
        listed(&server, &tenant, Status::Unknown).await,
        vec![id.clone()]
    );
    // The intent is resolved: deleted, in the background.
    for _ in 0..50 {
        if intents_left(&store, &keyspace).await == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(intents_left(&store, &keyspace).await, 0);
    // And the next pass counts it again, once.
    assert_eq!(server.attention().await.unwrap().unknown, 1);
}

#[tokio::test]
#[ignore = "needs Cassandra: scripts/test cql runs it"]
async fn intents_of_inserts_that_never_ran_are_given_up_and_answered_ones_deleted() {
    let (store, keyspace) = fresh_store().await;
    let clock = Clock::manual(now_ms());
    let tenant = format!("t-{}", rand::random::<u32>());
    let never = RecordId::new(tenant.clone(), "cql.index", "never");
    let dying = Engine::new(
        Dying {
            inner: store.clone(),
            at: DiesAt::BeforeInsert,
        },
        clock.clone(),
    );
    assert!(dying.claim(&never, &at_most_once(), None).await.is_err());
    assert_eq!(intents_left(&store, &keyspace).await, 1);
    let server = Engine::new(store.clone(), clock.clone());
    // Young, and then absent but not yet stale: kept (its insert may still be in flight).
    clock.advance(pending::PENDING_GRACE_MS);
    assert_eq!(
        server.attention().await.unwrap(),
        AttentionCounts::default()
    );
    assert_eq!(intents_left(&store, &keyspace).await, 1);
    // Stale and still absent at SERIAL: given up, nothing listed.
    clock.advance(index::STALE_AFTER_MS);
    assert_eq!(
        server.attention().await.unwrap(),
        AttentionCounts::default()
    );
    let mut left = 1;
    for _ in 0..50 {
        left = intents_left(&store, &keyspace).await;
        if left == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(left, 0, "a stale intent without its record is deleted");
    assert!(store.get(&never, clock.now()).await.unwrap().is_none());

    // A healthy server's Claims, fresh and repeated, leave no intent behind.
    let key = RecordId::new(tenant.clone(), "cql.index", "healthy");
    let first = server.claim(&key, &at_most_once(), None).await.unwrap();
    let again = server.claim(&key, &at_most_once(), None).await.unwrap();
    assert_eq!(first.outcome, ClaimOutcome::Acquired);
    assert_eq!(again.outcome, ClaimOutcome::InProgress);
    for _ in 0..50 {
        left = intents_left(&store, &keyspace).await;
        if left == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(left, 0, "answered inserts delete their intents");
    assert_eq!(
        listed(&server, &tenant, Status::Processing).await,
        vec![key]
    );
}
