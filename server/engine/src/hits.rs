//! Dedup hits off the answer path. A Claim answered from the record (COMPLETED, FAILED,
//! IN_PROGRESS, a repeated NEEDS_RECONCILIATION) changes only the record's counter and history,
//! so it need not wait for a write: the hit is parked here, the caller is answered at once, and a
//! background flush (`flush`) adds every parked hit of a key to its record through the engine's
//! one write loop, with the ledger's `add_hits` deciding (which life the hits count on, where
//! their receipts go). A hot key's thousand duplicates cost one write, not a thousand
//! conflicting ones.
//!
//! This module is the engine's memory of hits not written yet, or written a moment ago; it
//! decides no transition. Every answer and read of this process merges the hits that the
//! version it read lacks, so counts and histories look exact here. A batch being written is in
//! the store from the version its write creates on; a read that finds the store past the batch's
//! base version while the write's outcome is not back yet waits (briefly) for it instead of
//! guessing. A key's first hit is written within milliseconds; later ones at most once per
//! `LINGER` (shared store: other processes see them that late) or `LINGER_LOCAL` (a store only
//! this process uses). A crash loses parked hits — counters and receipts, never a state change;
//! shutdown writes them first.

mod flush;

pub(crate) use flush::flush;

use super::sharded::Sharded;
use oncekey_ledger::{count_hits, Event, HitBatch, Life, Record, RecordId, Share};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// How many written batches a key remembers (for reads that raced with their writes).
const REMEMBERED: usize = 16;
/// How many lives of one key may have hits parked at once; more means a key abandoned and
/// claimed again faster than its hits are written, and the oldest life's hits are dropped.
const MAX_LIVES: usize = 8;
/// How long an answer waits for the outcome of a hit write it cannot place; past it, the hits
/// are counted as missing from what it read (an answer may then count a hit twice, never miss one).
const UNKNOWN_WAIT: Duration = Duration::from_secs(5);

/// Where a batch's write stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Write {
    /// Not sent (or put back after its write failed): no stored version has the batch.
    Unsent,
    /// Sent, conditioned on stored version `base`; the outcome is not back yet.
    Sent { base: u64 },
    /// In the store from `version` on.
    Applied { version: u64 },
}

/// Whether a stored version has a batch.
enum Seen {
    Missing,
    Included,
    Unknown,
}

/// Hits of one life, and where their write stands.
#[derive(Debug)]
struct Batch {
    hits: HitBatch,
    write: Write,
}

impl Batch {
    fn seen_in(&self, version: u64) -> Seen {
        match self.write {
            Write::Unsent => Seen::Missing,
            Write::Sent { base } if version <= base => Seen::Missing,
            // The store moved past the write's base: by it, or by another write that refuses it.
            Write::Sent { .. } => Seen::Unknown,
            Write::Applied { version: from } if version >= from => Seen::Included,
            Write::Applied { .. } => Seen::Missing,
        }
    }
}

/// The hits of one key not yet written, or written a moment ago.
#[derive(Debug, Default)]
struct Parked {
    /// Not taken by the flush yet: one batch per life, in order of arrival.
    pending: Vec<Batch>,
    /// Whether a flush task owns this key.
    flushing: bool,
    /// Taken by the flush and being written.
    inflight: Option<Batch>,
    /// The last batches written, so that a read that raced with their write still shows them.
    written: VecDeque<Batch>,
    /// Woken whenever the in-flight write's outcome is known.
    resolved: Arc<Notify>,
}

impl Parked {
    /// Adds one hit of `record`'s life; returns whether a flush must start for the key.
    fn add(&mut self, record: &Record, receipt: Event) -> bool {
        let life = Life::of(record);
        match self.pending.iter_mut().find(|b| b.hits.life == life) {
            Some(batch) => batch.hits.push(receipt),
            None => {
                if self.pending.len() == MAX_LIVES {
                    let dropped = self.pending.remove(0);
                    tracing::warn!(
                        hits = dropped.hits.hits,
                        "dropping dedup hits of a record abandoned long ago"
                    );
                }
                self.pending.push(Batch {
                    hits: HitBatch::one(record, receipt),
                    write: Write::Unsent,
                });
            }
        }
        let start = !self.flushing;
        self.flushing = true;
        start
    }

    /// The in-flight write's outcome is known (or changed): wake the reads waiting for it.
    fn resolved(&self) {
        self.resolved.notify_waiters();
    }
}

/// Parked hits, sharded by record id.
#[derive(Default)]
pub(crate) struct Hits {
    shards: Sharded<Parked>,
}

impl Hits {
    fn shard(&self, id: &RecordId) -> std::sync::MutexGuard<'_, HashMap<RecordId, Parked>> {
        self.shards.shard(id)
    }

    /// Runs `f` on the parked hits of `id`, if any.
    fn with(&self, id: &RecordId, f: impl FnOnce(&mut Parked)) {
        if let Some(parked) = self.shard(id).get_mut(id) {
            f(parked);
        }
    }

    /// Parks one hit of `record`'s life with its receipt. Returns whether the caller must start a
    /// flush for this key.
    pub(crate) fn park(&self, record: &Record, receipt: Event) -> bool {
        let mut shard = self.shard(&record.id);
        // A key already parked (the common case under duplicates) costs no copy of its id.
        if let Some(parked) = shard.get_mut(&record.id) {
            return parked.add(record, receipt);
        }
        shard
            .entry(record.id.clone())
            .or_default()
            .add(record, receipt)
    }

    /// Takes the oldest life's parked hits of `id` for writing (the key stays owned by its flush
    /// task, and the hits stay visible to reads until written); `None` when nothing is left.
    pub(crate) fn take(&self, id: &RecordId) -> Option<HitBatch> {
        let mut shard = self.shard(id);
        let parked = shard.get_mut(id)?;
        if parked.pending.is_empty() {
            return None;
        }
        let batch = parked.pending.remove(0);
        let taken = batch.hits.clone();
        parked.inflight = Some(batch);
        Some(taken)
    }

    /// The taken hits of `id` are about to be written over stored version `base`: from now on a
    /// stored version past `base` may hold them.
    pub(crate) fn writing(&self, id: &RecordId, base: u64) {
        self.with(id, |parked| {
            if let Some(batch) = parked.inflight.as_mut() {
                batch.write = Write::Sent { base };
            }
            parked.resolved();
        });
    }

    /// The taken hits of `id` are in the store from `version` on.
    pub(crate) fn written(&self, id: &RecordId, version: u64) {
        self.with(id, |parked| {
            if let Some(mut batch) = parked.inflight.take() {
                batch.write = Write::Applied { version };
                if parked.written.len() == REMEMBERED {
                    parked.written.pop_front();
                }
                parked.written.push_back(batch);
            }
            parked.resolved();
        });
    }

    /// The taken hits of `id` have no record to go to (it is gone, or was created afresh).
    pub(crate) fn void(&self, id: &RecordId) {
        self.with(id, |parked| {
            parked.inflight = None;
            parked.resolved();
        });
    }

    /// Puts back the taken hits of `id`, whose write failed (no stored version has them), ahead
    /// of newer ones of their life.
    pub(crate) fn restore(&self, id: &RecordId) {
        self.with(id, |parked| {
            if let Some(mut batch) = parked.inflight.take() {
                batch.write = Write::Unsent;
                let life = batch.hits.life;
                match parked.pending.iter().position(|b| b.hits.life == life) {
                    Some(i) => {
                        let newer = std::mem::replace(&mut parked.pending[i], batch);
                        parked.pending[i].hits.append(newer.hits);
                    }
                    None => parked.pending.insert(0, batch),
                }
            }
            parked.resolved();
        });
    }

    /// Forgets `id` if nothing arrived since its last write; `false` when there is more to write.
    pub(crate) fn release(&self, id: &RecordId) -> bool {
        let mut shard = self.shard(id);
        match shard.get(id) {
            Some(parked) if !parked.pending.is_empty() || parked.inflight.is_some() => false,
            _ => {
                shard.remove(id);
                true
            }
        }
    }

    /// Adds the hits of `record`'s life that its stored version lacks, as this process knows
    /// them, and the receipts of earlier lives it carries forward; `record` must have been read
    /// whole (with its history).
    pub(crate) async fn merge_into(&self, record: &mut Record) {
        self.merge(record, true).await;
    }

    /// Like `merge_into`, but the counter only: for answers that show no history.
    pub(crate) async fn merge_counts_into(&self, record: &mut Record) {
        self.merge(record, false).await;
    }

    async fn merge(&self, record: &mut Record, with_events: bool) {
        let give_up = tokio::time::Instant::now() + UNKNOWN_WAIT;
        loop {
            let resolved = {
                let shard = self.shard(&record.id);
                let Some(parked) = shard.get(&record.id) else {
                    return;
                };
                match missing(parked, record, with_events, false) {
                    Ok((hits, events)) => {
                        count_hits(record, hits, &events);
                        return;
                    }
                    Err(()) => {
                        // Listen before the lock is released, so the outcome cannot slip by.
                        let mut resolved = Box::pin(parked.resolved.clone().notified_owned());
                        resolved.as_mut().enable();
                        resolved
                    }
                }
            };
            if tokio::time::timeout_at(give_up, resolved).await.is_err() {
                let shard = self.shard(&record.id);
                if let Some(parked) = shard.get(&record.id) {
                    if let Ok((hits, events)) = missing(parked, record, with_events, true) {
                        count_hits(record, hits, &events);
                    }
                }
                return;
            }
        }
    }

    /// Whether no hit is parked or being written.
    pub(crate) fn is_empty(&self) -> bool {
        self.shards.each().all(|shard| {
            shard
                .values()
                .all(|p| p.pending.is_empty() && p.inflight.is_none())
        })
    }
}

/// The hits of `record`'s life and the receipts (of its life, and with `with_events` of the
/// earlier lives it carries forward) that `parked` has and the stored version `record` lacks.
/// `Err` when a batch's write has an outcome not back yet that decides it, unless `unknown_missing`
/// says to count such a batch as missing.
fn missing(
    parked: &Parked,
    record: &Record,
    with_events: bool,
    unknown_missing: bool,
) -> Result<(u64, Vec<Event>), ()> {
    let (mut hits, mut events) = (0, Vec::new());
    let batches = parked
        .written
        .iter()
        .chain(&parked.inflight)
        .chain(&parked.pending);
    for batch in batches {
        let share = match batch.hits.share(record) {
            Some(Share::Carried) if !with_events => continue,
            Some(share) => share,
            None => continue,
        };
        match batch.seen_in(record.version) {
            Seen::Included => continue,
            Seen::Unknown if !unknown_missing => return Err(()),
            Seen::Missing | Seen::Unknown => {}
        }
        if share == Share::Own {
            hits += batch.hits.hits;
        }
        if with_events {
            events.extend(batch.hits.receipts.iter().cloned());
        }
    }
    Ok((hits, events))
}
