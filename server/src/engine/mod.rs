//! The engine runs ledger decisions against a store: read, decide, conditional write, and on a
//! conflict decide again from the record the store returned. It also holds Claims that asked to
//! `wait` until the operation they duplicate settles.
//!
//! It knows nothing of gRPC (the API layer converts requests and errors) and nothing of a backend
//! beyond the `Store` trait, so every store gets exactly the same behaviour.

mod claim;
mod clock;
mod hits;
mod operate;
mod recent;
mod waiters;

pub use claim::{ClaimReply, DryRunReply};
pub use clock::Clock;
pub use operate::Decider;

use crate::ledger::{self, Disposition, LedgerError, Millis};
use crate::ledger::{Change, Lease, OpError, OpResult, Record, RecordId, Status, Transition};
use crate::store::{Cas, Store, StoreError};
use crate::telemetry::metrics::Metrics;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use waiters::Waiters;

/// Conditional-write rounds before giving up on a record that keeps changing under us.
const MAX_ROUNDS: usize = 256;

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
    /// The record changed on every one of `MAX_ROUNDS` attempts.
    #[error("the record kept changing concurrently")]
    Contention,
}

/// How `Engine::run` gets the record its first round decides on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum First {
    /// Decide on "absent" and let the store's conditional insert return what exists (one round
    /// trip for a new key).
    Absent,
    /// Decide on the record this process last wrote, when it remembers one (`recent`); else read.
    Recent,
    /// Read it without its receipt history (`Store::get_brief`): enough for answers that do not
    /// write the record back whole; a decision that does reads it again, whole.
    Brief,
}

/// Ledger transitions over a store.
pub struct Engine<S> {
    store: Arc<S>,
    hits: Arc<hits::Hits>,
    recent: recent::Recent,
    clock: Clock,
    waiters: Waiters,
    shutdown: watch::Sender<bool>,
    metrics: Arc<Metrics>,
}

impl<S: Store> Engine<S> {
    /// An engine over `store` reading time from `clock`.
    pub fn new(store: S, clock: Clock) -> Self {
        let metrics = Metrics::with_store(Metrics::DEFAULT_MAX_SERIES, store.collector());
        Self::with_metrics(store, clock, Arc::new(metrics))
    }

    /// An engine reporting to `metrics`.
    pub fn with_metrics(store: S, clock: Clock, metrics: Arc<Metrics>) -> Self {
        Self {
            store: Arc::new(store),
            hits: Arc::default(),
            recent: recent::Recent::default(),
            clock,
            waiters: Waiters::default(),
            shutdown: watch::Sender::new(false),
            metrics,
        }
    }

    /// The metrics this engine reports to.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The clock.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// Ends waits and keep-alives early so the server can drain: waiting Claims answer with what
    /// they know now.
    pub fn begin_shutdown(&self) {
        self.shutdown.send_replace(true);
    }

    /// Woken when a record that hashes like `id` settles (complete, fail or delete); callers
    /// re-read their own record after a wake-up.
    pub fn settle_notify(&self, id: &RecordId) -> &tokio::sync::Notify {
        self.waiters.channel(id)
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
        let (record, ()) = self
            .run(id, First::Recent, |current, now| {
                Ok((ledger::complete(current, token, result, now)?, ()))
            })
            .await?;
        let mut record = record.expect("a completed record exists");
        self.hits.merge_counts_into(&mut record).await;
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
        let (record, ()) = self
            .run(id, First::Recent, |current, now| {
                Ok((ledger::fail(current, token, error, disposition, now)?, ()))
            })
            .await?;
        match record.filter(|r| !r.status.is_tombstone()) {
            Some(mut record) => {
                self.hits.merge_counts_into(&mut record).await;
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
        let (_, lease) = self
            .run(id, First::Recent, |current, now| {
                let (lease, transition) = ledger::renew(current, token, lease_ttl, now)?;
                Ok((transition, lease))
            })
            .await?;
        Ok(lease)
    }

    /// The live record of `id`.
    pub async fn lookup(&self, id: &RecordId) -> Result<Record, EngineError> {
        let mut record = self.get(id).await?;
        if let Some(record) = record.as_mut() {
            self.hits.merge_into(record).await;
        }
        record
            .filter(|r| !r.status.is_tombstone())
            .ok_or(EngineError::NotFound)
    }

    /// The live record of `id` (tombstones included), timed.
    async fn get(&self, id: &RecordId) -> Result<Option<Record>, StoreError> {
        let started = Instant::now();
        let record = self.store.get(id, self.clock.now()).await;
        self.metrics.store_op("get", started.elapsed());
        record
    }

    /// Removes records expired by now, in batches of `batch`; returns how many.
    pub async fn sweep(&self, batch: usize) -> Result<usize, EngineError> {
        let mut total = 0;
        loop {
            let started = Instant::now();
            let removed = self.store.sweep_expired(self.clock.now(), batch).await?;
            self.metrics.store_op("sweep", started.elapsed());
            self.metrics.swept(removed);
            total += removed;
            if removed < batch {
                return Ok(total);
            }
        }
    }

    /// Reads, decides and writes conditionally until a write applies or nothing needs writing.
    /// `first` says what the first round decides on.
    async fn run<T>(
        &self,
        id: &RecordId,
        first: First,
        mut decide: impl FnMut(Option<&Record>, Millis) -> Result<(Transition, T), LedgerError>,
    ) -> Result<(Option<Record>, T), EngineError> {
        let remembered = match first {
            First::Recent => self.recent.get(id),
            First::Absent | First::Brief => None,
        };
        // Whether `current` may be stale, so that only a conditional write may act on it.
        let mut unchecked = remembered.is_some();
        // Whether `current` lacks its history, so that a decision writing it whole must re-read.
        let mut brief = false;
        let mut current = match (first, remembered) {
            (_, Some(record)) => Some(record),
            (First::Absent, None) => None,
            (First::Brief, None) => {
                brief = true;
                let started = Instant::now();
                let record = self.store.get_brief(id, self.clock.now()).await;
                self.metrics.store_op("get", started.elapsed());
                record?
            }
            (First::Recent, None) => self.get(id).await?,
        };
        for _ in 0..MAX_ROUNDS {
            let now = self.clock.now();
            let decided = decide(current.as_ref(), now);
            if unchecked && !writes_conditionally(&decided) {
                // An error or an answer without a write, decided on a remembered record: decide
                // again on the stored one.
                unchecked = false;
                current = self.get(id).await?;
                continue;
            }
            if brief && rewrites_record(&decided) {
                // The write carries the history forward: decide again on the whole record.
                brief = false;
                current = self.get(id).await?;
                continue;
            }
            let (transition, extra) = decided.inspect_err(|e| {
                if *e == LedgerError::LeaseLost {
                    self.metrics.lease_lost();
                }
            })?;
            // Decided on: a later round decides on what the conditional write returns instead.
            let decided_on = current.take();
            if let (Change::Replace { durable: false, .. }, Some(next), Some(stored)) =
                (&transition.change, &transition.record, decided_on)
            {
                // Only the counter and history change: park the hit, answer now.
                self.park_hit(&stored, next);
                return Ok((Some(stored), extra));
            }
            let started = Instant::now();
            let (op, cas) = match (&transition.change, &transition.record) {
                (Change::Keep, _) => return Ok((transition.record, extra)),
                (Change::Insert, Some(next)) => {
                    ("insert", self.store.insert_if_absent(next, now).await?)
                }
                (
                    Change::Replace {
                        expected_version,
                        durable,
                    },
                    Some(next),
                ) => (
                    "replace",
                    self.store
                        .replace_if_version(next, *expected_version, *durable, now)
                        .await?,
                ),
                (Change::Insert | Change::Replace { .. }, None) => {
                    unreachable!("the ledger writes a record it returns")
                }
            };
            self.metrics.store_op(op, started.elapsed());
            if matches!(cas, Cas::Conflict(_)) {
                self.metrics.conflict(op);
            }
            match cas {
                Cas::Applied => {
                    match &transition.record {
                        Some(record) => self.recent.wrote(record),
                        None => self.recent.forget(id),
                    }
                    if transition
                        .record
                        .as_ref()
                        .is_none_or(|r| r.status != Status::Processing)
                    {
                        self.waiters.notify(id);
                    }
                    return Ok((transition.record, extra));
                }
                Cas::Conflict(now_stored) => {
                    current = now_stored;
                    unchecked = false;
                }
            }
        }
        Err(EngineError::Contention)
    }

    /// Parks a dedup hit (`next` is `stored` plus the hit) and starts the key's flush if none
    /// runs. The caller answers with `stored`, every parked hit counted (`Hits::merge_counts_into`).
    fn park_hit(&self, stored: &Record, next: &Record) {
        // The ledger appended the hit's receipt last.
        let event = next.history.last().cloned();
        if self.hits.park(stored, event) {
            let (store, hits, clock) = (self.store.clone(), self.hits.clone(), self.clock.clone());
            let (id, shutdown) = (stored.id.clone(), self.shutdown.subscribe());
            tokio::spawn(async move { hits::flush(&*store, &hits, &clock, &id, shutdown).await });
        }
    }

    /// Waits (at most 5 s) until the background flushes wrote every parked dedup hit; used at
    /// shutdown, before the store closes.
    pub async fn flush_parked_hits(&self) {
        for _ in 0..1000 {
            if self.hits.is_empty() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tracing::warn!("shutting down with dedup hits not yet written");
    }
}

/// Whether a decision is a durable conditional write (which checks the record it was decided on).
fn writes_conditionally<T>(decided: &Result<(Transition, T), LedgerError>) -> bool {
    matches!(
        decided,
        Ok((
            Transition {
                change: Change::Insert | Change::Replace { durable: true, .. },
                ..
            },
            _
        ))
    )
}

/// Whether a decision writes the record back whole (history included), beyond what a parked
/// dedup hit adds.
fn rewrites_record<T>(decided: &Result<(Transition, T), LedgerError>) -> bool {
    matches!(
        decided,
        Ok((
            Transition {
                change: Change::Replace { durable: true, .. },
                ..
            },
            _
        ))
    )
}

fn millis(ms: Millis) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

#[cfg(test)]
mod tests;
