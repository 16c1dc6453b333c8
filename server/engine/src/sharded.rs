//! A map from record id to `V` split into mutex-guarded shards by the id's hash, so requests on
//! different keys rarely wait for one another: what the engine's per-key in-memory state (parked
//! dedup hits, recently written records, first looks in flight) is kept in.

use oncekey_ledger::RecordId;
use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Mutex, MutexGuard};

/// How many shards.
pub(crate) const SHARDS: usize = 16;

/// Per-id values in `SHARDS` shards.
pub(crate) struct Sharded<V> {
    shards: Vec<Mutex<HashMap<RecordId, V>>>,
    hasher: RandomState,
}

impl<V> Default for Sharded<V> {
    fn default() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            hasher: RandomState::new(),
        }
    }
}

impl<V> Sharded<V> {
    /// The shard that holds `id`, locked (a panic while it was held does not poison it: every
    /// change to a shard is a single map operation).
    pub(crate) fn shard(&self, id: &RecordId) -> MutexGuard<'_, HashMap<RecordId, V>> {
        let i = self.hasher.hash_one(id) as usize % SHARDS;
        lock(&self.shards[i])
    }

    /// Every shard, each locked in turn.
    pub(crate) fn each(&self) -> impl Iterator<Item = MutexGuard<'_, HashMap<RecordId, V>>> {
        self.shards.iter().map(lock)
    }
}

fn lock<V>(shard: &Mutex<HashMap<RecordId, V>>) -> MutexGuard<'_, HashMap<RecordId, V>> {
    shard.lock().unwrap_or_else(|e| e.into_inner())
}
