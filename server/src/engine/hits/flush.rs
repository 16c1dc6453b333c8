//! The background writer of a key's parked dedup hits: one conditional write per batch, retried
//! on conflict, then a linger so that reads racing with the write still see the hits.

use super::{apply, Hits, Life, Taken};
use crate::engine::{Clock, MAX_ROUNDS};
use crate::ledger::{Record, RecordId, Status};
use crate::store::{Cas, Store};
use std::time::Duration;

/// How long a key's flush waits after a write before the next one (hits arriving meanwhile are
/// written together), and remembers the written hits for reads that raced with the write.
const LINGER: Duration = Duration::from_secs(1);
/// `LINGER` for a store only this process uses.
const LINGER_LOCAL: Duration = Duration::from_secs(5);
/// Lingering keys wake on multiples of this (wall clock), all at once: their writes reach the
/// store together and share a commit instead of each paying for one.
const TICK: Duration = Duration::from_millis(50);
/// Failed writes of one key after which its hits are dropped.
const MAX_FAILURES: u32 = 50;

/// Adds the parked hits of `id` to its stored record, one conditional write per batch, until
/// none are left. Hits of a record that is gone (or created afresh) are dropped; receipts of a
/// record abandoned and created again go to the new record (`Life::carried_into`); on a store
/// failure the hits are put back and retried a little later (a crash loses them: counters and
/// receipts only). `shutdown` cuts the waits short so that every hit is written before the
/// store closes.
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
            if write(store, hits, clock, id, &taken).await {
                continue;
            }
            failures += 1;
            if failures > MAX_FAILURES {
                tracing::warn!(
                    hits = taken.hits,
                    "dropping dedup hits the store would not take"
                );
                hits.void(id);
                continue;
            }
            hits.restore(id);
            tokio::time::sleep(Duration::from_millis(100)).await;
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

/// Writes one taken batch; `false` when the store failed (the batch is to be put back).
async fn write<S: Store>(
    store: &S,
    hits: &Hits,
    clock: &Clock,
    id: &RecordId,
    taken: &Taken,
) -> bool {
    let mut current = match store.get(id, clock.now()).await {
        Ok(current) => current,
        Err(_) => return false,
    };
    for _ in 0..MAX_ROUNDS {
        let now = clock.now();
        let Some(stored) = current.filter(|r| r.status != Status::Purged) else {
            hits.void(id); // the record is gone (or purged, history and all): nothing to count on
            return true;
        };
        let counted = if Life::of(&stored) == taken.life {
            taken.hits
        } else if !taken.events.is_empty() && taken.life.carried_into(&stored) {
            0 // created again over the hits' record: its receipts, not its counter
        } else {
            hits.void(id);
            return true;
        };
        let mut next = stored.clone();
        next.version += 1;
        apply(&mut next, counted, &taken.events);
        debug_assert!(
            only_hit_fields_differ(&stored, &next),
            "a dedup hit's write may change only version, dedup_hits and history \
             (Store::replace_if_version with durable == false)"
        );
        hits.writing(id, stored.version);
        match store
            .replace_if_version(&next, stored.version, false, now)
            .await
        {
            Ok(Cas::Applied) => {
                hits.written(id, next.version);
                return true;
            }
            Ok(Cas::Conflict(now_stored)) => {
                hits.unsent(id);
                current = now_stored;
            }
            Err(_) => {
                hits.unsent(id);
                return false;
            }
        }
    }
    false
}

/// Whether `next` differs from `stored` in nothing but what a dedup hit's write may change.
fn only_hit_fields_differ(stored: &Record, next: &Record) -> bool {
    let mut same = next.clone();
    same.version = stored.version;
    same.dedup_hits = stored.dedup_hits;
    same.history.clone_from(&stored.history);
    &same == stored
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
