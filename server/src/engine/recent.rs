//! Records this process wrote that are still PROCESSING: the likely next request for them is the
//! holder's Complete, Fail or Renew, which can then decide on the record it already knows instead
//! of reading it first (on CQL a QUORUM read, on the embedded store a read transaction and a
//! decode).
//!
//! A remembered record may be stale — another server took the lease over, a dedup hit was
//! flushed — and that is safe: every write is conditional on the version it was decided on, so a
//! stale decision fails its condition and the engine decides again on the record the store
//! returns. A decision that would not write (an error, nothing to change) is never trusted from
//! here: the engine reads the store and decides again.
//!
//! Bounded: a shard that reaches `SHARD_CAP` records is emptied.

use crate::ledger::{Record, RecordId, Status};
use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::Mutex;

const SHARDS: usize = 16;
/// Records per shard before the shard is emptied: 16 × 4096 records of a few hundred bytes.
const SHARD_CAP: usize = 4096;

/// Recently written PROCESSING records, sharded by id.
pub struct Recent {
    shards: Vec<Mutex<HashMap<RecordId, Record>>>,
    hasher: RandomState,
}

impl Default for Recent {
    fn default() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            hasher: RandomState::new(),
        }
    }
}

impl Recent {
    fn shard(&self, id: &RecordId) -> std::sync::MutexGuard<'_, HashMap<RecordId, Record>> {
        let i = self.hasher.hash_one(id) as usize % SHARDS;
        self.shards[i].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The record last written for `id` by this process, if it is still remembered.
    pub fn get(&self, id: &RecordId) -> Option<Record> {
        self.shard(id).get(id).cloned()
    }

    /// Notes that `record` was just written: remembered while PROCESSING, forgotten once settled.
    pub fn wrote(&self, record: &Record) {
        let mut shard = self.shard(&record.id);
        if record.status != Status::Processing {
            shard.remove(&record.id);
            return;
        }
        if shard.len() >= SHARD_CAP && !shard.contains_key(&record.id) {
            shard.clear();
        }
        shard.insert(record.id.clone(), record.clone());
    }

    /// Forgets `id` (its record was deleted).
    pub fn forget(&self, id: &RecordId) {
        self.shard(id).remove(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::{ClaimArgs, Semantics};

    fn processing(key: &str) -> Record {
        let args = ClaimArgs {
            fingerprint: [1; 32],
            lease_ttl: 1000,
            retention: 60_000,
            semantics: Semantics::AtLeastOnce,
            owner: "w".into(),
            parent: None,
            reconcile: false,
            require_approval: false,
            max_attempts: 0,
        };
        let id = RecordId::new("t", "ns", key);
        crate::ledger::claim(&id, None, &args, 0)
            .unwrap()
            .record()
            .clone()
    }

    #[test]
    fn remembers_processing_records_until_they_settle() {
        let recent = Recent::default();
        let mut record = processing("k");
        recent.wrote(&record);
        assert_eq!(recent.get(&record.id), Some(record.clone()));
        record.status = Status::Succeeded;
        recent.wrote(&record);
        assert_eq!(recent.get(&record.id), None);
        recent.wrote(&processing("k"));
        recent.forget(&record.id);
        assert_eq!(recent.get(&record.id), None);
    }

    #[test]
    fn stays_bounded() {
        let recent = Recent::default();
        for i in 0..SHARDS * SHARD_CAP * 2 {
            recent.wrote(&processing(&format!("k{i}")));
        }
        let held: usize = recent.shards.iter().map(|s| s.lock().unwrap().len()).sum();
        assert!(held <= SHARDS * SHARD_CAP, "{held}");
        assert!(held > 0);
    }
}
