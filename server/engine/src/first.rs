//! A key's first look, one at a time in this process, for stores whose failed insert returns the
//! live record (`Capabilities::insert_returns_live`). A Claim there inserts before it reads, so a
//! storm of duplicates of one key would send every one of them as a conditional insert — on CQL
//! an LWT on one partition, each a contended Paxos round, and under load some end with an unknown
//! outcome. Here the first Claim of a key inserts; duplicates that arrive while it does wait for
//! it and then read (a plain read, and a dedup hit then costs no conditional write). Only which
//! request goes first changes: every decision is still made on what the store returns, and every
//! write is conditional.

use super::sharded::Sharded;
use oncekey_ledger::RecordId;
use std::collections::HashMap;
use std::sync::{Arc, MutexGuard};
use tokio::sync::Notify;

/// The keys whose first look is in flight, sharded by id.
#[derive(Default)]
pub(crate) struct FirstLooks {
    shards: Sharded<Arc<Notify>>,
}

/// The first look at a key, in flight until dropped: the duplicates waiting for it go on then.
pub(crate) struct Leading<'a> {
    looks: &'a FirstLooks,
    id: RecordId,
}

impl Drop for Leading<'_> {
    fn drop(&mut self) {
        if let Some(done) = self.looks.shard(&self.id).remove(&self.id) {
            done.notify_waiters();
        }
    }
}

impl FirstLooks {
    fn shard(&self, id: &RecordId) -> MutexGuard<'_, HashMap<RecordId, Arc<Notify>>> {
        self.shards.shard(id)
    }

    /// `Some` when this Claim leads the first look at `id`; `None` once the first look that was
    /// in flight when it arrived has ended (the caller should read, not insert).
    pub(crate) async fn enter(&self, id: &RecordId) -> Option<Leading<'_>> {
        let ended = {
            let mut shard = self.shard(id);
            match shard.get(id) {
                None => {
                    shard.insert(id.clone(), Arc::new(Notify::new()));
                    return Some(Leading {
                        looks: self,
                        id: id.clone(),
                    });
                }
                Some(done) => {
                    // Listen before the lock is released, so the end cannot slip by.
                    let mut ended = Box::pin(done.clone().notified_owned());
                    ended.as_mut().enable();
                    ended
                }
            }
        };
        ended.await;
        None
    }
}
