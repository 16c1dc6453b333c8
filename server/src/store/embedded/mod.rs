//! The embedded store, the zero-setup default: one redb file under `--data-dir`.
//!
//! Reads run inline on a read transaction. Every write goes to one writer thread, which applies
//! all the writes waiting for it in one transaction, makes them durable with one sync of a
//! write-ahead log (group commit), commits, then answers each caller: a write is durable before
//! its RPC answers. A durable redb commit every 50 ms (a checkpoint) lets the log start over. An
//! expiry index (expires_at, id) lets the sweeper remove expired records without scanning the
//! ledger; listing indexes (by bucket, by parent: `index`) let a listing read only the records
//! it asks for (`list`).
//!
//! redb is copy-on-write with checksummed commits, so a `kill -9` at any moment leaves the last
//! durable commit intact, and the log's checksummed, numbered frames carry everything after it;
//! that is why it was chosen (see README). Opening checks that nothing acknowledged went missing
//! meanwhile — a lost database file, a log damaged before intact frames — and refuses to start
//! otherwise, unless told to accept the loss (`recovery`).

mod cache;
mod codec;
mod files;
mod frame;
mod identity;
mod index;
mod list;
#[cfg(test)]
mod list_tests;
mod meta;
mod metrics;
mod recovery;
#[cfg(test)]
mod recovery_tests;
mod refusal;
mod scan;
mod tables;
mod wal;
mod writer;

use crate::ledger::{AttentionCounts, Millis, Record, RecordId};
use crate::store::{Capabilities, Cas, ListPage, ListQuery, Store, StoreError};
pub use identity::ID_FILE;
pub use recovery::OpenError;
use redb::{Database, ReadableDatabase, TableDefinition};
pub use refusal::IntegrityError;
use std::path::Path;
use std::sync::{mpsc, Arc};
use std::time::Duration;
use tokio::sync::oneshot;
pub use wal::WAL_FILE;
pub use writer::Stats;
use writer::{Done, Op, Put, Request};

/// id bytes → record bytes.
const RECORDS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("records");
/// (expires_at, id bytes) → (): the sweeper's index.
const EXPIRY: TableDefinition<(i64, &[u8]), ()> = TableDefinition::new("expiry");
/// id bytes → a record's large outcome, stored apart from it (see `codec`).
const OUTCOMES: TableDefinition<&[u8], &[u8]> = TableDefinition::new("outcomes");

/// The page cache when none is given: redb's own default, 1 GiB.
pub const DEFAULT_CACHE_BYTES: usize = 1 << 30;

/// The file name of the database inside the data directory.
pub const DB_FILE: &str = "oncekey.redb";

/// A durable single-node store backed by redb.
pub struct EmbeddedStore {
    db: Arc<Database>,
    cache: Arc<cache::Cache>,
    writes: mpsc::Sender<Request>,
    /// The writer thread, joined when the store is dropped (after its final checkpoint), so that
    /// the files are let go of by then.
    writer: Option<std::thread::JoinHandle<()>>,
    stats: Arc<Stats>,
    page_token_key: [u8; 32],
}

impl Drop for EmbeddedStore {
    fn drop(&mut self) {
        // The writer stops once its only sender is gone.
        self.writes = mpsc::channel().0;
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

/// How to open the embedded store.
#[derive(Debug, Clone)]
pub struct OpenOptions {
    /// The page cache (redb's read cache and write buffer, and the record cache).
    pub cache_bytes: usize,
    /// Start even when opening finds that acknowledged writes were lost (a missing or replaced
    /// database file, a damaged log): logged at ERROR, damaged files kept aside.
    pub accept_data_loss: bool,
    /// Longest time between checkpoints while there are writes.
    pub checkpoint_every: Duration,
}

impl Default for OpenOptions {
    fn default() -> Self {
        Self {
            cache_bytes: DEFAULT_CACHE_BYTES,
            accept_data_loss: false,
            checkpoint_every: writer::CHECKPOINT_EVERY,
        }
    }
}

impl EmbeddedStore {
    /// Opens (creating if needed) the store in `data_dir` with the default page cache. Fails if
    /// another process has it open, or if opening would lose acknowledged writes.
    pub fn open(data_dir: &Path) -> Result<Self, StoreError> {
        Self::open_with_cache(data_dir, DEFAULT_CACHE_BYTES)
    }

    /// Opens the store with a page cache of `cache_bytes` (redb's read cache and write buffer).
    pub fn open_with_cache(data_dir: &Path, cache_bytes: usize) -> Result<Self, StoreError> {
        let options = OpenOptions {
            cache_bytes,
            ..OpenOptions::default()
        };
        Self::open_with_options(data_dir, options).map_err(|e| match e {
            OpenError::Refused(refusal) => StoreError::Internal(refusal.to_string()),
            OpenError::Store(e) => e,
        })
    }

    /// Opens the store with `options`; a refusal to start over lost data comes back as
    /// `OpenError::Refused`.
    pub fn open_with_options(data_dir: &Path, options: OpenOptions) -> Result<Self, OpenError> {
        std::fs::create_dir_all(data_dir).map_err(|e| {
            StoreError::Internal(format!(
                "cannot create data dir {}: {e}",
                data_dir.display()
            ))
        })?;
        // An eighth of the budget caches whole records (`cache`), the rest redb's pages.
        let records_cache = options.cache_bytes / 8;
        let mut builder = redb::Builder::new();
        builder.set_cache_size(options.cache_bytes - records_cache);
        let opened = recovery::open(data_dir, &builder, options.accept_data_loss)?;
        let page_token_key = opened.page_token_key;
        let db = Arc::new(opened.db);
        let stats = Arc::new(Stats::default());
        stats
            .replayed
            .store(opened.replayed, std::sync::atomic::Ordering::Relaxed);
        let cache = Arc::new(cache::Cache::new(records_cache));
        let (writes, writer) = writer::spawn(
            db.clone(),
            opened.wal,
            opened.seq,
            stats.clone(),
            cache.clone(),
            options.checkpoint_every,
        )?;
        Ok(Self {
            db,
            cache,
            writes,
            writer: Some(writer),
            stats,
            page_token_key,
        })
    }

    async fn submit(&self, op: Op) -> Result<Done, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.writes
            .send(Request { op, reply })
            .map_err(|_| StoreError::Unavailable("the store's writer has stopped".into()))?;
        answer
            .await
            .map_err(|_| StoreError::Unavailable("the store's writer has stopped".into()))?
    }

    /// The live record of `id` at `now`, decoded by `decode`. Records whose outcome is stored
    /// apart are never cached, so a cached row is a whole record.
    fn read(
        &self,
        id: &RecordId,
        now: Millis,
        decode: codec::Decode,
    ) -> Result<Option<Record>, StoreError> {
        let key = codec::encode_id(id);
        let record = match self.cache.lookup(&key) {
            cache::Lookup::Hit(row) => decode(id.clone(), &row, None)?,
            cache::Lookup::Miss(ticket) => {
                let txn = self.db.begin_read().map_err(internal)?;
                let table = txn.open_table(RECORDS).map_err(internal)?;
                let Some(row) = table.get(key.as_slice()).map_err(internal)? else {
                    return Ok(None);
                };
                let row = row.value();
                if codec::head(row)?.outcome_apart {
                    let outcomes = txn.open_table(OUTCOMES).map_err(internal)?;
                    let outcome = outcomes.get(key.as_slice()).map_err(internal)?;
                    decode(id.clone(), row, outcome.as_ref().map(|o| o.value()))?
                } else {
                    let record = decode(id.clone(), row, None)?;
                    self.cache.fill(&key, row, ticket);
                    record
                }
            }
        };
        Ok((!record.is_expired(now)).then_some(record))
    }

    /// Counts of writes and fsyncs so far.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Makes every write so far part of a durable redb commit (including counter-only writes);
    /// used at shutdown.
    pub async fn flush(&self) -> Result<(), StoreError> {
        self.submit(Op::Flush).await.map(|_| ())
    }

    async fn cas(&self, op: Op) -> Result<Cas, StoreError> {
        match self.submit(op).await? {
            Done::Cas(cas) => Ok(cas),
            Done::Swept(_) => Err(StoreError::Internal("unexpected writer answer".into())),
        }
    }
}

/// A redb or I/O failure as a store error.
fn internal(e: impl std::fmt::Display) -> StoreError {
    StoreError::Internal(e.to_string())
}

impl Store for EmbeddedStore {
    async fn get(&self, id: &RecordId, now: Millis) -> Result<Option<Record>, StoreError> {
        self.read(id, now, codec::decode_record)
    }

    async fn get_brief(&self, id: &RecordId, now: Millis) -> Result<Option<Record>, StoreError> {
        self.read(id, now, codec::decode_brief)
    }

    async fn insert_if_absent(&self, record: &Record, now: Millis) -> Result<Cas, StoreError> {
        self.cas(Op::Insert {
            put: Put::new(record),
            now,
        })
        .await
    }

    async fn replace_if_version(
        &self,
        record: &Record,
        expected_version: u64,
        durable: bool,
        now: Millis,
    ) -> Result<Cas, StoreError> {
        self.cas(Op::Replace {
            put: Put::new(record),
            expected_version,
            durable,
            now,
        })
        .await
    }

    async fn delete_if_version(
        &self,
        id: &RecordId,
        expected_version: u64,
        now: Millis,
    ) -> Result<Cas, StoreError> {
        self.cas(Op::Delete {
            id: id.clone(),
            expected_version,
            now,
        })
        .await
    }

    async fn list(&self, query: ListQuery<'_>, now: Millis) -> Result<ListPage, StoreError> {
        self.list_page(query, now)
    }

    async fn attention(&self, now: Millis) -> Result<AttentionCounts, StoreError> {
        self.attention_counts(now)
    }

    fn page_token_key(&self) -> [u8; 32] {
        self.page_token_key
    }

    async fn sweep_expired(&self, now: Millis, limit: usize) -> Result<usize, StoreError> {
        match self.submit(Op::Sweep { now, limit }).await? {
            Done::Swept(n) => Ok(n),
            Done::Cas(_) => Err(StoreError::Internal("unexpected writer answer".into())),
        }
    }

    async fn check_ready(&self) -> Result<(), StoreError> {
        if self.stats.broken.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(StoreError::Unavailable(
                "the embedded store failed to write; restart the server".into(),
            ));
        }
        self.db.begin_read().map(|_| ()).map_err(internal)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            single_process: true,
            insert_returns_live: false,
            // The history is decoded from its own column; a brief read skips it.
            brief_reads: true,
        }
    }

    fn collector(&self) -> Option<Box<dyn prometheus_client::collector::Collector>> {
        Some(Box::new(metrics::StatsCollector(self.stats.clone())))
    }

    async fn close(&self) -> Result<(), StoreError> {
        self.submit(Op::Close).await.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Clock, Engine};
    use crate::ledger::{ClaimArgs, RecordId, Semantics};
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

    fn claim_args() -> ClaimArgs {
        ClaimArgs {
            fingerprint: [1; 32],
            lease_ttl: 30_000,
            retention: 60_000,
            semantics: Semantics::AtLeastOnce,
            owner: "t".into(),
            parent: None,
            reconcile: false,
            require_approval: false,
            max_attempts: 0,
        }
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
            let result = crate::ledger::OpResult {
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
            assert_eq!(record.status, crate::ledger::Status::Succeeded);
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
        let record = crate::ledger::claim(id, None, &claim_args(), now)
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

    crate::store_suite!(embedded, async {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path()).unwrap();
        (store, dir)
    });
}
