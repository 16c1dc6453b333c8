//! In-process wake-ups for Claims waiting on an in-flight operation (`Claim.wait`).
//!
//! A fixed set of shards, each a `Notify`, chosen by a hash of the record id: a settle wakes the
//! waiters of its shard, each re-reads its own record. No map to grow or clean, no busy loop;
//! a spurious wake-up costs one read.

use crate::ledger::RecordId;
use std::hash::{BuildHasher, RandomState};
use tokio::sync::Notify;

const SHARDS: usize = 64;

/// Wake-up channels for waiting Claims.
pub struct Waiters {
    shards: Vec<Notify>,
    hasher: RandomState,
}

impl Default for Waiters {
    fn default() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Notify::new()).collect(),
            hasher: RandomState::new(),
        }
    }
}

impl Waiters {
    /// The channel that `notify(id)` wakes.
    pub fn channel(&self, id: &RecordId) -> &Notify {
        let shard = self.hasher.hash_one(id) as usize % SHARDS;
        &self.shards[shard]
    }

    /// Wakes every Claim waiting on `id` (and, harmlessly, on ids that share its shard).
    pub fn notify(&self, id: &RecordId) {
        self.channel(id).notify_waiters();
    }
}
