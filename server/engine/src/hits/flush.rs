//! The background writer of a key's parked dedup hits: one batch at a time through the engine's
//! write loop (`Core::run`, deciding with the ledger's `add_hits`), then a linger so that reads
//! racing with the write still see the hits.

use crate::rounds::{nothing, Core, Ran};
use oncekey_ledger::{self as ledger, Change, HitBatch, RecordId};
use oncekey_store::Store;
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
pub(crate) async fn flush<S: Store>(
    core: &Core<S>,
    id: &RecordId,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let linger = if core.capabilities.single_process {
        LINGER_LOCAL
    } else {
        LINGER
    };
    let hits = &core.hits;
    let mut failures = 0u32;
    // Let a burst of duplicates gather first.
    tokio::time::sleep(Duration::from_millis(2)).await;
    loop {
        while let Some(batch) = hits.take(id) {
            if write(core, id, &batch).await {
                continue;
            }
            failures += 1;
            if failures > MAX_FAILURES {
                tracing::warn!(
                    hits = batch.hits,
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

/// Writes one taken batch; `false` when the store failed (the batch is to be put back: a hit's
/// write that fails surely did not apply, `Store::replace_if_version`).
async fn write<S: Store>(core: &Core<S>, id: &RecordId, batch: &HitBatch) -> bool {
    let Ok(basis) = core.read(id).await else {
        return false;
    };
    let ran = core
        .run(id, basis, |current, now| {
            Ok(match ledger::add_hits(current, batch, now) {
                Some(transition) => {
                    if let Change::Replace {
                        expected_version, ..
                    } = transition.change
                    {
                        // Decided to write over this version: past it, the store may hold them.
                        core.hits.writing(id, expected_version);
                    }
                    (transition, true)
                }
                None => (nothing(), false),
            })
        })
        .await;
    match ran {
        Ok(Ran {
            record: Some(written),
            extra: true,
            ..
        }) => core.hits.written(id, written.version),
        // No record takes them (gone, or created afresh): nothing to count them on.
        Ok(_) => core.hits.void(id),
        Err(_) => return false,
    }
    true
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
