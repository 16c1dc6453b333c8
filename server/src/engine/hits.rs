//! Dedup hits off the answer path. A Claim answered from the record (COMPLETED, FAILED,
//! IN_PROGRESS, a repeated NEEDS_RECONCILIATION) changes only the record's counter and history,
//! so it need not wait for a write: the hit is parked here, the caller is answered at once, and a
//! background flush adds every parked hit of a key to its record with one conditional write
//! (read, add, compare-and-set; retried on conflict like every other write). A hot key's thousand
//! duplicates cost one write, not a thousand conflicting ones.
//!
//! Reads of this process merge the parked hits, so counts and histories look exact here. A key's
//! first hit is written within milliseconds; later ones at most once per `LINGER` (shared store:
//! other processes see them that late) or `LINGER_LOCAL` (a store only this process uses: no one
//! else reads it, so fewer, bigger writes). A crash loses parked hits — counters, never a state
//! change; shutdown writes them all first.

use super::{Clock, MAX_ROUNDS};
use crate::ledger::{Event, Millis, Record, RecordId};
use crate::store::{Cas, Store};
use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::Mutex;
use std::time::Duration;

const SHARDS: usize = 16;
/// How long a key's flush waits after a write before the next one (hits arriving meanwhile are
/// written together), and remembers the written hits for reads that raced with the write.
const LINGER: Duration = Duration::from_secs(1);
/// `LINGER` for a store only this process uses.
const LINGER_LOCAL: Duration = Duration::from_secs(5);
/// Lingering keys wake on multiples of this (wall clock), all at once: their writes reach the
/// store together and share a commit instead of each paying for one.
const TICK: Duration = Duration::from_millis(50);

/// Hits of one record life (its `created_at`) not yet written.
#[derive(Debug, Default)]
pub struct Parked {
    /// The life the hits belong to: a record recreated since gets none of them.
    pub created_at: Millis,
    /// How many Claims.
    pub hits: u64,
    /// Their receipts.
    pub events: Vec<Event>,
    /// Whether a flush task already owns this key.
    flushing: bool,
    /// Hits taken by the flush and being written, with the version their write creates (reads of
    /// an older version still lack them).
    inflight: Option<Inflight>,
    /// The last batches written, kept for a moment so that a read that raced with their write
    /// (and so misses them) still shows them.
    written: Vec<Inflight>,
}

impl Parked {
    /// Adds one hit of `record`'s life; returns whether a flush must start for the key.
    fn add(&mut self, record: &Record, event: Option<Event>) -> bool {
        if self.created_at != record.created_at {
            // Hits of an earlier life of the key are void: that record is gone.
            self.created_at = record.created_at;
            self.hits = 0;
            self.events.clear();
            self.inflight = None;
            self.written.clear();
        }
        self.hits += 1;
        self.events.extend(event);
        bound(&mut self.events);
        let start = !self.flushing;
        self.flushing = true;
        start
    }
}

/// How many written batches a key remembers.
const REMEMBERED: usize = 16;

/// Hits being written.
#[derive(Debug, Default)]
struct Inflight {
    hits: u64,
    events: Vec<Event>,
    target_version: Option<u64>,
}

/// Parked hits, sharded by record id.
pub struct Hits {
    shards: Vec<Mutex<HashMap<RecordId, Parked>>>,
    hasher: RandomState,
}

impl Default for Hits {
    fn default() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            hasher: RandomState::new(),
        }
    }
}

impl Hits {
    fn shard(&self, id: &RecordId) -> std::sync::MutexGuard<'_, HashMap<RecordId, Parked>> {
        let i = self.hasher.hash_one(id) as usize % SHARDS;
        self.shards[i].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Parks one hit of `record`'s life with its receipt. Returns whether the caller must start a
    /// flush for this key.
    pub fn park(&self, record: &Record, event: Option<Event>) -> bool {
        let mut shard = self.shard(&record.id);
        // A key already parked (the common case under duplicates) costs no copy of its id.
        if let Some(parked) = shard.get_mut(&record.id) {
            return parked.add(record, event);
        }
        shard
            .entry(record.id.clone())
            .or_default()
            .add(record, event)
    }

    /// Takes the parked hits of `id` for writing (the key stays owned by its flush task, and the
    /// hits stay visible to reads until `written`); `None` when nothing is left, which also
    /// releases the key.
    pub fn take(&self, id: &RecordId) -> Option<Parked> {
        let mut shard = self.shard(id);
        let parked = shard.get_mut(id)?;
        if parked.hits == 0 {
            return None;
        }
        let hits = std::mem::take(&mut parked.hits);
        let events = std::mem::take(&mut parked.events);
        parked.inflight = Some(Inflight {
            hits,
            events: events.clone(),
            target_version: None,
        });
        Some(Parked {
            created_at: parked.created_at,
            hits,
            events,
            flushing: true,
            inflight: None,
            written: Vec::new(),
        })
    }

    /// The taken hits of `id` are about to be written as `version`.
    pub fn writing(&self, id: &RecordId, version: u64) {
        if let Some(inflight) = self.shard(id).get_mut(id).and_then(|p| p.inflight.as_mut()) {
            inflight.target_version = Some(version);
        }
    }

    /// The taken hits of `id` are written (or void): reads no longer add them.
    pub fn written(&self, id: &RecordId) {
        if let Some(parked) = self.shard(id).get_mut(id) {
            if let Some(batch) = parked.inflight.take() {
                if parked.written.len() == REMEMBERED {
                    parked.written.remove(0);
                }
                parked.written.push(batch);
            }
        }
    }

    /// Forgets `id` if nothing arrived since its last write; `false` when there is more to write.
    pub fn release(&self, id: &RecordId) -> bool {
        let mut shard = self.shard(id);
        match shard.get(id) {
            Some(parked) if parked.hits > 0 || parked.inflight.is_some() => false,
            _ => {
                shard.remove(id);
                true
            }
        }
    }

    /// Puts back hits whose write failed, ahead of newer ones.
    pub fn restore(&self, id: &RecordId, mut taken: Parked) {
        let mut shard = self.shard(id);
        let parked = shard.entry(id.clone()).or_default();
        parked.inflight = None;
        if parked.created_at == taken.created_at || parked.hits == 0 {
            taken.events.append(&mut parked.events);
            parked.created_at = taken.created_at;
            parked.hits += taken.hits;
            parked.events = taken.events;
            bound(&mut parked.events);
        }
        parked.flushing = true;
    }

    /// Adds the hits of `record`'s life that its stored version lacks, as this process knows them.
    pub fn merge_into(&self, record: &mut Record) {
        self.merge(record, true);
    }

    /// Like `merge_into`, but the counter only: for answers that show no history.
    pub fn merge_counts_into(&self, record: &mut Record) {
        self.merge(record, false);
    }

    fn merge(&self, record: &mut Record, with_events: bool) {
        let shard = self.shard(&record.id);
        let Some(parked) = shard
            .get(&record.id)
            .filter(|p| p.created_at == record.created_at)
        else {
            return;
        };
        let version = record.version;
        let missing = parked.written.iter().chain(&parked.inflight);
        fn events(events: &[Event], with_events: bool) -> &[Event] {
            if with_events {
                events
            } else {
                &[]
            }
        }
        for batch in missing.filter(|b| b.target_version.is_none_or(|v| version < v)) {
            apply(record, batch.hits, events(&batch.events, with_events));
        }
        apply(record, parked.hits, events(&parked.events, with_events));
    }

    /// Whether no hit is parked or being written.
    pub fn is_empty(&self) -> bool {
        self.shards.iter().all(|s| {
            let shard = s.lock().unwrap_or_else(|e| e.into_inner());
            shard.values().all(|p| p.hits == 0 && p.inflight.is_none())
        })
    }
}

/// At least `wait`, rounded up so that the wake-up falls on a multiple of `TICK` of the wall clock.
fn on_tick(wait: Duration) -> Duration {
    let tick = TICK.as_millis();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    let due = now + wait.as_millis();
    let aligned = due.div_ceil(tick) * tick;
    Duration::from_millis(u64::try_from(aligned - now).unwrap_or(u64::MAX))
}

/// Keeps the newest `MAX_HISTORY` receipts of a parked batch: a record keeps no more.
fn bound(events: &mut Vec<Event>) {
    let excess = events.len().saturating_sub(crate::ledger::MAX_HISTORY);
    events.drain(..excess);
}

/// Adds `hits` and their receipts to `record`, keeping the history in time order and bounded.
pub fn apply(record: &mut Record, hits: u64, events: &[Event]) {
    record.dedup_hits = record.dedup_hits.saturating_add(hits);
    if events.is_empty() {
        return;
    }
    let mut history = std::mem::take(&mut record.history);
    history.extend(events.iter().cloned());
    history.sort_by_key(|e| e.at);
    crate::ledger::bound_history(&mut history);
    record.history = history;
}

/// Whether `next` differs from `stored` in nothing but what a dedup hit's write may change.
fn only_hit_fields_differ(stored: &Record, next: &Record) -> bool {
    let mut same = next.clone();
    same.version = stored.version;
    same.dedup_hits = stored.dedup_hits;
    same.history.clone_from(&stored.history);
    &same == stored
}

/// Adds the parked hits of `id` to its stored record, one conditional write per batch of hits,
/// until none are left. Hits of a record that is gone (or of an earlier life) are dropped; on a
/// store failure they are put back and retried a little later (a crash loses them: counters only).
/// `shutdown` cuts the waits short so that every hit is written before the store closes.
pub async fn flush<S: Store>(
    store: &S,
    hits: &Hits,
    clock: &Clock,
    id: &RecordId,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let linger = if store.single_process() {
        LINGER_LOCAL
    } else {
        LINGER
    };
    let mut failures = 0u32;
    // Let a burst of duplicates gather first.
    tokio::time::sleep(Duration::from_millis(2)).await;
    loop {
        while let Some(taken) = hits.take(id) {
            let mut written = false;
            for _ in 0..MAX_ROUNDS {
                let now = clock.now();
                let stored = match store.get(id, now).await {
                    Ok(Some(stored)) if stored.created_at == taken.created_at => stored,
                    Ok(_) => {
                        written = true; // the record is gone or was recreated: nothing to count on
                        break;
                    }
                    Err(_) => break,
                };
                let mut next = stored.clone();
                next.version += 1;
                apply(&mut next, taken.hits, &taken.events);
                debug_assert!(
                    only_hit_fields_differ(&stored, &next),
                    "a dedup hit's write may change only version, dedup_hits and history \
                     (Store::replace_if_version with durable == false)"
                );
                hits.writing(id, next.version);
                match store
                    .replace_if_version(&next, stored.version, false, now)
                    .await
                {
                    Ok(Cas::Applied) => {
                        written = true;
                        break;
                    }
                    Ok(Cas::Conflict(_)) => continue,
                    Err(_) => break,
                }
            }
            if written {
                hits.written(id);
            } else {
                failures += 1;
                if failures > 50 {
                    tracing::warn!(
                        hits = taken.hits,
                        "dropping dedup hits the store would not take"
                    );
                    continue;
                }
                hits.restore(id, taken);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        // Linger, so that reads racing with the writes above still see them; then let go.
        tokio::select! {
            _ = tokio::time::sleep(on_tick(linger)) => {}
            _ = shutdown.wait_for(|down| *down) => {}
        }
        if hits.release(id) {
            return;
        }
    }
}
