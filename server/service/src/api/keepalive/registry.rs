//! One KeepAlive stream per lease and server: the streams open on each lease (tenant, namespace,
//! key, fencing token), so that a newer stream replaces the older one, and the renewals they
//! share, so that however many streams a lease gets it is renewed as often as by one.
//!
//! An entry lives while a stream of its lease does: the stream's `Registration` removes it when
//! the stream ends, unless a newer stream took it over.

use crate::ledger::{Lease, Millis, RecordId};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// Which lease a stream keeps alive.
pub(super) type LeaseKey = (RecordId, u64);

/// The last renewal of a lease by any of its streams.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Renewed {
    /// The lease it returned.
    pub lease: Lease,
    /// When (monotonic clock).
    pub at: tokio::time::Instant,
    /// The lease_ttl it renewed to.
    pub ttl: Millis,
}

/// The renewals of one lease, shared by the streams that follow each other on it: holding the
/// lock while renewing makes concurrent openers wait for one renewal instead of each writing one.
pub(super) type Shared = Arc<tokio::sync::Mutex<Option<Renewed>>>;

struct Entry {
    stream: u64,
    replace: oneshot::Sender<()>,
    renewals: Shared,
}

/// The KeepAlive streams of this server, by lease.
#[derive(Default)]
pub(crate) struct Registry {
    entries: Mutex<HashMap<LeaseKey, Entry>>,
    next: AtomicU64,
}

/// A stream's place in the registry; removes it when dropped.
pub(crate) struct Registration {
    registry: Arc<Registry>,
    key: LeaseKey,
    stream: u64,
    /// Resolves when a newer stream of the same lease replaced this one.
    pub replaced: oneshot::Receiver<()>,
    /// The renewals of this lease.
    pub renewals: Shared,
}

impl Registry {
    /// Registers a new stream of `key`, replacing the one there was (whose `replaced` resolves).
    pub(crate) fn register(self: &Arc<Self>, key: LeaseKey) -> Registration {
        let stream = self.next.fetch_add(1, Ordering::Relaxed);
        let (replace, replaced) = oneshot::channel();
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let renewals = match entries.remove(&key) {
            Some(older) => {
                let _ = older.replace.send(());
                older.renewals
            }
            None => Shared::default(),
        };
        entries.insert(
            key.clone(),
            Entry {
                stream,
                replace,
                renewals: renewals.clone(),
            },
        );
        Registration {
            registry: self.clone(),
            key,
            stream,
            replaced,
            renewals,
        }
    }

    /// How many leases have a stream.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut entries = self
            .registry
            .entries
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if entries
            .get(&self.key)
            .is_some_and(|e| e.stream == self.stream)
        {
            entries.remove(&self.key);
        }
    }
}
