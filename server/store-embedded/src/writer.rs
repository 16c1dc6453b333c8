//! The embedded store's single writer thread: group commit of conditional writes.
//!
//! Callers queue requests; the thread takes everything queued (up to `MAX_BATCH` requests, and no
//! more once they carry `MAX_BATCH_BYTES`, so that a frame stays far below what its length field
//! holds) and applies each conditional write in order, its records staged over the overlay
//! (`overlay`: the records not in redb's B-tree yet) and its index changes in one redb
//! transaction. The batch's effects go to the write-ahead log (`wal`) as one frame, synced if any
//! write in the batch must be durable, and only then are its records added to the overlay, the
//! transaction committed — without an fsync of its own, and only if it wrote anything — and
//! every caller answered: a write is durable before its RPC answers, and visible only once
//! durable. Records unchanged for a tick go into the records table with the next batch's
//! transaction, like the index moves (`pending`).
//! Counter-only writes (dedup hits: `Op::Replace` with `durable: false`) force no sync and make
//! no one wait: taken in the same batch as others, they go in a transaction and log frame of
//! their own right after the others are answered (the next sync covers their frame). So a hot
//! key's flushed receipts — a whole record of up to 64 events — lengthen neither the frame the
//! Claims beside them wait to sync nor the apply before it. A checkpoint — a durable redb commit
//! every `CHECKPOINT_EVERY`, when the log grows past `MAX_LOG_BYTES`, on a flush and at the end —
//! lets the log start over; it also writes the net listing and expiry moves the writer kept in
//! memory since the last one (`pending`: batches write those unchanged for a tick). The store is
//! opened, and the log replayed, before the thread starts (`recovery`); closing it ends with a
//! checkpoint that records a clean shutdown (`meta`).

use super::cache::Cache;
use super::codec::{self, Encoded};
use super::internal;
use super::meta::{set_clean, set_mark, set_seq};
use super::overlay::{self, Overlay};
use super::pending::{Moves, Pending, TICK};
use super::tables;
use super::wal::{Effect, Wal};
use super::EXPIRY;
use oncekey_ledger::{Millis, Record, RecordId};
use oncekey_store::{Cas, StoreError};
use redb::{Database, Durability};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// Most writes committed together.
const MAX_BATCH: usize = 1024;
/// No more writes are taken into a batch once its writes carry this many bytes. A batch's log
/// frame then holds at most this plus one write (a record with a body of at most
/// `--max-result-bytes`, 64 MiB, plus its metadata, error and history): far below the 4 GiB a
/// frame's length field holds. Small writes never reach it (1024 of them carry a few MiB).
pub(crate) const MAX_BATCH_BYTES: usize = 64 << 20;
/// Longest time between checkpoints while there are writes. A checkpoint's cost grows with the
/// pages written since the last one, and writes wait for it: at ~28 k writes/s one took ~14 ms
/// every second, ~4 ms every 250 ms, ~1.6 ms every 50 ms. Shorter stalls make a shorter tail
/// (Claim p99 in `oncekey bench --scenario cycle`: 4.3-4.7 ms at 50 ms, 5.1-6.9 ms at 250 ms,
/// interleaved runs), for ~1 ms of fixed cost per checkpoint on a writer that is mostly idle.
pub(crate) const CHECKPOINT_EVERY: Duration = Duration::from_millis(50);
/// Log size that forces a checkpoint.
const MAX_LOG_BYTES: u64 = 64 << 20;
/// How long the writer sleeps when nothing is waiting for a checkpoint.
const IDLE: Duration = Duration::from_secs(3600);

/// A record to store, encoded by the caller: the writer thread, which every write passes through,
/// then only compares and copies bytes.
pub(crate) struct Put {
    pub id: RecordId,
    pub key: Vec<u8>,
    /// `None`: kept until it settles (not in the expiry index).
    pub expires_at: Option<Millis>,
    pub encoded: Encoded,
}

impl Op {
    /// The most bytes the write adds to its batch's log frame (`frame::payload_len`: a record
    /// and its outcome put, or the outcome removed); deletes and sweeps remove keys only, a few
    /// hundred bytes each (a sweep up to `limit` of them), counted as nothing.
    fn bytes(&self) -> usize {
        match self {
            Op::Insert { put, .. } | Op::Replace { put, .. } => {
                let outcome = put.encoded.outcome.as_ref().map_or(0, Vec::len);
                2 * (9 + put.key.len()) + put.encoded.row.len() + outcome
            }
            Op::Delete { .. } | Op::Sweep { .. } | Op::Flush | Op::Close => 0,
        }
    }
}

impl Put {
    /// Encodes `record`.
    pub(crate) fn new(record: &Record) -> Self {
        Self {
            id: record.id.clone(),
            key: codec::encode_id(&record.id),
            expires_at: record.expires_at,
            encoded: codec::encode_record(record),
        }
    }
}

/// One queued write.
pub(crate) enum Op {
    Insert {
        put: Put,
        now: Millis,
    },
    Replace {
        put: Put,
        expected_version: u64,
        durable: bool,
        now: Millis,
    },
    Delete {
        id: RecordId,
        expected_version: u64,
        now: Millis,
    },
    Sweep {
        now: Millis,
        limit: usize,
    },
    Flush,
    /// A flush whose checkpoint records that the run ended cleanly (until the next write).
    Close,
}

/// What a write did.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Done {
    /// A conditional write's result.
    Cas(Cas),
    /// How many expired records a sweep removed.
    Swept(usize),
}

/// What the writer has done so far: group commit shows as `writes` > `fsyncs`.
#[derive(Debug, Default)]
pub struct Stats {
    /// Conditional writes applied or refused.
    pub writes: AtomicU64,
    /// Syncs of the log plus durable redb commits.
    pub fsyncs: AtomicU64,
    /// Durable redb commits (checkpoints).
    pub checkpoints: AtomicU64,
    /// Log frames replayed when the store opened.
    pub replayed: AtomicU64,
    /// Set once a write failed in a way that needs a restart.
    pub broken: AtomicBool,
}

/// A write and where to send its answer.
pub(crate) struct Request {
    pub op: Op,
    pub reply: oneshot::Sender<Result<Done, StoreError>>,
}

/// What the writer shares with readers.
pub(crate) struct Shared {
    pub stats: Arc<Stats>,
    pub cache: Arc<Cache>,
    pub pending: Arc<Pending>,
    pub overlay: Arc<Overlay>,
}

/// Starts the writer thread on `db` and its log `wal`, whose last frame is `seq`; it stops after a
/// final checkpoint when every sender is dropped.
pub(crate) fn spawn(
    db: Arc<Database>,
    wal: Wal,
    seq: u64,
    shared: Shared,
    checkpoint_every: Duration,
) -> Result<(mpsc::Sender<Request>, std::thread::JoinHandle<()>), StoreError> {
    let (tx, rx) = mpsc::channel::<Request>();
    let Shared {
        stats,
        cache,
        pending,
        overlay,
    } = shared;
    let mut writer = Writer {
        db,
        wal,
        seq,
        stats,
        cache,
        pending,
        overlay,
        expiring: Moves::default(),
        tick: 0,
        tick_at: Instant::now(),
        broken: None,
        clean: false,
        last_checkpoint: Instant::now(),
        checkpoint_every,
        max_batch_bytes: MAX_BATCH_BYTES,
    };
    let thread = std::thread::Builder::new()
        .name("oncekey-writer".into())
        .spawn(move || writer.run(&rx))
        .map_err(internal)?;
    Ok((tx, thread))
}

/// The writer thread's state.
struct Writer {
    db: Arc<Database>,
    wal: Wal,
    /// The last log frame's sequence number.
    seq: u64,
    stats: Arc<Stats>,
    /// Records readers cached: the keys a batch changes are kept out of it while it commits.
    cache: Arc<Cache>,
    /// The listing moves since the last durable commit, written by the next one.
    pending: Arc<Pending>,
    /// The records not yet in redb (`overlay`).
    overlay: Arc<Overlay>,
    /// The expiry moves since the last durable commit, written by the next one; only this
    /// thread reads the expiry index (its sweeps), so only it holds them.
    expiring: Moves<i64>,
    /// The moves' current tick (`pending::TICK`), and when it began.
    tick: u32,
    tick_at: Instant,
    /// Set when the log or a commit failed: what is durable is then unknown, so every later write
    /// is refused until a restart replays the log.
    broken: Option<String>,
    /// Whether the last durable commit recorded a clean shutdown: the next write first undoes it.
    clean: bool,
    last_checkpoint: Instant,
    /// `CHECKPOINT_EVERY`, unless a test needs the log to keep everything.
    checkpoint_every: Duration,
    /// `MAX_BATCH_BYTES`, unless a test needs a small one.
    max_batch_bytes: usize,
}

impl Writer {
    fn run(&mut self, rx: &mpsc::Receiver<Request>) {
        loop {
            let wait = if self.wal.len() > 0 {
                self.checkpoint_every
                    .saturating_sub(self.last_checkpoint.elapsed())
            } else {
                IDLE
            };
            let first = match rx.recv_timeout(wait) {
                Ok(request) => request,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let _ = self.checkpoint();
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            };
            let mut bytes = first.op.bytes();
            let mut batch = vec![first];
            while batch.len() < MAX_BATCH && bytes < self.max_batch_bytes {
                match rx.try_recv() {
                    Ok(request) => {
                        bytes += request.op.bytes();
                        batch.push(request);
                    }
                    Err(_) => break,
                }
            }
            let is_flush = |r: &Request| matches!(r.op, Op::Flush | Op::Close);
            if batch.iter().any(is_flush) {
                // A flush answers only once everything before it is in a durable redb commit.
                let close = batch.iter().any(|r| matches!(r.op, Op::Close));
                let (flushes, writes): (Vec<_>, Vec<_>) = batch.into_iter().partition(is_flush);
                self.commit_batch(writes);
                let result = self.checkpoint_marking(close);
                for request in flushes {
                    let _ = request
                        .reply
                        .send(result.clone().map(|()| Done::Cas(Cas::Applied)));
                }
                continue;
            }
            self.commit_batch(batch);
            if self.wal.len() >= MAX_LOG_BYTES
                || self.last_checkpoint.elapsed() >= self.checkpoint_every
            {
                let _ = self.checkpoint();
            }
        }
        let _ = self.checkpoint();
    }

    /// Commits `batch`, its counter-only writes after the others (see the module docs): the
    /// writes of one batch are all in flight at once, so any order of them is a valid one.
    fn commit_batch(&mut self, batch: Vec<Request>) {
        let (first, counters): (Vec<_>, Vec<_>) =
            batch.into_iter().partition(|r| needs_sync(&r.op));
        self.commit_group(first);
        self.commit_group(counters);
    }

    /// Applies `batch` in one transaction, logs its effects, and answers every request once the
    /// transaction is committed, and durable if any of its writes must be.
    fn commit_group(&mut self, mut batch: Vec<Request>) {
        if batch.is_empty() {
            return;
        }
        self.stats
            .writes
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        let outcome = match &self.broken {
            Some(why) => Err(StoreError::Unavailable(why.clone())),
            None => self.log_and_commit(&mut batch),
        };
        match outcome {
            Ok(answers) => {
                for (request, answer) in batch.into_iter().zip(answers) {
                    let _ = request.reply.send(answer);
                }
            }
            Err(e) => {
                for request in batch {
                    let _ = request.reply.send(Err(e.clone()));
                }
            }
        }
    }

    fn log_and_commit(
        &mut self,
        batch: &mut [Request],
    ) -> Result<Vec<Result<Done, StoreError>>, StoreError> {
        let begun = self.db.begin_write().map_err(internal);
        let mut txn = begun.map_err(|e| self.fail(e))?;
        let clean = self.clean;
        if clean {
            // The first write after a clean close: its commit is durable, so that a crash from
            // now on is not taken for a clean shutdown.
            set_clean(&txn, false)?;
        } else {
            txn.set_durability(Durability::None).map_err(internal)?;
        }
        let settle_before = self.next_tick();
        self.expiring.set_tick(self.tick);
        let (mut effects, mut changes) = (Vec::new(), Vec::new());
        let ops = batch.iter_mut().map(|r| &mut r.op);
        let (answers, applied, settled) = {
            let overlay = self.overlay.read();
            let (answers, applied) = tables::apply_all(
                &txn,
                Some(&overlay),
                ops,
                &mut effects,
                &mut changes,
                &mut self.expiring,
            )?;
            let settled = settle_before
                .map(|before| overlay::settled(&overlay, before, &applied.staged))
                .unwrap_or_default();
            (answers, applied, settled)
        };
        let durable = batch.iter().any(|r| needs_sync(&r.op));
        if !effects.is_empty() {
            // redb's own sequence number moves only at checkpoints, which hold every record.
            let seq = self.seq + 1;
            let logged = self.wal.append(seq, &effects);
            self.seq = seq;
            logged.map_err(|e| self.fail(e))?;
        }
        if durable && self.wal.unsynced() {
            self.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
            self.wal.sync().map_err(|e| self.fail(e))?;
        }
        let keys = || effects.iter().map(Effect::key);
        self.cache.begin_write(keys());
        // Under both locks, so that readers see the records and the moves at once, and either
        // in the overlay or in the snapshot they open.
        let mut records = self.overlay.write();
        let mut moves = self.pending.lock();
        let settled_rows = settled.iter().map(|(key, state)| (key, state));
        let committed = match clean {
            // A durable commit: the moves so far and this batch's records go in with it.
            true => {
                moves.set_tick(self.tick);
                moves.merge(changes);
                let written = write_moves(&txn, &moves, &self.expiring)
                    .and_then(|()| overlay::write_in(&txn, settled_rows))
                    .and_then(|()| overlay::write_in(&txn, applied.staged.iter()));
                let committed = written.and_then(|()| txn.commit().map_err(internal));
                if committed.is_ok() {
                    moves.clear();
                    self.expiring.clear();
                }
                committed
            }
            // The moves and records that have settled go in with it, the others wait; a batch
            // with nothing for redb commits nothing.
            false => {
                let settled_moves = settle_before
                    .map(|before| (moves.settled(before), self.expiring.settled(before)));
                let committed = if applied.wrote || settle_before.is_some() {
                    let written = match &settled_moves {
                        Some((listing, expiring)) => write_moves(&txn, listing, expiring),
                        None => Ok(()),
                    };
                    let written = written.and_then(|()| overlay::write_in(&txn, settled_rows));
                    written.and_then(|()| txn.commit().map_err(internal))
                } else {
                    txn.abort().map_err(internal)
                };
                if committed.is_ok() {
                    if let Some((listing, expiring)) = &settled_moves {
                        moves.remove_all(listing);
                        self.expiring.remove_all(expiring);
                    }
                    moves.set_tick(self.tick);
                    moves.merge(changes);
                }
                committed
            }
        };
        if committed.is_ok() {
            for (key, _) in &settled {
                records.remove(key);
            }
            overlay::merge(&mut records, applied.staged, self.tick);
        }
        drop(moves);
        drop(records);
        self.cache.end_write(keys());
        committed.map_err(|e| self.fail(e))?;
        self.clean = false;
        Ok(answers)
    }

    /// Starts a new tick if the current one is over; then returns the tick before which moves
    /// have settled (unchanged for a whole tick).
    fn next_tick(&mut self) -> Option<u32> {
        if self.tick_at.elapsed() < TICK {
            return None;
        }
        self.tick = self.tick.wrapping_add(1);
        self.tick_at = Instant::now();
        self.tick.checked_sub(1)
    }

    /// Marks the writer broken by `e` and returns the error to answer with.
    fn fail(&mut self, e: StoreError) -> StoreError {
        tracing::error!(error = %e, "embedded store: write failed; refusing writes until a restart");
        let why = format!("the embedded store failed to write ({e}); restart the server");
        self.broken = Some(why.clone());
        self.stats.broken.store(true, Ordering::Relaxed);
        StoreError::Unavailable(why)
    }

    /// A durable redb commit: everything logged so far is in redb's file, and the log starts over.
    fn checkpoint(&mut self) -> Result<(), StoreError> {
        self.checkpoint_marking(false)
    }

    /// A checkpoint that also records a clean shutdown when `clean`.
    fn checkpoint_marking(&mut self, clean: bool) -> Result<(), StoreError> {
        if let Some(why) = &self.broken {
            return Err(StoreError::Unavailable(why.clone()));
        }
        let started = Instant::now();
        // Readers go on meanwhile: the overlay's records are still there until they are in redb.
        let records = self.overlay.read();
        let mut moves = self.pending.lock();
        let written = moves.len();
        let result = (|| {
            let mut txn = self.db.begin_write().map_err(internal)?;
            txn.set_durability(Durability::Immediate)
                .map_err(internal)?;
            write_moves(&txn, &moves, &self.expiring)?;
            overlay::write_in(&txn, records.iter().map(|(key, slot)| (key, &slot.state)))?;
            set_seq(&txn, self.seq)?;
            set_mark(&txn, self.wal.marked())?;
            if clean {
                set_clean(&txn, true)?;
            }
            txn.commit().map_err(internal)
        })();
        let records_written = records.len();
        if result.is_ok() {
            moves.clear();
            self.expiring.clear();
        }
        drop(moves);
        drop(records);
        if result.is_ok() {
            self.overlay.write().clear();
        }
        self.last_checkpoint = Instant::now();
        match result {
            Ok(()) => {
                let took = started.elapsed();
                tracing::debug!(
                    took_us = took.as_micros() as u64,
                    log_bytes = self.wal.len(),
                    listing_moves = written,
                    records = records_written,
                    "embedded store: checkpoint"
                );
                self.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
                self.stats.checkpoints.fetch_add(1, Ordering::Relaxed);
                self.wal.reset();
                self.clean |= clean;
                Ok(())
            }
            Err(e) => {
                // The log still holds everything: nothing is lost. But redb refuses every write
                // after a failed commit's I/O error until it is opened again, and the overlay's
                // records can reach its file only through a checkpoint: refuse writes until a
                // restart replays the log (a file-size limit or a full disk lands here first,
                // as the checkpoint writes the records' pages).
                tracing::error!(error = %e, "embedded store: checkpoint failed");
                Err(self.fail(e))
            }
        }
    }
}

/// Writes the listing moves `listing` and the expiry moves `expiring` into their tables in `txn`.
fn write_moves(
    txn: &redb::WriteTransaction,
    listing: &Moves<u8>,
    expiring: &Moves<i64>,
) -> Result<(), StoreError> {
    listing.write_in(txn)?;
    if expiring.len() > 0 {
        expiring.write(&mut txn.open_table(EXPIRY).map_err(internal)?)?;
    }
    Ok(())
}

fn needs_sync(op: &Op) -> bool {
    !matches!(
        op,
        Op::Replace { durable: false, .. } | Op::Flush | Op::Close
    )
}

#[cfg(test)]
#[path = "writer_tests.rs"]
mod tests;
