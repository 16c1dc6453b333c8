//! The embedded store, the zero-setup default: one redb file under `--data-dir`.
//!
//! Reads run inline: the records written lately from memory (`overlay`), the rest on a read
//! transaction. Every write goes to one writer thread, which applies all the writes waiting for
//! it together, makes them durable with one sync of a write-ahead log (group commit), makes them
//! visible, then answers each caller: a write is durable before its RPC answers. Records reach
//! redb's B-tree once settled, a tick later, and a durable redb commit every 50 ms (a checkpoint)
//! writes the rest and lets the log start over. An
//! expiry index (expires_at, id) lets the sweeper remove expired records without scanning the
//! ledger; listing indexes (by bucket, by parent: `index`) let a listing read only the records
//! it asks for (`list`), the listing index's latest moves merged from memory (`pending`).
//!
//! redb is copy-on-write with checksummed commits, so a `kill -9` at any moment leaves the last
//! durable commit intact, and the log's checksummed, numbered frames carry everything after it;
//! that is why it was chosen (see README). Opening checks that nothing acknowledged went missing
//! meanwhile — a lost database file, a log damaged before intact frames — and refuses to start
//! otherwise, unless told to accept the loss (`recovery`).

#![warn(unreachable_pub)]

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
mod overlay;
#[cfg(test)]
mod overlay_tests;
mod pending;
mod recovery;
#[cfg(test)]
mod recovery_log_tests;
#[cfg(test)]
mod recovery_tests;
mod refusal;
mod rows;
mod scan;
mod tables;
mod wal;
mod writer;

pub use identity::ID_FILE;
use oncekey_ledger::{AttentionCounts, Millis, Record, RecordId};
use oncekey_store::{Capabilities, Cas, ListPage, ListQuery, ScanPage, Store, StoreError};
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
/// The listing index (`index`): (bucket code, id bytes) → ().
const LISTING: TableDefinition<(u8, &[u8]), ()> = TableDefinition::new("listing");
/// The children index (`index`): (parent id bytes, id bytes) → ().
const CHILDREN: TableDefinition<(&[u8], &[u8]), ()> = TableDefinition::new("children");

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
    /// The listing moves the writer has not written to the listing table yet.
    pending: Arc<pending::Pending>,
    /// The records the writer has not written to the records table yet.
    overlay: Arc<overlay::Overlay>,
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
        let pending = Arc::new(pending::Pending::default());
        let overlay = Arc::new(overlay::Overlay::default());
        let (writes, writer) = writer::spawn(
            db.clone(),
            opened.wal,
            opened.seq,
            writer::Shared {
                stats: stats.clone(),
                cache: cache.clone(),
                pending: pending.clone(),
                overlay: overlay.clone(),
            },
            options.checkpoint_every,
        )?;
        Ok(Self {
            db,
            cache,
            writes,
            writer: Some(writer),
            stats,
            pending,
            overlay,
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
        let records = self.overlay.read();
        if let Some(slot) = records.get(&key) {
            let Some(row) = slot.state.clone() else {
                return Ok(None);
            };
            drop(records);
            let record = decode(id.clone(), &row.row, row.outcome.as_deref())?;
            return Ok((!record.is_expired(now)).then_some(record));
        }
        let record = match self.cache.lookup(&key) {
            cache::Lookup::Hit(row) => {
                drop(records);
                decode(id.clone(), &row, None)?
            }
            cache::Lookup::Miss(ticket) => {
                // Opened before letting go of the overlay: what is not there is in this snapshot.
                let txn = self.db.begin_read().map_err(internal)?;
                drop(records);
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

    async fn scan(
        &self,
        after: Option<&[u8]>,
        limit: usize,
        now: Millis,
    ) -> Result<ScanPage, StoreError> {
        self.scan_ids(after, limit, now)
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
mod tests;
