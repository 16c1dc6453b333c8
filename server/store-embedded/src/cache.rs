//! A cache of stored records' bytes in front of redb's B-tree, for the reads that dominate an
//! agent-heavy load: every replayed Claim reads its record, and a read transaction, a table open
//! and a B-tree descent cost more than the decoding. Bounded in bytes; records are cached when
//! read, never when written.
//!
//! Coherence with the single writer: before committing a batch the writer calls `begin_write`
//! with the keys it changes (their entries go, and until `end_write` no read may put them back),
//! and `end_write` after the commit. Each also moves its shard's generation on, and a read puts
//! what it read back only if the generation is still the one it saw when it missed: a read that
//! started before a write can never cache what that write replaced. So a key changed by a batch
//! is read from redb until the batch is committed and answered, and a read never sees a value
//! older than one an earlier read returned.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, Mutex, MutexGuard};

const SHARDS: usize = 64;

/// A cache of encoded records keyed by encoded id.
pub(crate) struct Cache {
    shards: Box<[Mutex<Shard>]>,
    hasher: RandomState,
    /// Bytes one shard may hold.
    shard_budget: usize,
}

#[derive(Default)]
struct Shard {
    entries: HashMap<Box<[u8]>, Arc<[u8]>>,
    /// Bytes of keys and values held.
    bytes: usize,
    /// Moves on with every write to a key of this shard.
    generation: u64,
    /// Hashes of keys a batch is writing now, with how many writes.
    writing: HashMap<u64, u32>,
}

/// What a lookup found.
pub(crate) enum Lookup {
    /// The stored bytes.
    Hit(Arc<[u8]>),
    /// Not cached: read the store, then `fill` with this ticket.
    Miss(Ticket),
}

/// Where and when a lookup missed.
pub(crate) struct Ticket {
    hash: u64,
    generation: u64,
}

impl Cache {
    /// A cache holding at most about `budget` bytes.
    pub(crate) fn new(budget: usize) -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            hasher: RandomState::new(),
            shard_budget: budget / SHARDS,
        }
    }

    fn shard(&self, hash: u64) -> MutexGuard<'_, Shard> {
        self.shards[hash as usize % SHARDS]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// The cached bytes of `key`, or a ticket to fill it with.
    pub(crate) fn lookup(&self, key: &[u8]) -> Lookup {
        let hash = self.hasher.hash_one(key);
        let shard = self.shard(hash);
        match shard.entries.get(key) {
            Some(value) => Lookup::Hit(value.clone()),
            None => Lookup::Miss(Ticket {
                hash,
                generation: shard.generation,
            }),
        }
    }

    /// Caches `value`, read from the store after `ticket`'s lookup, unless a write to the shard
    /// happened since or is happening to this key (it would be stale), or it is too large.
    pub(crate) fn fill(&self, key: &[u8], value: &[u8], ticket: Ticket) {
        let size = key.len() + value.len();
        if size > self.shard_budget / 8 {
            return;
        }
        let mut shard = self.shard(ticket.hash);
        if shard.generation != ticket.generation || shard.writing.contains_key(&ticket.hash) {
            return;
        }
        if shard.bytes + size > self.shard_budget {
            // Full: let about half go (in no particular order) rather than track recency.
            let mut keep = false;
            let mut freed = 0;
            shard.entries.retain(|k, v| {
                keep = !keep;
                if !keep {
                    freed += k.len() + v.len();
                }
                keep
            });
            shard.bytes -= freed;
        }
        if let Some(old) = shard.entries.insert(key.into(), value.into()) {
            shard.bytes -= key.len() + old.len();
        }
        shard.bytes += size;
    }

    /// A batch is about to commit changes to `keys`: drop them, and keep them out until
    /// `end_write`.
    pub(crate) fn begin_write<'k>(&self, keys: impl IntoIterator<Item = &'k [u8]>) {
        for key in keys {
            let hash = self.hasher.hash_one(key);
            let mut shard = self.shard(hash);
            shard.generation += 1;
            *shard.writing.entry(hash).or_default() += 1;
            if let Some(old) = shard.entries.remove(key) {
                shard.bytes -= key.len() + old.len();
            }
        }
    }

    /// The batch `begin_write` announced is committed (or failed): its keys may be cached again,
    /// from reads that start from now on.
    pub(crate) fn end_write<'k>(&self, keys: impl IntoIterator<Item = &'k [u8]>) {
        for key in keys {
            let hash = self.hasher.hash_one(key);
            let mut shard = self.shard(hash);
            shard.generation += 1;
            if let Some(count) = shard.writing.get_mut(&hash) {
                *count -= 1;
                if *count == 0 {
                    shard.writing.remove(&hash);
                }
            }
        }
    }

    /// Bytes held now.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).bytes)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(cache: &Cache, key: &[u8]) -> Option<Vec<u8>> {
        match cache.lookup(key) {
            Lookup::Hit(value) => Some(value.to_vec()),
            Lookup::Miss(_) => None,
        }
    }

    fn ticket(cache: &Cache, key: &[u8]) -> Ticket {
        match cache.lookup(key) {
            Lookup::Miss(ticket) => ticket,
            Lookup::Hit(_) => panic!("cached"),
        }
    }

    #[test]
    fn a_read_that_raced_with_a_write_is_not_cached() {
        let cache = Cache::new(1 << 20);
        let key: &[u8] = b"k";
        let t = ticket(&cache, key);
        cache.fill(key, b"v1", t);
        assert_eq!(hit(&cache, key).as_deref(), Some(&b"v1"[..]));

        // A write drops the entry.
        cache.begin_write([key]);
        assert_eq!(hit(&cache, key), None);
        // A read that missed during the write read either version: not cached.
        let during = ticket(&cache, key);
        cache.fill(key, b"v1", during);
        assert_eq!(hit(&cache, key), None);
        cache.end_write([key]);
        // A read after the commit is.
        let after = ticket(&cache, key);
        cache.fill(key, b"v2", after);
        assert_eq!(hit(&cache, key).as_deref(), Some(&b"v2"[..]));
    }

    #[test]
    fn a_ticket_from_before_the_commit_is_refused_after_it() {
        let cache = Cache::new(1 << 20);
        let key: &[u8] = b"k";
        cache.begin_write([key]);
        let during = ticket(&cache, key);
        cache.end_write([key]);
        cache.fill(key, b"maybe-old", during);
        assert_eq!(hit(&cache, key), None);
    }

    #[test]
    fn stays_within_its_budget() {
        let budget = 64 * 1024;
        let cache = Cache::new(budget);
        for i in 0..10_000u32 {
            let key = i.to_be_bytes();
            let t = ticket(&cache, &key);
            cache.fill(&key, &[7; 100], t);
        }
        assert!(cache.bytes() <= budget, "{}", cache.bytes());
        assert!(cache.bytes() > budget / 4, "{}", cache.bytes());
        // Too large for a shard: never cached.
        let t = ticket(&cache, b"big");
        cache.fill(b"big", &vec![0; budget], t);
        assert_eq!(hit(&cache, b"big"), None);
    }
}
