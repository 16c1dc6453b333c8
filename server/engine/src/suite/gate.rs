//! A store wrapper for the suite that can hold the next dedup-hit write (a non-durable
//! `replace_if_version`) until the test lets it go, so that cases can run other requests while
//! a background hit flush is between its read and its write; that can hold the next insert and
//! count them; and that can fail the next reads the way a store that times out now and then does.

use oncekey_ledger::{AttentionCounts, Millis, Record, RecordId};
use oncekey_store::{Capabilities, Cas, ListPage, ListQuery, ScanPage, Store, StoreError};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// Signals of one held write: `entered` fires when the write arrives (before it reaches the
/// store), and the write proceeds once `release` is sent (or dropped).
pub(super) struct Held {
    /// Resolves when the held write has arrived.
    pub entered: oneshot::Receiver<()>,
    /// Lets the held write proceed.
    pub release: oneshot::Sender<()>,
}

type Hold = (oneshot::Sender<()>, oneshot::Receiver<()>);

/// `S`, with a gate on dedup-hit writes, inserts and reads.
pub(super) struct Gated<S> {
    inner: S,
    gate: Gate,
}

/// Arms the gate of a `Gated` store.
#[derive(Clone, Default)]
pub(super) struct Gate {
    hit: Arc<Mutex<Option<Hold>>>,
    insert: Arc<Mutex<Option<Hold>>>,
    failing_reads: Arc<AtomicU32>,
    inserts: Arc<AtomicU32>,
}

impl Gate {
    /// Holds the next dedup-hit write.
    pub(super) fn arm(&self) -> Held {
        Self::arm_one(&self.hit)
    }

    /// Holds the next `insert_if_absent`.
    pub(super) fn arm_insert(&self) -> Held {
        Self::arm_one(&self.insert)
    }

    fn arm_one(slot: &Mutex<Option<Hold>>) -> Held {
        let (entered_tx, entered) = oneshot::channel();
        let (release, release_rx) = oneshot::channel();
        *slot.lock().unwrap() = Some((entered_tx, release_rx));
        Held { entered, release }
    }

    /// Fails the next `n` reads (`get`, `get_brief`) with `StoreError::Unavailable`.
    pub(super) fn fail_reads(&self, n: u32) {
        self.failing_reads.store(n, Ordering::SeqCst);
    }

    /// How many of the reads `fail_reads` asked to fail are still to come.
    pub(super) fn reads_to_fail(&self) -> u32 {
        self.failing_reads.load(Ordering::SeqCst)
    }

    /// How many `insert_if_absent` calls the store has had.
    pub(super) fn inserts(&self) -> u32 {
        self.inserts.load(Ordering::SeqCst)
    }

    /// Waits at `slot`'s hold, if it is armed.
    async fn pass(slot: &Mutex<Option<Hold>>) {
        let held = slot.lock().unwrap().take();
        if let Some((entered, release)) = held {
            let _ = entered.send(());
            let _ = release.await;
        }
    }
}

impl<S> Gated<S> {
    /// Wraps `inner`; returns the store and its gate.
    pub(super) fn new(inner: S) -> (Self, Gate) {
        let gate = Gate::default();
        let store = Self {
            inner,
            gate: gate.clone(),
        };
        (store, gate)
    }

    /// `Err` when this read is to fail.
    fn read_gate(&self) -> Result<(), StoreError> {
        let fail = self
            .gate
            .failing_reads
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        match fail {
            Ok(_) => Err(StoreError::Unavailable("the gate failed this read".into())),
            Err(_) => Ok(()),
        }
    }
}

impl<S: Store> Store for Gated<S> {
    async fn get(&self, id: &RecordId, now: Millis) -> Result<Option<Record>, StoreError> {
        self.read_gate()?;
        self.inner.get(id, now).await
    }

    async fn get_brief(&self, id: &RecordId, now: Millis) -> Result<Option<Record>, StoreError> {
        self.read_gate()?;
        self.inner.get_brief(id, now).await
    }

    async fn insert_if_absent(&self, record: &Record, now: Millis) -> Result<Cas, StoreError> {
        self.gate.inserts.fetch_add(1, Ordering::SeqCst);
        Gate::pass(&self.gate.insert).await;
        self.inner.insert_if_absent(record, now).await
    }

    async fn replace_if_version(
        &self,
        record: &Record,
        expected_version: u64,
        durable: bool,
        now: Millis,
    ) -> Result<Cas, StoreError> {
        if !durable {
            Gate::pass(&self.gate.hit).await;
        }
        self.inner
            .replace_if_version(record, expected_version, durable, now)
            .await
    }

    async fn replace(
        &self,
        record: &Record,
        previous: &Record,
        durable: bool,
        now: Millis,
    ) -> Result<Cas, StoreError> {
        match durable {
            true => self.inner.replace(record, previous, durable, now).await,
            false => {
                self.replace_if_version(record, previous.version, durable, now)
                    .await
            }
        }
    }

    async fn list(&self, query: ListQuery<'_>, now: Millis) -> Result<ListPage, StoreError> {
        self.inner.list(query, now).await
    }

    async fn attention(&self, now: Millis) -> Result<AttentionCounts, StoreError> {
        self.inner.attention(now).await
    }

    async fn scan(
        &self,
        after: Option<&[u8]>,
        limit: usize,
        now: Millis,
    ) -> Result<ScanPage, StoreError> {
        self.inner.scan(after, limit, now).await
    }

    fn page_token_key(&self) -> [u8; 32] {
        self.inner.page_token_key()
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
