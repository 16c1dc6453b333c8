//! The embedded store's single writer thread: group commit of conditional writes.
//!
//! Callers queue requests; the thread takes everything queued (up to `MAX_BATCH`), applies each
//! conditional write in order inside one redb transaction, commits once — with an fsync if any write
//! in the batch must be durable — and only then answers. Counter-only writes ride along without
//! forcing an fsync; an idle second or a shutdown flush makes them durable too.

use super::{codec, EXPIRY, RECORDS};
use crate::ledger::{Millis, Record, RecordId};
use crate::store::{Cas, StoreError};
use redb::{Database, Durability, ReadableTable, Table, WriteTransaction};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;
use tokio::sync::oneshot;

/// Most writes committed together.
const MAX_BATCH: usize = 1024;
/// How long non-durable writes may wait for an fsync when nothing else comes.
const LAZY_FLUSH: Duration = Duration::from_secs(1);

/// One queued write.
pub enum Op {
    Insert {
        record: Record,
        now: Millis,
    },
    Replace {
        record: Record,
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
}

/// What a write did.
#[allow(clippy::large_enum_variant)]
pub enum Done {
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
    /// Commits that forced an fsync.
    pub fsyncs: AtomicU64,
}

/// A write and where to send its answer.
pub struct Request {
    pub op: Op,
    pub reply: oneshot::Sender<Result<Done, StoreError>>,
}

fn internal(e: impl std::fmt::Display) -> StoreError {
    StoreError::Internal(e.to_string())
}

/// Creates the tables so that readers never see them missing.
pub fn create_tables(db: &Database) -> Result<(), StoreError> {
    let txn = db.begin_write().map_err(internal)?;
    txn.open_table(RECORDS).map_err(internal)?;
    txn.open_table(EXPIRY).map_err(internal)?;
    txn.commit().map_err(internal)
}

/// Starts the writer thread; it stops (after a final durable commit) when every sender is dropped.
pub fn spawn(db: Arc<Database>, stats: Arc<Stats>) -> Result<mpsc::Sender<Request>, StoreError> {
    let (tx, rx) = mpsc::channel::<Request>();
    std::thread::Builder::new()
        .name("oncekey-writer".into())
        .spawn(move || run(&db, &rx, &stats))
        .map_err(internal)?;
    Ok(tx)
}

fn run(db: &Database, rx: &mpsc::Receiver<Request>, stats: &Stats) {
    let mut lazy_pending = false;
    loop {
        let first = match rx.recv_timeout(LAZY_FLUSH) {
            Ok(request) => request,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if lazy_pending && commit_batch(db, Vec::new(), true, stats).is_ok() {
                    lazy_pending = false;
                }
                continue;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(request) => batch.push(request),
                Err(_) => break,
            }
        }
        let durable = batch.iter().any(|r| needs_fsync(&r.op));
        match commit_batch(db, batch, durable, stats) {
            // A durable commit also makes every earlier non-durable one durable.
            Ok(()) => lazy_pending = !durable,
            Err(e) => tracing::error!(error = %e, "embedded store commit failed"),
        }
    }
    if lazy_pending {
        let _ = commit_batch(db, Vec::new(), true, stats);
    }
}

fn needs_fsync(op: &Op) -> bool {
    !matches!(op, Op::Replace { durable: false, .. })
}

/// Applies `batch` in one transaction and answers every request after the commit.
fn commit_batch(
    db: &Database,
    batch: Vec<Request>,
    durable: bool,
    stats: &Stats,
) -> Result<(), StoreError> {
    stats
        .writes
        .fetch_add(batch.len() as u64, Ordering::Relaxed);
    if durable {
        stats.fsyncs.fetch_add(1, Ordering::Relaxed);
    }
    let outcome = (|| {
        let mut txn = db.begin_write().map_err(internal)?;
        txn.set_durability(if durable {
            Durability::Immediate
        } else {
            Durability::None
        })
        .map_err(internal)?;
        let answers = apply_all(&txn, &batch)?;
        txn.commit().map_err(internal)?;
        Ok::<_, StoreError>(answers)
    })();
    match outcome {
        Ok(answers) => {
            for (request, answer) in batch.into_iter().zip(answers) {
                let _ = request.reply.send(answer);
            }
            Ok(())
        }
        Err(e) => {
            for request in batch {
                let _ = request.reply.send(Err(StoreError::Internal(e.to_string())));
            }
            Err(e)
        }
    }
}

fn apply_all(
    txn: &WriteTransaction,
    batch: &[Request],
) -> Result<Vec<Result<Done, StoreError>>, StoreError> {
    let mut records = txn.open_table(RECORDS).map_err(internal)?;
    let mut expiry = txn.open_table(EXPIRY).map_err(internal)?;
    let mut answers = Vec::with_capacity(batch.len());
    for request in batch {
        answers.push(apply(&mut records, &mut expiry, &request.op));
    }
    Ok(answers)
}

type Records<'t> = Table<'t, &'static [u8], &'static [u8]>;
type Expiry<'t> = Table<'t, (i64, &'static [u8]), ()>;

/// What is stored under `key`: the expiry index entry of any stored record (expired or not),
/// and the record itself when it is live at `now`. One lookup serves both the condition and the
/// index upkeep of the write that follows.
fn stored(
    records: &Records<'_>,
    id: &RecordId,
    key: &[u8],
    now: Millis,
) -> Result<(Option<Millis>, Option<Record>), StoreError> {
    let Some(bytes) = records.get(key).map_err(internal)? else {
        return Ok((None, None));
    };
    let record = codec::decode_record(id.clone(), bytes.value())?;
    Ok((
        Some(record.expires_at),
        (!record.is_expired(now)).then_some(record),
    ))
}

/// Writes `record` under `key`; `old_expiry` is the expiry of the record it replaces, if any.
fn put(
    records: &mut Records<'_>,
    expiry: &mut Expiry<'_>,
    key: &[u8],
    record: &Record,
    old_expiry: Option<Millis>,
) -> Result<(), StoreError> {
    if let Some(old) = old_expiry {
        if old != record.expires_at {
            expiry.remove((old, key)).map_err(internal)?;
        }
    }
    records
        .insert(key, codec::encode_record(record).as_slice())
        .map_err(internal)?;
    expiry
        .insert((record.expires_at, key), ())
        .map_err(internal)?;
    Ok(())
}

fn apply(records: &mut Records<'_>, expiry: &mut Expiry<'_>, op: &Op) -> Result<Done, StoreError> {
    match op {
        Op::Insert { record, now } => {
            let key = codec::encode_id(&record.id);
            let (old_expiry, current) = stored(records, &record.id, &key, *now)?;
            if let Some(current) = current {
                return Ok(Done::Cas(Cas::Conflict(Some(current))));
            }
            put(records, expiry, &key, record, old_expiry)?;
            Ok(Done::Cas(Cas::Applied))
        }
        Op::Replace {
            record,
            expected_version,
            now,
            ..
        } => {
            let key = codec::encode_id(&record.id);
            match stored(records, &record.id, &key, *now)? {
                (old_expiry, Some(current)) if current.version == *expected_version => {
                    put(records, expiry, &key, record, old_expiry)?;
                    Ok(Done::Cas(Cas::Applied))
                }
                (_, current) => Ok(Done::Cas(Cas::Conflict(current))),
            }
        }
        Op::Delete {
            id,
            expected_version,
            now,
        } => {
            let key = codec::encode_id(id);
            match stored(records, id, &key, *now)?.1 {
                Some(current) if current.version == *expected_version => {
                    records.remove(key.as_slice()).map_err(internal)?;
                    expiry
                        .remove((current.expires_at, key.as_slice()))
                        .map_err(internal)?;
                    Ok(Done::Cas(Cas::Applied))
                }
                current => Ok(Done::Cas(Cas::Conflict(current))),
            }
        }
        Op::Sweep { now, limit } => sweep(records, expiry, *now, *limit).map(Done::Swept),
        Op::Flush => Ok(Done::Cas(Cas::Applied)),
    }
}

/// Removes up to `limit` records whose expires_at is at or before `now`, oldest first.
fn sweep(
    records: &mut Records<'_>,
    expiry: &mut Expiry<'_>,
    now: Millis,
    limit: usize,
) -> Result<usize, StoreError> {
    let mut due: Vec<(i64, Vec<u8>)> = Vec::new();
    for entry in expiry.range((i64::MIN, &[][..])..).map_err(internal)? {
        let (k, _) = entry.map_err(internal)?;
        let (at, key) = k.value();
        if at > now || due.len() >= limit {
            break;
        }
        due.push((at, key.to_vec()));
    }
    for (at, key) in &due {
        expiry.remove((*at, key.as_slice())).map_err(internal)?;
        records.remove(key.as_slice()).map_err(internal)?;
    }
    Ok(due.len())
}
