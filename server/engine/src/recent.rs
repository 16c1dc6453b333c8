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

use super::sharded::Sharded;
use oncekey_ledger::{Record, RecordId, Status};
use std::collections::HashMap;

/// Records per shard before the shard is emptied: 16 × 4096 records of a few hundred bytes.
const SHARD_CAP: usize = 4096;

/// Recently written PROCESSING records, sharded by id.
#[derive(Default)]
pub(crate) struct Recent {
    shards: Sharded<Record>,
}

impl Recent {
    fn shard(&self, id: &RecordId) -> std::sync::MutexGuard<'_, HashMap<RecordId, Record>> {
        self.shards.shard(id)
    }

    /// The record last written for `id` by this process, if it is still remembered.
    pub(crate) fn get(&self, id: &RecordId) -> Option<Record> {
        self.shard(id).get(id).cloned()
    }

    /// Notes that `record` was just written: remembered while PROCESSING, forgotten once settled.
    pub(crate) fn wrote(&self, record: &Record) {
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
    pub(crate) fn forget(&self, id: &RecordId) {
        self.shard(id).remove(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sharded::SHARDS;
    use oncekey_ledger::{ClaimArgs, Semantics};

    fn processing(key: &str) -> Record {
        let args = ClaimArgs::for_test([1; 32], Semantics::AtLeastOnce, 1000, 60_000, "w");
        let id = RecordId::new("t", "ns", key);
        oncekey_ledger::claim(&id, None, &args, 0)
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
        let held: usize = recent.shards.each().map(|s| s.len()).sum();
        assert!(held <= SHARDS * SHARD_CAP, "{held}");
        assert!(held > 0);
    }
}
