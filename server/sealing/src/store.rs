//! `Sealed<S>`: encryption at rest as a `Store` wrapper. Every record written is sealed with the
//! current ring's primary key before `S` sees it (`fields::seal_record`), every record read is
//! opened again before the caller sees it, so the engine and the ledger only ever handle clear
//! records and the store only ever holds sealed ones (docs/api.md#encryption-at-rest).
//!
//! A read that cannot be opened is `StoreError::Unreadable` — never garbage — except in a listing,
//! where the record is shown without the fields that cannot be opened. Both are counted
//! (`metrics`). `reseal` writes a record again under the primary key, by compare-and-set with
//! only its version and sealed fields changed (`oncekey rekey`).
//!
//! The wrapper decides nothing about records: which writes happen, and when, is the engine's.

use crate::fields::{open_record, open_record_lenient, seal_record, sealed_with};
use crate::keyring::KeyRing;
use crate::metrics::SealingMetrics;
use crate::sealer::Sealer;
use oncekey_ledger::{AttentionCounts, Millis, Record, RecordId};
use oncekey_store::{Capabilities, Cas, ListPage, ListQuery, Reseal, ScanPage, Store, StoreError};
use std::borrow::Cow;

/// A store whose records are sealed at rest.
pub struct Sealed<S> {
    inner: S,
    sealer: Sealer,
    metrics: SealingMetrics,
}

impl<S> Sealed<S> {
    /// `inner`, sealing with the rings of `sealer`.
    pub fn new(inner: S, sealer: Sealer) -> Self {
        Self {
            inner,
            sealer,
            metrics: SealingMetrics::default(),
        }
    }

    /// The wrapped store: what it returns is sealed.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// The key ring handle this store seals with.
    pub fn sealer(&self) -> &Sealer {
        &self.sealer
    }

    /// This wrapper's counters. `Store::collector` can carry only the inner store's metrics (a
    /// prometheus-client collector cannot hand its encoder to a second one): register these
    /// beside it (`SealingMetrics::collector` or `register`).
    pub fn metrics(&self) -> &SealingMetrics {
        &self.metrics
    }

    /// `record` sealed with `ring`'s primary key: a sealed copy, or the record itself when there
    /// is no primary key (nothing is sealed, nothing copied).
    fn sealed<'a>(ring: &KeyRing, record: &'a Record) -> Cow<'a, Record> {
        if ring.primary_id().is_none() {
            return Cow::Borrowed(record);
        }
        let mut sealed = record.clone();
        seal_record(ring, &mut sealed);
        Cow::Owned(sealed)
    }

    /// `record` opened with `ring`; a failure is counted.
    fn open(&self, ring: &KeyRing, mut record: Record) -> Result<Record, StoreError> {
        open_record(ring, &mut record).map_err(|e| self.counted(e))?;
        Ok(record)
    }

    fn open_option(
        &self,
        ring: &KeyRing,
        record: Option<Record>,
    ) -> Result<Option<Record>, StoreError> {
        record.map(|r| self.open(ring, r)).transpose()
    }

    /// A write's answer with the conflicting record opened.
    fn open_cas(&self, ring: &KeyRing, cas: Cas) -> Result<Cas, StoreError> {
        Ok(match cas {
            Cas::Applied => Cas::Applied,
            Cas::Conflict(live) => Cas::Conflict(self.open_option(ring, live)?),
        })
    }

    fn counted(&self, e: StoreError) -> StoreError {
        if let StoreError::Unreadable { cause, .. } = &e {
            self.metrics.unreadable(*cause);
        }
        e
    }
}

impl<S: Store> Store for Sealed<S> {
    async fn get(&self, id: &RecordId, now: Millis) -> Result<Option<Record>, StoreError> {
        let stored = self.inner.get(id, now).await?;
        self.open_option(&self.sealer.ring(), stored)
    }

    async fn get_brief(&self, id: &RecordId, now: Millis) -> Result<Option<Record>, StoreError> {
        let stored = self.inner.get_brief(id, now).await?;
        self.open_option(&self.sealer.ring(), stored)
    }

    async fn get_lenient(&self, id: &RecordId, now: Millis) -> Result<Option<Record>, StoreError> {
        let mut stored = self.inner.get(id, now).await?;
        if let Some(record) = stored.as_mut() {
            if let Some(StoreError::Unreadable { cause, .. }) =
                open_record_lenient(&self.sealer.ring(), record)
            {
                self.metrics.unreadable(cause);
            }
        }
        Ok(stored)
    }

    async fn insert_if_absent(&self, record: &Record, now: Millis) -> Result<Cas, StoreError> {
        let ring = self.sealer.ring();
        let sealed = Self::sealed(&ring, record);
        let cas = self.inner.insert_if_absent(&sealed, now).await?;
        self.open_cas(&ring, cas)
    }

    async fn replace_if_version(
        &self,
        record: &Record,
        expected_version: u64,
        durable: bool,
        now: Millis,
    ) -> Result<Cas, StoreError> {
        // Sealed even when `durable` is false: a store may write the whole record then (the
        // embedded store does).
        let ring = self.sealer.ring();
        let sealed = Self::sealed(&ring, record);
        let cas = self
            .inner
            .replace_if_version(&sealed, expected_version, durable, now)
            .await?;
        self.open_cas(&ring, cas)
    }

    async fn replace(
        &self,
        record: &Record,
        previous: &Record,
        durable: bool,
        now: Millis,
    ) -> Result<Cas, StoreError> {
        // `previous` is passed on as read, opened: the stores read only its version and what
        // it was indexed under (status, semantics, parent; the CQL store's `left_behind`), none
        // of which sealing changes.
        let ring = self.sealer.ring();
        let sealed = Self::sealed(&ring, record);
        let cas = self.inner.replace(&sealed, previous, durable, now).await?;
        self.open_cas(&ring, cas)
    }

    async fn delete_if_version(
        &self,
        id: &RecordId,
        expected_version: u64,
        now: Millis,
    ) -> Result<Cas, StoreError> {
        let cas = self
            .inner
            .delete_if_version(id, expected_version, now)
            .await?;
        self.open_cas(&self.sealer.ring(), cas)
    }

    async fn list(&self, query: ListQuery<'_>, now: Millis) -> Result<ListPage, StoreError> {
        let mut page = self.inner.list(query, now).await?;
        let ring = self.sealer.ring();
        for record in &mut page.records {
            if let Some(e) = open_record_lenient(&ring, record) {
                self.counted(e);
            }
        }
        Ok(page)
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
        let ring = self.sealer.ring();
        // Whole: the write below replaces the whole record, history included.
        let Some(raw) = self.inner.get(id, now).await? else {
            return Ok(Reseal::Gone);
        };
        let Some(primary) = ring.primary_id() else {
            return Ok(Reseal::Current);
        };
        let used = sealed_with(&raw);
        if used.iter().all(|key| key.as_deref() == Some(primary)) {
            return Ok(Reseal::Current);
        }
        let mut from: Vec<String> = Vec::new();
        for key in used.into_iter().flatten() {
            if !from.contains(&key) {
                from.push(key);
            }
        }
        let mut next = self.open(&ring, raw.clone())?;
        seal_record(&ring, &mut next);
        // Like the ledger's `next_version`, but nothing else changes: not `updated_at`, not the
        // history. The stores accept any new version with the same status.
        next.version = raw.version + 1;
        match self.inner.replace(&next, &raw, true, now).await? {
            Cas::Applied => {
                self.metrics.resealed();
                Ok(Reseal::Resealed { from })
            }
            Cas::Conflict(_) => Ok(Reseal::Conflict),
        }
    }

    async fn check_ready(&self) -> Result<(), StoreError> {
        self.inner.check_ready().await
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    async fn close(&self) -> Result<(), StoreError> {
        self.inner.close().await
    }

    /// The inner store's collector only: see `Sealed::metrics` for this wrapper's counters.
    fn collector(&self) -> Option<Box<dyn prometheus_client::collector::Collector>> {
        self.inner.collector()
    }
}

impl<S: std::fmt::Debug> std::fmt::Debug for Sealed<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealed")
            .field("inner", &self.inner)
            .field("sealer", &self.sealer)
            .finish_non_exhaustive()
    }
}
