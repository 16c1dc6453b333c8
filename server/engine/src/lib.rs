//! The engine runs ledger decisions against a store: read, decide, conditional write, and on a
//! conflict decide again from the record the store returned (`rounds`). It also holds Claims
//! that asked to `wait` until the operation they duplicate settles (`claim`), and writes dedup
//! hits off the answer path (`hits`).
//!
//! It knows nothing of gRPC (the API layer converts requests and errors) and nothing of a backend
//! beyond the `Store` trait and the `Capabilities` it states, so every store gets exactly the
//! same behaviour. It decides no transition: the ledger does.

#![warn(unreachable_pub)]

mod claim;
mod clock;
mod duplicates;
mod first;
mod guard;
mod held;
mod hits;
mod list;
mod operate;
mod protect;
mod recent;
mod rounds;
mod sharded;
#[cfg(any(test, feature = "suite"))]
#[allow(missing_docs)] // the cases: each name says what it checks
pub mod suite;
mod waiters;

pub use claim::{ClaimReply, DryRunReply};
pub use clock::Clock;
pub use duplicates::{DuplicateIntent, DuplicatePage};
pub use guard::Guarded;
pub use operate::Decider;
pub use protect::{ErasePage, RekeyPage};
pub use waiters::Listener;

use oncekey_ledger::{self as ledger, Disposition, LedgerError, Millis};
use oncekey_ledger::{Event, Lease, OpError, OpResult, Record, RecordId};
use oncekey_store::{Store, StoreError};
use oncekey_telemetry::metrics::Metrics;
use rounds::Core;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Why the engine could not answer.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The state machine refused the request.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// Lookup of a record that is absent or expired.
    #[error("no such record")]
    NotFound,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The record changed on every one of the rounds the engine tries (256).
    #[error("the record kept changing concurrently")]
    Contention,
    /// The Claim would be held by `wait`, but its tenant holds as many Claims as it may; nothing
    /// changed. Come back after `retry_after` (ms).
    #[error("this tenant holds too many Claims waiting (its held-claims limit); retry in {retry_after} ms")]
    HeldLimit {
        /// When to come back: when the operation's lease runs out, 1 s ..= 10 s.
        retry_after: Millis,
    },
    /// A Claim of a new child operation beyond its parent's run budget; nothing was created.
    #[error("the parent operation's run budget is spent ({}: {} of {})", exhausted.limit, exhausted.spent, exhausted.max)]
    BudgetExhausted {
        /// The parent.
        parent: ledger::ParentRef,
        /// The cap it hit.
        exhausted: ledger::Exhausted,
    },
}

/// Ledger transitions over a store.
pub struct Engine<S> {
    core: Arc<Core<S>>,
    shutdown: watch::Sender<bool>,
}

impl<S: Store> Engine<S> {
    /// An engine over `store` reading time from `clock`.
    pub fn new(store: S, clock: Clock) -> Self {
        let metrics = Metrics::with_store(Metrics::DEFAULT_MAX_SERIES, store.collector());
        Self::with_metrics(store, clock, Arc::new(metrics))
    }

    /// An engine reporting to `metrics`.
    pub fn with_metrics(store: S, clock: Clock, metrics: Arc<Metrics>) -> Self {
        let held_claims = held::HeldClaims::new(metrics.claims_held());
        let core = Core {
            capabilities: store.capabilities(),
            store,
            clock,
            metrics,
            recent: recent::Recent::default(),
            waiters: waiters::Waiters::default(),
            held: held_claims,
            hits: hits::Hits::default(),
            first_looks: first::FirstLooks::default(),
        };
        Self {
            core: Arc::new(core),
            shutdown: watch::Sender::new(false),
        }
    }

    /// The metrics this engine reports to.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.core.metrics
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.core.store
    }

    /// The clock.
    pub fn clock(&self) -> &Clock {
        &self.core.clock
    }

    /// Ends waits and keep-alives early so the server can drain: waiting Claims answer with what
    /// they know now.
    pub fn begin_shutdown(&self) {
        self.shutdown.send_replace(true);
    }

    /// Listens for settles of `id` (complete, fail, delete, a lapsed lease made UNKNOWN) by this
    /// process, and of no other record, for as long as the listener lives.
    pub fn listen_settles(&self, id: &RecordId) -> Listener<'_> {
        self.core.waiters.listen(id)
    }

    /// How many Claims of `tenant` are held by `wait` now.
    pub fn held_claims(&self, tenant: &str) -> u32 {
        self.core.held.of(tenant)
    }

    /// Resolves once `begin_shutdown` was called.
    pub async fn shutting_down(&self) {
        let mut rx = self.shutdown.subscribe();
        let _ = rx.wait_for(|down| *down).await;
    }

    /// Complete: SUCCEEDED with `result`.
    pub async fn complete(
        &self,
        id: &RecordId,
        token: u64,
        result: &OpResult,
    ) -> Result<Record, EngineError> {
        let basis = self.core.remembered(id).await?;
        let ran = self
            .core
            .run(id, basis, |current, now| {
                Ok((ledger::complete(current, token, result, now)?, ()))
            })
            .await?;
        let mut record = ran.record.expect("a completed record exists");
        self.core.hits.merge_counts_into(&mut record).await;
        Ok(record)
    }

    /// Fail with a disposition; `None` when the record was deleted (ABANDON).
    pub async fn fail(
        &self,
        id: &RecordId,
        token: u64,
        error: &OpError,
        disposition: Disposition,
    ) -> Result<Option<Record>, EngineError> {
        self.fail_as(id, token, error, disposition, false).await
    }

    /// `fail`, saying whether the holder ran nothing under its lease (`ledger::fail_nothing_ran`:
    /// the acquisition is then not counted against the attempt cap).
    pub async fn fail_as(
        &self,
        id: &RecordId,
        token: u64,
        error: &OpError,
        disposition: Disposition,
        nothing_ran: bool,
    ) -> Result<Option<Record>, EngineError> {
        let settle = match nothing_ran {
            true => ledger::fail_nothing_ran,
            false => ledger::fail,
        };
        let basis = self.core.remembered(id).await?;
        let ran = self
            .core
            .run(id, basis, |current, now| {
                Ok((settle(current, token, error, disposition, now)?, ()))
            })
            .await?;
        match ran.record.filter(|r| !r.status.is_tombstone()) {
            Some(mut record) => {
                self.core.hits.merge_counts_into(&mut record).await;
                Ok(Some(record))
            }
            None => Ok(None),
        }
    }

    /// Renew: the lease runs `lease_ttl` from now.
    pub async fn renew(
        &self,
        id: &RecordId,
        token: u64,
        lease_ttl: Millis,
    ) -> Result<Lease, EngineError> {
        let basis = self.core.remembered(id).await?;
        let ran = self
            .core
            .run(id, basis, |current, now| {
                let (lease, transition) = ledger::renew(current, token, lease_ttl, now)?;
                Ok((transition, lease))
            })
            .await?;
        Ok(ran.extra)
    }

    /// The live record of `id`.
    pub async fn lookup(&self, id: &RecordId) -> Result<Record, EngineError> {
        let mut record = self.core.get(id).await?;
        if let Some(record) = record.as_mut() {
            self.core.hits.merge_into(record).await;
        }
        record
            .filter(|r| !r.status.is_tombstone())
            .ok_or(EngineError::NotFound)
    }

    /// Removes records expired by now, in batches of `batch`; returns how many.
    pub async fn sweep(&self, batch: usize) -> Result<usize, EngineError> {
        let core = &self.core;
        let mut total = 0;
        loop {
            let started = Instant::now();
            let removed = core.store.sweep_expired(core.clock.now(), batch).await?;
            core.metrics.store_op("sweep", started.elapsed());
            core.metrics.swept(removed);
            total += removed;
            if removed < batch {
                return Ok(total);
            }
        }
    }

    /// Parks a dedup hit of `stored` (the record it was answered from) with its receipt, and
    /// starts the key's background flush if none runs. The caller answers with `stored`, every
    /// parked hit counted (`Hits::merge_counts_into`).
    fn park_hit(&self, stored: &Record, receipt: Event) {
        if self.core.hits.park(stored, receipt) {
            let (core, id, shutdown) = (
                self.core.clone(),
                stored.id.clone(),
                self.shutdown.subscribe(),
            );
            tokio::spawn(async move { hits::flush(&core, &id, shutdown).await });
        }
    }

    /// Waits (at most 5 s) until the background flushes wrote every parked dedup hit; used at
    /// shutdown, before the store closes.
    pub async fn flush_parked_hits(&self) {
        for _ in 0..1000 {
            if self.core.hits.is_empty() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tracing::warn!("shutting down with dedup hits not yet written");
    }
}

fn millis(ms: Millis) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

#[cfg(test)]
mod tests;

/// The store suite on the reference store.
#[cfg(test)]
mod memory_suite {
    use oncekey_store::memory::MemoryStore;
    use oncekey_store::Capabilities;

    crate::store_suite!(memory, async { (MemoryStore::new(), ()) });
    crate::store_suite!(memory_shared, async { (MemoryStore::shared(), ()) });
    crate::store_suite!(memory_whole_reads, async {
        let plain = Capabilities {
            single_process: true,
            insert_returns_live: false,
            brief_reads: false,
        };
        (MemoryStore::with_capabilities(plain), ())
    });
}
