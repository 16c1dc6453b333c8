//! Reads that span many records: a page of a listing, and the counts of records needing
//! attention. Both go straight to the store (no ledger decision, no write), timed like every
//! store operation.

use super::{Engine, EngineError};
use oncekey_ledger::{AttentionCounts, ListFilter};
use oncekey_store::{ListPage, ListQuery, Store, MAX_PAGE};
use std::time::Instant;

/// Which records a listing shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shown {
    /// What callers may see: never the intent guard's index entries (unless the filter asks
    /// for their namespace).
    ToCallers,
    /// Every live record, the index entries included.
    Everything,
}

impl<S: Store> Engine<S> {
    /// A page of `tenant`'s records matching `filter` now, after `after` (the previous page's
    /// `next`), at most `limit` (clamped to 1..=`MAX_PAGE`) records.
    ///
    /// A full page whose store says there may be more is checked by reading one record ahead:
    /// when nothing follows, the page has no `next` (AIP-158: the page that holds the last record
    /// ends the listing, also when it is exactly full), whatever the store. A page the store
    /// ended early (its work bound) keeps its `next`: looking ahead there would cost as much as
    /// the next page.
    pub async fn list(
        &self,
        tenant: &str,
        filter: &ListFilter,
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<ListPage, EngineError> {
        self.list_page(tenant, filter, after, limit, Shown::ToCallers)
            .await
    }

    /// `list`, showing the intent guard's index entries too when `shown` is `Shown::Everything`
    /// (Rekey and EraseTenant go over every record of a tenant).
    pub(crate) async fn list_page(
        &self,
        tenant: &str,
        filter: &ListFilter,
        after: Option<&[u8]>,
        limit: usize,
        shown: Shown,
    ) -> Result<ListPage, EngineError> {
        let limit = limit.clamp(1, MAX_PAGE);
        let now = self.core.clock.now();
        let mut page = self
            .read_page(tenant, filter, after, limit, now, shown)
            .await?;
        if page.records.len() == limit {
            if let Some(next) = page.next.as_deref() {
                let ahead = self
                    .read_page(tenant, filter, Some(next), 1, now, shown)
                    .await?;
                if ahead.records.is_empty() && ahead.next.is_none() {
                    page.next = None;
                }
            }
        }
        Ok(page)
    }

    /// One `Store::list` call, timed.
    async fn read_page(
        &self,
        tenant: &str,
        filter: &ListFilter,
        after: Option<&[u8]>,
        limit: usize,
        now: oncekey_ledger::Millis,
        shown: Shown,
    ) -> Result<ListPage, EngineError> {
        let query = ListQuery {
            tenant,
            filter,
            after,
            limit,
        };
        let started = Instant::now();
        let page = self.core.store.list(query, now).await;
        self.core.metrics.store_op("list", started.elapsed());
        let mut page = page?;
        // The intent guard's index entries are records of their own namespace, never shown
        // unless asked for by it (`duplicate_intents`).
        if shown == Shown::ToCallers
            && filter.namespace.as_deref() != Some(oncekey_ledger::INTENT_NAMESPACE)
        {
            page.records.retain(|r| !oncekey_ledger::is_internal(r));
        }
        Ok(page)
    }

    /// How many records of every tenant need attention now.
    pub async fn attention(&self) -> Result<AttentionCounts, EngineError> {
        let started = Instant::now();
        let counts = self.core.store.attention(self.core.clock.now()).await;
        self.core.metrics.store_op("attention", started.elapsed());
        Ok(counts?)
    }
}
