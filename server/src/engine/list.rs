//! Reads that span many records: a page of a listing, and the counts of records needing
//! attention. Both go straight to the store (no ledger decision, no write), timed like every
//! store operation.

use super::{Engine, EngineError};
use crate::ledger::{AttentionCounts, ListFilter};
use crate::store::{ListPage, ListQuery, Store, MAX_PAGE};
use std::time::Instant;

impl<S: Store> Engine<S> {
    /// A page of `tenant`'s records matching `filter` now, after `after` (the previous page's
    /// `next`), at most `limit` (clamped to 1..=`MAX_PAGE`) records.
    pub async fn list(
        &self,
        tenant: &str,
        filter: &ListFilter,
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<ListPage, EngineError> {
        let query = ListQuery {
            tenant,
            filter,
            after,
            limit: limit.clamp(1, MAX_PAGE),
        };
        let started = Instant::now();
        let page = self.core.store.list(query, self.core.clock.now()).await;
        self.core.metrics.store_op("list", started.elapsed());
        Ok(page?)
    }

    /// How many records of every tenant need attention now.
    pub async fn attention(&self) -> Result<AttentionCounts, EngineError> {
        let started = Instant::now();
        let counts = self.core.store.attention(self.core.clock.now()).await;
        self.core.metrics.store_op("attention", started.elapsed());
        Ok(counts?)
    }
}
