//! A store wrapper for the suite that can hold the next dedup-hit write (a non-durable
//! `replace_if_version`) until the test lets it go, so that cases can run other requests while
//! a background hit flush is between its read and its write.

use crate::ledger::{Millis, Record, RecordId};
use crate::store::{Capabilities, Cas, Store, StoreError};
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// Signals of one held write: `entered` fires when the write arrives (before it reaches the
/// store), and the write proceeds once `release` is sent (or dropped).
pub struct Held {
    /// Resolves when the held write has arrived.
    pub entered: oneshot::Receiver<()>,
    /// Lets the held write proceed.
    pub release: oneshot::Sender<()>,
}

type Hold = (oneshot::Sender<()>, oneshot::Receiver<()>);

/// `S`, with a gate on dedup-hit writes.
pub struct Gated<S> {
    inner: S,
    hold: Arc<Mutex<Option<Hold>>>,
}

/// Arms the gate of a `Gated` store.
#[derive(Clone)]
pub struct Gate(Arc<Mutex<Option<Hold>>>);

impl Gate {
    /// Holds the next dedup-hit write.
    pub fn arm(&self) -> Held {
        let (entered_tx, entered) = oneshot::channel();
        let (release, release_rx) = oneshot::channel();
        *self.0.lock().unwrap() = Some((entered_tx, release_rx));
        Held { entered, release }
    }
}

impl<S> Gated<S> {
    /// Wraps `inner`; returns the store and its gate.
    pub fn new(inner: S) -> (Self, Gate) {
        let hold = Arc::new(Mutex::new(None));
        let gate = Gate(hold.clone());
        (Self { inner, hold }, gate)
    }
}

impl<S: Store> Store for Gated<S> {
    async fn get(&self, id: &RecordId, now: Millis) -> Result<Option<Record>, StoreError> {
        self.inner.get(id, now).await
    }

    async fn get_brief(&self, id: &RecordId, now: Millis) -> Result<Option<Record>, StoreError> {
        self.inner.get_brief(id, now).await
    }

    async fn insert_if_absent(&self, record: &Record, now: Millis) -> Result<Cas, StoreError> {
        self.inner.insert_if_absent(record, now).await
    }

    async fn replace_if_version(
        &self,
        record: &Record,
        expected_version: u64,
        durable: bool,
        now: Millis,
    ) -> Result<Cas, StoreError> {
        let held = if durable {
            None
        } else {
            self.hold.lock().unwrap().take()
        };
        if let Some((entered, release)) = held {
            let _ = entered.send(());
            let _ = release.await;
        }
        self.inner
            .replace_if_version(record, expected_version, durable, now)
            .await
    }

    async fn delete_if_version(
        &self,
        id: &RecordId,
        expected_version: u64,
        now: Millis,
    ) -> Result<Cas, StoreError> {
        self.inner
            .delete_if_version(id, expected_version, now)
            .await
    }

    async fn sweep_expired(&self, now: Millis, limit: usize) -> Result<usize, StoreError> {
        self.inner.sweep_expired(now, limit).await
    }

    async fn check_ready(&self) -> Result<(), StoreError> {
        self.inner.check_ready().await
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
}
