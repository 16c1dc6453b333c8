//! Data protection over a whole tenant (docs/api.md, "Rekey" and "Tenant erasure"): one page of
//! the tenant's live records at a time — every namespace and listed status, the intent guard's
//! index entries included — each record re-sealed with the key ring's primary key
//! (`rekey_page`) or purged as by a forced Purge (`erase_page`). A dev-mode Rekey re-seals every
//! tenant's records (`rekey_all_page`), a page of the store's cross-tenant scan at a time.
//!
//! Both go by the store's listing, so both resume from a page's cursor and are safe to run again
//! from the start: a record already under the primary key is only read, and an erased record is
//! a Purge tombstone, which no listing shows (so erasure continues from any cursor, or none).
//! Erasure is complete on the call whose listing, read from the start, finds no live record of
//! the tenant at all: that call, and only it, has a completion time (the API's receipt). The
//! call that erases the last page does not: one more call confirms that nothing is left.

use super::list::Shown;
use super::rounds::Basis;
use super::{Engine, EngineError};
use oncekey_ledger::{LedgerError, ListFilter, Millis, Record, RecordId};
use oncekey_store::{ListPage, Reseal, ScanPage, Store, StoreError, MAX_PAGE};
use std::collections::BTreeSet;
use std::time::Instant;

/// How many times a record whose re-sealing conflicted is tried: after that it counts as
/// current, since the writes that changed it meanwhile sealed it with the primary key.
const RESEAL_TRIES: usize = 4;

/// What `Engine::rekey_page` did to one page.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RekeyPage {
    /// Records looked at: `resealed + current + unreadable`.
    pub examined: u32,
    /// Written again under the primary key.
    pub resealed: u32,
    /// Already under the primary key, with nothing to seal, or gone meanwhile.
    pub current: u32,
    /// Could not be opened.
    pub unreadable: u32,
    /// The key ids the unreadable records name, sorted, without repeats.
    pub unreadable_key_ids: Vec<String>,
    /// Where the next page starts; `None` when the tenant (or, for `rekey_all_page`, the
    /// store) is done.
    pub next: Option<Vec<u8>>,
}

/// What `Engine::erase_page` did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ErasePage {
    /// Records this call erased.
    pub erased: u32,
    /// Where the next page starts; `None` when the listing ended (one more call, from the
    /// start, confirms that nothing is left unless `completed_at` is set).
    pub next: Option<Vec<u8>>,
    /// Set when this call found no live record of the tenant at all: the erasure is complete.
    pub completed_at: Option<Millis>,
}

impl<S: Store> Engine<S> {
    /// Re-seals one page of `tenant`'s live records after `after` (a previous page's `next`),
    /// at most `limit` (1..=1000) of them, each by `Store::reseal`. A record that cannot be
    /// opened is counted with its key id; any other store failure fails the page.
    pub async fn rekey_page(
        &self,
        tenant: &str,
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<RekeyPage, EngineError> {
        let page = self.every_record(tenant, after, limit).await?;
        let ids = page.records.into_iter().map(|r| r.id);
        self.reseal_each(ids, page.next).await
    }

    /// `rekey_page` over every tenant's records (`Store::scan`): for a server whose callers may
    /// name any tenant anyway (dev mode). `after` is a previous page's `next`; at most `limit`
    /// (1..=1000) records. Like a listing, the page that holds the last record has no `next`,
    /// also when it is exactly full.
    pub async fn rekey_all_page(
        &self,
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<RekeyPage, EngineError> {
        let limit = limit.clamp(1, MAX_PAGE);
        let mut page = self.scan(after, limit).await?;
        if page.ids.len() == limit {
            if let Some(next) = page.next.as_deref() {
                let ahead = self.scan(Some(next), 1).await?;
                if ahead.ids.is_empty() && ahead.next.is_none() {
                    page.next = None;
                }
            }
        }
        self.reseal_each(page.ids.into_iter(), page.next).await
    }

    /// One `Store::scan` call, timed.
    async fn scan(&self, after: Option<&[u8]>, limit: usize) -> Result<ScanPage, StoreError> {
        let started = Instant::now();
        let page = self
            .core
            .store
            .scan(after, limit, self.core.clock.now())
            .await;
        self.core.metrics.store_op("scan", started.elapsed());
        page
    }

    /// Re-seals the record of each of `ids`, counted into a page that resumes at `next`. A
    /// record that cannot be opened is counted with its key id; any other store failure fails
    /// the page.
    async fn reseal_each(
        &self,
        ids: impl Iterator<Item = RecordId>,
        next: Option<Vec<u8>>,
    ) -> Result<RekeyPage, EngineError> {
        let mut done = RekeyPage {
            next,
            ..RekeyPage::default()
        };
        let mut key_ids = BTreeSet::new();
        for id in ids {
            done.examined += 1;
            match self.reseal(&id).await {
                Ok(true) => done.resealed += 1,
                Ok(false) => done.current += 1,
                Err(StoreError::Unreadable { key_id, cause }) => {
                    tracing::warn!(
                        tenant = %id.tenant,
                        namespace = %id.namespace,
                        key_hash = %oncekey_telemetry::key_hash(&id.key),
                        key_id = %key_id,
                        cause = cause.as_str(),
                        "rekey: a record cannot be opened"
                    );
                    done.unreadable += 1;
                    key_ids.insert(key_id);
                }
                Err(e) => return Err(e.into()),
            }
        }
        done.unreadable_key_ids = key_ids.into_iter().collect();
        Ok(done)
    }

    /// Re-seals the record of `id`: `true` when it was written again, `false` when it was
    /// current (or gone, or kept changing: each change sealed it).
    async fn reseal(&self, id: &RecordId) -> Result<bool, StoreError> {
        for _ in 0..RESEAL_TRIES {
            let started = Instant::now();
            let done = self.core.store.reseal(id, self.core.clock.now()).await;
            self.core.metrics.store_op("reseal", started.elapsed());
            match done? {
                Reseal::Resealed { .. } => return Ok(true),
                Reseal::Current | Reseal::Gone => return Ok(false),
                Reseal::Conflict => self.core.metrics.conflict("reseal"),
            }
        }
        Ok(false)
    }

    /// Erases one page of `tenant`'s live records after `after`, at most `limit` (1..=1000):
    /// each is purged as by a forced Purge (unsettled at-most-once operations too), keeping only
    /// the Purge tombstone that continues its fencing sequence. A record already gone is not
    /// counted. A listing that finds nothing after `after` is read again from the start, so the
    /// completion time is set only when the tenant has no live record at all.
    pub async fn erase_page(
        &self,
        tenant: &str,
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<ErasePage, EngineError> {
        let mut after = after;
        loop {
            let page = self.every_record(tenant, after, limit).await?;
            if page.records.is_empty() && page.next.is_none() {
                if after.take().is_some() {
                    continue;
                }
                self.core.metrics.tenant_erased();
                return Ok(ErasePage {
                    erased: 0,
                    next: None,
                    completed_at: Some(self.core.clock.now()),
                });
            }
            let mut erased = 0;
            for record in page.records {
                if self.erase(record).await? {
                    erased += 1;
                }
            }
            self.core.metrics.records_erased(u64::from(erased));
            return Ok(ErasePage {
                erased,
                next: page.next,
                completed_at: None,
            });
        }
    }

    /// Purges the record `listed` names: `false` when it was gone already. A record whose
    /// sealed fields cannot be opened is erased all the same, decided on the listing's view of
    /// it (which leaves those fields out; a Purge keeps none of them).
    async fn erase(&self, listed: Record) -> Result<bool, EngineError> {
        let id = listed.id.clone();
        let basis = match self.core.remembered(&id).await {
            Ok(basis) => basis,
            Err(StoreError::Unreadable { .. }) => Basis::Stored(Some(listed)),
            Err(e) => return Err(e.into()),
        };
        match self.purge_on(&id, basis, true).await {
            Ok(purged) => {
                tracing::debug!(
                    tenant = %id.tenant,
                    namespace = %id.namespace,
                    key_hash = %oncekey_telemetry::key_hash(&id.key),
                    status = ?purged.status,
                    fencing_token = purged.fencing_token,
                    "record erased"
                );
                Ok(true)
            }
            Err(EngineError::NotFound | EngineError::Ledger(LedgerError::NotFound)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// One page of every live record of `tenant`, the intent guard's entries included.
    async fn every_record(
        &self,
        tenant: &str,
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<ListPage, EngineError> {
        let everything = ListFilter::default();
        self.list_page(tenant, &everything, after, limit, Shown::Everything)
            .await
    }
}

#[cfg(test)]
#[path = "protect_tests.rs"]
mod tests;
