//! The reference `Store`: the storage contract in a few lines, records in a map in memory.
//!
//! What every backend must do, without anything a backend does to be fast or durable: no disk,
//! no log, no cache. Engine tests run on it, so they need no disk, and the store suite runs on it
//! like on every other store. Its capabilities are chosen at construction, so that tests can
//! run the engine the way it runs on each real backend (`MemoryStore::new` like the embedded
//! store, `MemoryStore::shared` like a CQL cluster several servers share).
//!
//! It keeps nothing across a restart: it is not a backend to serve with. Listing is a scan of
//! the tenant's records in id order (no index), its page cursor the last id listed; `scan` walks
//! every tenant's records in id order, its cursor the last id scanned (tenant included).

use crate::{Capabilities, Cas, ListPage, ListQuery, ScanPage, Store, StoreError};
use oncekey_ledger::{Attention, AttentionCounts, Millis, Record, RecordId};
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

/// Records in memory, behind one lock.
#[derive(Debug)]
pub struct MemoryStore {
    records: Mutex<BTreeMap<RecordId, Record>>,
    capabilities: Capabilities,
    /// Signs page tokens: random, as the store lives only as long as its process.
    page_token_key: [u8; 32],
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// A store that says what the embedded store says: one process, reads first, brief reads.
    pub fn new() -> Self {
        Self::with_capabilities(Capabilities {
            single_process: true,
            insert_returns_live: false,
            brief_reads: true,
        })
    }

    /// A store that says what a CQL cluster says: shared with other processes (so held Claims
    /// poll), inserts first, no brief reads.
    pub fn shared() -> Self {
        Self::with_capabilities(Capabilities {
            single_process: false,
            insert_returns_live: true,
            brief_reads: false,
        })
    }

    /// A store stating `capabilities`.
    pub fn with_capabilities(capabilities: Capabilities) -> Self {
        Self {
            records: Mutex::default(),
            capabilities,
            page_token_key: rand::random(),
        }
    }

    fn records(&self) -> MutexGuard<'_, BTreeMap<RecordId, Record>> {
        // A panic elsewhere never leaves a record half-written: every change is one insert or
        // remove on the map.
        self.records.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A page cursor: the namespace and key of the last record listed (the tenant is the query's),
/// the namespace's length first.
fn cursor(id: &RecordId) -> Vec<u8> {
    let ns = id.namespace.as_bytes();
    let mut out = Vec::with_capacity(4 + ns.len() + id.key.len());
    out.extend_from_slice(&(ns.len() as u32).to_be_bytes());
    out.extend_from_slice(ns);
    out.extend_from_slice(id.key.as_bytes());
    out
}

/// The id `cursor` names in `tenant`'s records.
fn after(tenant: &str, cursor: &[u8]) -> Result<RecordId, StoreError> {
    let bad = || StoreError::Internal("a page cursor this store did not make".into());
    let (len, rest) = cursor.split_first_chunk::<4>().ok_or_else(bad)?;
    let len = u32::from_be_bytes(*len) as usize;
    if rest.len() < len {
        return Err(bad());
    }
    let (ns, key) = rest.split_at(len);
    let text = |b: &[u8]| String::from_utf8(b.to_vec()).map_err(|_| bad());
    Ok(RecordId::new(tenant, text(ns)?, text(key)?))
}

/// A scan cursor: the tenant of the last id scanned, its length first, then its `cursor`.
fn scan_cursor(id: &RecordId) -> Vec<u8> {
    let tenant = id.tenant.as_bytes();
    let mut out = (tenant.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(tenant);
    out.extend(cursor(id));
    out
}

/// The id `scan_cursor` names.
fn scanned(cursor: &[u8]) -> Result<RecordId, StoreError> {
    let bad = || StoreError::Internal("a scan cursor this store did not make".into());
    let (len, rest) = cursor.split_first_chunk::<4>().ok_or_else(bad)?;
    let len = u32::from_be_bytes(*len) as usize;
    if rest.len() < len {
        return Err(bad());
    }
    let (tenant, rest) = rest.split_at(len);
    let tenant = std::str::from_utf8(tenant).map_err(|_| bad())?;
    after(tenant, rest)
}

/// The record of `id` in `records` if it is live at `now`.
fn live<'a>(
    records: &'a mut BTreeMap<RecordId, Record>,
    id: &RecordId,
    now: Millis,
) -> Option<&'a mut Record> {
    records.get_mut(id).filter(|r| !r.is_expired(now))
}

impl Store for MemoryStore {
    async fn get(&self, id: &RecordId, now: Millis) -> Result<Option<Record>, StoreError> {
        Ok(live(&mut self.records(), id, now).map(|r| r.clone()))
    }

    async fn get_brief(&self, id: &RecordId, now: Millis) -> Result<Option<Record>, StoreError> {
        let mut records = self.records();
        Ok(live(&mut records, id, now).map(|r| {
            // Copied without the history, which is not copied at all.
            let history = std::mem::take(&mut r.history);
            let brief = r.clone();
            r.history = history;
            brief
        }))
    }

    async fn insert_if_absent(&self, record: &Record, now: Millis) -> Result<Cas, StoreError> {
        let mut records = self.records();
        if let Some(current) = live(&mut records, &record.id, now) {
            return Ok(Cas::Conflict(Some(current.clone())));
        }
        records.insert(record.id.clone(), record.clone());
        Ok(Cas::Applied)
    }

    async fn replace_if_version(
        &self,
        record: &Record,
        expected_version: u64,
        durable: bool,
        now: Millis,
    ) -> Result<Cas, StoreError> {
        let mut records = self.records();
        match live(&mut records, &record.id, now) {
            Some(current) if current.version == expected_version => {
                if durable {
                    *current = record.clone();
                } else {
                    // A dedup hit's write: like the strictest backend (CQL), only the fields a
                    // hit may change are written.
                    current.version = record.version;
                    current.dedup_hits = record.dedup_hits;
                    current.history.clone_from(&record.history);
                }
                Ok(Cas::Applied)
            }
            other => Ok(Cas::Conflict(other.map(|r| r.clone()))),
        }
    }

    async fn delete_if_version(
        &self,
        id: &RecordId,
        expected_version: u64,
        now: Millis,
    ) -> Result<Cas, StoreError> {
        let mut records = self.records();
        match live(&mut records, id, now) {
            Some(current) if current.version == expected_version => {
                records.remove(id);
                Ok(Cas::Applied)
            }
            other => Ok(Cas::Conflict(other.map(|r| r.clone()))),
        }
    }

    async fn list(&self, query: ListQuery<'_>, now: Millis) -> Result<ListPage, StoreError> {
        use std::ops::Bound;
        let start = match query.after {
            Some(cursor) => Bound::Excluded(after(query.tenant, cursor)?),
            None => Bound::Included(RecordId::new(query.tenant, "", "")),
        };
        let records = self.records();
        let mut page = ListPage::default();
        for (id, record) in records.range((start, Bound::Unbounded)) {
            if id.tenant != query.tenant {
                break;
            }
            if !query.filter.matches(record, now) {
                continue;
            }
            if page.records.len() == query.limit {
                page.next = page.records.last().map(|r| cursor(&r.id));
                break;
            }
            page.records.push(Record {
                history: Vec::new(),
                ..record.clone()
            });
        }
        Ok(page)
    }

    async fn scan(
        &self,
        after: Option<&[u8]>,
        limit: usize,
        now: Millis,
    ) -> Result<ScanPage, StoreError> {
        use std::ops::Bound;
        let start = match after {
            Some(cursor) => Bound::Excluded(scanned(cursor)?),
            None => Bound::Unbounded,
        };
        let records = self.records();
        let mut page = ScanPage::default();
        // Expired records are left out; tombstones are records like any other.
        let live = records
            .range((start, Bound::Unbounded))
            .filter(|(_, r)| !r.is_expired(now));
        for (id, _) in live {
            if page.ids.len() == limit {
                page.next = page.ids.last().map(scan_cursor);
                break;
            }
            page.ids.push(id.clone());
        }
        Ok(page)
    }

    async fn attention(&self, now: Millis) -> Result<AttentionCounts, StoreError> {
        let mut counts = AttentionCounts::default();
        for why in self
            .records()
            .values()
            .filter_map(|r| Attention::of(r, now))
        {
            counts.add(why);
        }
        Ok(counts)
    }

    fn page_token_key(&self) -> [u8; 32] {
        self.page_token_key
    }

    async fn sweep_expired(&self, now: Millis, limit: usize) -> Result<usize, StoreError> {
        let mut records = self.records();
        let expired: Vec<RecordId> = records
            .values()
            .filter(|r| r.is_expired(now))
            .take(limit)
            .map(|r| r.id.clone())
            .collect();
        for id in &expired {
            records.remove(id);
        }
        Ok(expired.len())
    }

    async fn check_ready(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn capabilities(&self) -> Capabilities {
        self.capabilities
    }
}
